"""Results pinned bit for bit: a refactor that changes any of them changed behaviour.

The hashes are SHA-256 (first 16 hex digits) of the center's float32 bytes after training.
If one of these fails after a change that was *meant* to change results (a new default, a
new noise scheme), say so in the commit and update the pin; otherwise the change is a bug.

The pins hold on any CPU: the update sums noise rows elementwise in a fixed order
(``es.rowsum``), not with a BLAS product whose kernel, and so whose last bits, depend on the
CPU model (the pins before 2026-11-25 held only on CPUs where OpenBLAS picks its SkylakeX
kernels). ``test_pins_do_not_depend_on_the_blas_kernel`` runs one under every kernel.
"""
import hashlib

import numpy as np
import pytest

import es
from es import seeding
from es.evaluators import evaluate_members
from es.optimizers import Adam
from es.strategy import OpenES


def digest(a) -> str:
    return hashlib.sha256(np.asarray(a).tobytes()).hexdigest()[:16]


def test_cartpole_defaults_after_5_generations():
    r = es.train(es.config_for("cartpole", seed=0, generations=5, reward_goal=1e9, eval_episodes=1))
    assert [round(m["center_return"], 3) for m in r.metrics] == [107.562, 109.375, 33.125, 17.812, 15.688]
    assert digest(r.center) == "9ad0da3154c0202a"


def test_cartpole_mlp_adam_ranks_table_noise_after_4_generations():
    r = es.train(es.config_for("cartpole", seed=2, generations=4, reward_goal=1e9, eval_episodes=1, hidden=[8],
                               optimizer="adam", learning_rate=0.05, shaping="centered_ranks", population=32,
                               noise="table"))
    assert digest(r.center) == "5fc0155f78f7249f"


def test_a_function_optimised_for_20_generations():
    r = es.optimize(lambda x, s: -float(np.sum((x - 1.0) ** 2)), np.zeros(5), seed=1, generations=20)
    assert digest(r.center) == "25d2996dd0d734e5"


@pytest.mark.slow
def test_a_pong_chunk_of_generation_0():
    pong = pytest.importorskip("pong.problem")
    p = pong.PongProblem(max_steps=400, num_envs=5)
    task = OpenES(p.initial_params(7), Adam(p.num_params, 0.01), population=8, sigma=0.1, seed=7).ask()
    seeds = seeding.episode_seeds(7, 0, 2)
    r, lengths, cr, cl, _ = evaluate_members(p, task, np.arange(8), seeds, seeds[:1])
    p.close()
    assert r.tolist() == [-9.0, -10.0, -7.0, -10.0, -10.0, -8.0, -10.0, -10.0]
    assert lengths.tolist() == [800] * 8 and (cr, cl) == (-10.0, 400)


def _openblas() -> bool:
    try:
        from threadpoolctl import threadpool_info
        return any(i.get("internal_api") == "openblas" for i in threadpool_info())
    except Exception:
        return False


@pytest.mark.skipif(not _openblas(), reason="NumPy does not use OpenBLAS here")
def test_pins_do_not_depend_on_the_blas_kernel():
    """The function pin under OpenBLAS's kernels for several CPU models, in fresh processes:
    one digest. SkylakeX's kernel only where this CPU has AVX-512: elsewhere OpenBLAS takes
    it as asked and a product that reaches its AVX-512 code dies of SIGILL."""
    import os
    import subprocess
    import sys
    code = ("import hashlib, numpy as np, es; r = es.optimize(lambda x, s: -float(np.sum((x - 1.0) ** 2)), "
            "np.zeros(5), seed=1, generations=20); print(hashlib.sha256(r.center.tobytes()).hexdigest()[:16])")
    seen = {}
    from child_env import has_cpu_feature
    for core in ("Haswell", "Zen", "Sandybridge") + (("SkylakeX",) if has_cpu_feature("AVX512F") else ()):
        env = {**os.environ, "OPENBLAS_CORETYPE": core}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        seen[core] = out.stdout.strip()
    assert set(seen.values()) == {"25d2996dd0d734e5"}, seen
