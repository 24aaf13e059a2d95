"""es.exact: the forward passes give the same bits on every x86-64 CPU.

Other CPUs are emulated on this one in fresh processes: ``OPENBLAS_CORETYPE`` picks another
OpenBLAS kernel, ``NPY_DISABLE_CPU_FEATURES`` turns NumPy's AVX-512 or AVX2 code off (as on a
PC without them). Before es.exact, HalfCheetah's MLP, the Pong policies and the keypoints'
softmax each gave other bits under one of these, and the pinned keypoints test failed on a
CPU without AVX-512.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from es import exact

from child_env import emulated_cpus, has_cpu_feature

ROOT = Path(__file__).resolve().parents[2]


def test_exp_is_within_two_ulp_and_keeps_its_special_values():
    x = np.concatenate([np.linspace(-745, 709.7, 200_001), np.random.default_rng(0).standard_normal(100_000) * 5])
    got, want = exact.exp(x), np.exp(x)
    normal = want > 1e-300
    assert (np.abs(got - want)[normal] <= 2 * np.spacing(want[normal])).all()
    with np.errstate(over="ignore"):
        special = np.array([0.0, -0.0, np.inf, -np.inf, 710.0, -746.0, 709.78, -745.0])
        assert np.array_equal(exact.exp(special), np.exp(special))
    assert np.isnan(exact.exp(np.nan)) and exact.exp(1.0).shape == () and exact.exp([[1.0]]).shape == (1, 1)


def test_tanh_is_within_six_float32_ulp_odd_and_saturates_at_one():
    x = np.concatenate([np.linspace(-12, 12, 400_001), np.geomspace(1e-30, 1e-2, 1000)]).astype(np.float32)
    got, want = exact.tanh(x), np.tanh(x.astype(np.float64)).astype(np.float32)
    assert got.dtype == np.float32
    assert (np.abs(got.astype(np.float64) - want) <= 6 * np.spacing(np.abs(want))).all()
    assert np.array_equal(exact.tanh(-x), -got)
    assert exact.tanh(np.float32(8.0)) == 1 and exact.tanh(np.float32(-np.inf)) == -1 and np.isnan(exact.tanh(np.nan))


def test_a_rows_product_does_not_depend_on_its_batch():
    rng = np.random.default_rng(1)
    h, w = rng.standard_normal((9, 64)).astype(np.float32), rng.standard_normal((9, 64, 64)).astype(np.float32)
    whole = exact.rows_times_matrices(h, w)
    assert all(np.array_equal(whole[i:i + 1], exact.rows_times_matrices(h[i:i + 1], w[i:i + 1])) for i in range(9))
    assert np.allclose(whole, np.matmul(h[:, None], w)[:, 0], rtol=1e-5, atol=1e-5)


# What every forward pass a worker's return depends on computes, as one digest.
DIGEST = r'''
import hashlib, numpy as np
from es import exact
from es.policies import MLPPolicy
from pong.policy import PongConvPolicy, PongDensePolicy
from pong.keypoints import PongKeypointsPolicy
from pong.pixels import BACKGROUND
rng = np.random.default_rng(0)
h = hashlib.sha256()
x = rng.standard_normal(50_000) * 40
h.update(exact.exp(x).tobytes() + exact.tanh(x.astype(np.float32) / 10).tobytes())
from es.noise import antithetic_noise
h.update(antithetic_noise(7, 3, np.arange(64), 50_000).tobytes())     # the noise (its tails call the C library)
for hidden, discrete in (((64, 64), False), ((), False), ((16,), True)):
    p = MLPPolicy(17, 6, hidden, discrete, low=-np.ones(6), high=np.ones(6))
    params = (0.3 * rng.standard_normal((40, p.num_params))).astype(np.float32)
    h.update(np.asarray(p.forward(p.unflatten(params), rng.standard_normal((40, 17)))).tobytes())
obs = np.clip(BACKGROUND[None, None] + rng.integers(-60, 60, (6, 4, 42, 42)) * (rng.random((6, 4, 42, 42)) < 0.02),
              0, 255).astype(np.uint8)
for p in (PongDensePolicy(6), PongConvPolicy(),
          PongKeypointsPolicy(3, (8,), True, pull_scale=0.25, conv="blas"),
          PongKeypointsPolicy(3, (8,), True, pull_scale=0.25, conv="taps", pull="windows", vbn=True)):
    params = (p.initial_params(0)[None] + 0.1 * rng.standard_normal((6, p.num_params))).astype(np.float32)
    layers = p.unflatten(params)
    h.update(np.asarray(p.forward(layers, obs)).tobytes())
    if hasattr(p, "features") and not isinstance(p, PongConvPolicy):
        f = p.features(obs) if isinstance(p, PongDensePolicy) else p.features(layers[0][0], obs)
        h.update(np.asarray(f).tobytes())
print(h.hexdigest()[:16])
'''


def _digest(extra_env: dict) -> str:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **extra_env, "PYTHONPATH": path}
    out = subprocess.run([sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.slow
def test_the_forward_passes_give_the_same_bits_on_every_emulated_cpu():
    """MLP (64, 64) and linear policies, the Pong policies, both keypoints front ends and the
    members' noise under four OpenBLAS kernels (three on a CPU without AVX-512), three NumPy
    SIMD levels and the C library without its FMA versions: one digest."""
    seen = {"this CPU": _digest({})}
    # SkylakeX's kernel is AVX-512 code: on a CPU without it the child dies of SIGILL (seen
    # in CI on an AMD EPYC), so it is one of the kernels only where this CPU can run it.
    skylake = [{"OPENBLAS_CORETYPE": "SkylakeX"}] if has_cpu_feature("AVX512F") else []
    for env in emulated_cpus() + skylake + [{"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA"}]:
        seen[" ".join(f"{k}={v}" for k, v in env.items())] = _digest(env)
    assert len(set(seen.values())) == 1, seen


PINNED_TESTS = ["tests/core/test_pinned.py", "tests/pong/test_pong_keypoints.py", "tests/pong/test_pong_objects.py"]


@pytest.mark.slow
def test_the_pinned_tests_pass_on_every_emulated_cpu():
    """The fast lane's pins (centers after training, keypoints and object features) under the
    emulated PCs: the pins hold on any x86-64 CPU, not only on CPUs like the one they were
    written on."""
    for env in emulated_cpus():
        # (not test_pins_do_not_depend_on_the_blas_kernel: it starts its own kernels' processes)
        # -n 0: one process; xdist's workers would each import everything again, on cores this
        # run's other tests are using
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-m", "not slow", "-k",
                              "pinned and not blas_kernel", "-p", "no:cacheprovider", *PINNED_TESTS],
                             cwd=ROOT, capture_output=True, text=True, env={**os.environ, **env}, timeout=900)
        assert out.returncode == 0, (env, out.stdout[-3000:])
