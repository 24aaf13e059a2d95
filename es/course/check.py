"""Checks a student runs after each graded cell, and the autograder runs the same ones.

    from es.course import check
    check.centered_ranks(centered_ranks)         # prints "OK ..." or raises CheckFailed

Every check compares against the reference implementation in ``es`` on seeded inputs, with a
stated tolerance, and when it fails it says which mistake the numbers point to.
"""
from __future__ import annotations

import numpy as np

# name -> (milestone, points, notebook, names the check needs from the notebook)
CHECKS: dict[str, tuple[str, int, str, tuple[str, ...]]] = {}


class CheckFailed(AssertionError):
    pass


def rel_error(x, y) -> float:
    """CS231n's relative error: max |x - y| / max(|x| + |y|)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return float(np.max(np.abs(x - y) / np.maximum(1e-8, np.abs(x) + np.abs(y))))


def _register(name, milestone, points, notebook, *needs):
    def wrap(fn):
        CHECKS[name] = (milestone, points, notebook, needs or (name,))

        def student_facing(*args, **kwargs):
            fn(*args, **kwargs)
            print(f"OK {name}: passed ({points} points when graded)")
            return True
        student_facing.__doc__, student_facing.__name__ = fn.__doc__, name
        student_facing.raw = fn
        return student_facing
    return wrap


def _fail(msg):
    raise CheckFailed(msg)


def _call(fn, *args, global_seed=None, elsewhere=False, draw_after=False):
    """Call a student's function: here (a notebook checking itself), or, when graded, in the
    student's kernel through the grader's proxy (``es.course.remote``), which only ever hands
    back plain data. ``RNG(seed)`` arguments become ``np.random.default_rng(seed)`` on the
    side that runs the function; ``global_seed`` seeds the global NumPy state first;
    ``elsewhere`` runs it twice in other processes (joblib) and returns both results;
    ``draw_after`` also returns the global state's next ``np.random.random()`` after the call."""
    if hasattr(fn, "probe"):
        return fn.probe(*args, global_seed=global_seed, elsewhere=elsewhere, draw_after=draw_after)
    from .wire import RNG
    args = [a.make() if isinstance(a, RNG) else a for a in args]
    if elsewhere:
        from joblib import Parallel, delayed
        return Parallel(n_jobs=2)(delayed(fn)(*args) for _ in range(2))
    if global_seed is not None:
        np.random.seed(global_seed)
    out = fn(*args)
    return (out, float(np.random.random())) if draw_after else out


def _close(got, want, tol, what):
    got = np.asarray(got)
    if got.shape != np.shape(want):
        _fail(f"{what}: expected shape {np.shape(want)}, got {got.shape}")
    err = rel_error(got, want)
    return err <= tol, err


# ---------------------------------------------------------------- milestone 1 (00, 01)
@_register("centered_ranks", "M1", 2, "00_es_from_scratch")
def centered_ranks(fn):
    """Tolerance 1e-6 against es.shaping.centered_ranks, on returns with ties."""
    from ..shaping import centered_ranks as ref
    x = np.array([3.0, -1.0, 3.0, 10.0, 0.5, -7.0, 3.0, 2.0])
    got = np.asarray(fn(x.copy()), dtype=np.float64)
    want = ref(x)
    ok, err = _close(got, want, 1e-6, "centered_ranks")
    if ok:
        return
    if got.min() >= -1e-9 and abs(got.max() - 1) < 1e-6:
        _fail("centered_ranks: values span [0, 1]; forgot to center the ranks (subtract 0.5 so they sum to zero)")
    if rel_error(got, -want) < 1e-6:
        _fail("centered_ranks: the order is reversed; the best return must get +0.5")
    if abs(got.sum()) > 1e-6:
        _fail(f"centered_ranks: weights sum to {got.sum():.3g}, not 0; forgot to center the ranks")
    if not (got[0] == got[2] == got[6]):
        _fail("centered_ranks: the three tied returns (3.0) got different weights; ties must share their mean rank")
    _fail(f"centered_ranks: relative error {err:.2g} > 1e-6 against the reference")


@_register("es_gradient", "M1", 2, "00_es_from_scratch")
def es_gradient(fn):
    """grad = noise.T @ weights / (population * sigma), tolerance 1e-5."""
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((40, 7))
    weights = rng.standard_normal(40)
    sigma = 0.05
    want = noise.T @ weights / (40 * sigma)
    got = np.asarray(fn(noise.copy(), weights.copy(), sigma), dtype=np.float64)
    ok, err = _close(got, want, 1e-5, "es_gradient")
    if ok:
        return
    if rel_error(got, want * sigma) < 1e-5:
        _fail("es_gradient: off by a factor sigma; divided by the population but not by sigma")
    if rel_error(got, want * 40) < 1e-5:
        _fail("es_gradient: off by a factor of the population size; forgot to divide by the population")
    if rel_error(got, -want) < 1e-5:
        _fail("es_gradient: wrong sign; the estimate must point towards higher returns")
    _fail(f"es_gradient: relative error {err:.2g} > 1e-5 against noise.T @ weights / (population * sigma)")


@_register("antithetic_noise", "M1", 1, "01_cartpole")
def antithetic_noise(fn):
    """Rows 2k and 2k+1 are +eps_k and -eps_k; drawn from the generator passed in."""
    from .wire import RNG
    a = np.asarray(_call(fn, RNG(1), 8, 5))
    if a.shape != (8, 5):
        _fail(f"antithetic_noise: expected shape (population, dim) = (8, 5), got {a.shape}")
    if not np.allclose(a[0::2], -a[1::2]):
        _fail("antithetic_noise: members 2k and 2k+1 must be mirrored (+eps_k and -eps_k)")
    if np.allclose(a[0], a[2]) or np.allclose(a[0], -a[2]):
        _fail("antithetic_noise: different pairs got the same noise")
    b = np.asarray(_call(fn, RNG(1), 8, 5))
    c = np.asarray(_call(fn, RNG(2), 8, 5))
    if not np.array_equal(a, b) or np.array_equal(a, c):
        _fail("antithetic_noise: draw from the generator you are given (same seed -> same noise), not np.random")


@_register("adam_update", "M1", 2, "01_cartpole")
def adam_update(fn):
    """Three Adam ascent steps against es.optimizers.Adam, tolerance 1e-5."""
    from ..optimizers import Adam
    theta = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    ref, state, got = Adam(3, 0.1), None, theta.copy()
    want = theta.copy()
    grads = [np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -1.0]), np.array([-0.5, 0.2, 0.2])]
    for g in grads:
        got, state = fn(got, g.astype(np.float32), state, 0.1)
        want, _ = ref.update(want, g.astype(np.float32))
    ok, err = _close(got, want, 1e-5, "adam_update")
    if ok:
        return
    if rel_error(got - theta, -(want - theta)) < 1e-4:
        _fail("adam_update: it descends; ES maximises the return, so add the step")
    # the same three steps without bias correction
    m = v = np.zeros(3)
    nb = theta.astype(np.float64)
    for g in grads:
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        nb = nb + 0.1 * m / (np.sqrt(v) + 1e-8)
    if rel_error(got, nb) < 1e-4:
        _fail("adam_update: no bias correction; scale by sqrt(1 - beta2**t) / (1 - beta1**t)")
    _fail(f"adam_update: relative error {err:.2g} > 1e-5 after three steps")


@_register("train_cartpole", "M1", 3, "01_cartpole")
def train_cartpole(fn):
    """train_cartpole(seed) -> linear policy parameters (10 floats, es.policies.MLPPolicy(4, 2, ())
    layout); solved = mean return >= 475 on CartPole-v1 seeds 1000..1019."""
    from ..envs import EnvProblem
    params = np.asarray(fn(0), dtype=np.float32).ravel()
    if params.size != 10:
        _fail(f"train_cartpole: expected 10 parameters (4x2 weights + 2 biases), got {params.size}")
    returns, _ = EnvProblem("CartPole-v1", hidden=()).play(params, np.arange(1000, 1020))
    if returns.mean() < 475:
        _fail(f"train_cartpole: the policy scores {returns.mean():.1f} on seeds 1000..1019, below 475")


# ---------------------------------------------------------------- milestone 2 (02)
@_register("member_noise", "M2", 2, "02_parallel")
def member_noise(fn):
    """Noise of one member from (seed, generation, member) alone, never the global state."""
    a, after = _call(fn, 7, 3, 5, 6, global_seed=123, draw_after=True)
    a = np.asarray(a)
    if after != np.random.RandomState(123).random_sample():
        _fail("member_noise: it uses the global np.random state (it seeds or draws from it); build a Generator "
              "from (seed, generation, member)")
    if a.shape != (6,):
        _fail(f"member_noise: expected shape (dim,) = (6,), got {a.shape}")
    if not np.array_equal(a, np.asarray(_call(fn, 7, 3, 5, 6, global_seed=124))):
        _fail("member_noise: it uses the global np.random state (the result changes with it); build a Generator "
              "from (seed, generation, member)")
    if not np.array_equal(a, np.asarray(_call(fn, 7, 3, 5, 6, global_seed=123))):
        _fail("member_noise: two calls with the same (seed, generation, member) differ")
    if np.allclose(a, _call(fn, 7, 3, 6, 6)) or np.allclose(a, _call(fn, 7, 4, 5, 6)) or np.allclose(a, _call(fn, 8, 3, 5, 6)):
        _fail("member_noise: different members, generations or seeds must get different noise")
    elsewhere = _call(fn, 7, 3, 5, 6, elsewhere=True)
    if not all(np.array_equal(a, np.asarray(e)) for e in elsewhere):
        _fail("member_noise: another process computed different noise for the same member")


@_register("parallel_returns", "M2", 3, "02_parallel")
def parallel_returns(fn):
    """parallel_returns(center, sigma, seed, generation, population, n_jobs): identical for 1 and
    2 jobs, and equal to the reference (es.noise members on CartPole with the given seeds)."""
    center = np.zeros(10, dtype=np.float32)
    one = np.asarray(fn(center, 0.5, 3, 0, 16, 1), dtype=np.float64)
    two = np.asarray(fn(center, 0.5, 3, 0, 16, 2), dtype=np.float64)
    if one.shape != (16,):
        _fail(f"parallel_returns: expected one return per member, shape (16,), got {one.shape}")
    if np.array_equal(two[:8], two[8:]) and not np.array_equal(one[:8], one[8:]):
        _fail("parallel_returns: both jobs returned the same values; same noise in every job (each member needs "
              "its own noise, from its own id)")
    if not np.array_equal(one, two):
        _fail("parallel_returns: results depend on n_jobs; a member's noise must not depend on which job ran it")
    if len(set(np.round(one, 6))) <= 1:
        _fail("parallel_returns: all members scored the same; the perturbations are missing")


# ---------------------------------------------------------------- milestone 3 (03)
@_register("result_codec", "M3", 2, "03_redis", "encode_result", "decode_result")
def result_codec(encode_result, decode_result):
    """Round trip of (generation, first, returns, lengths) through bytes, exact, no pickle."""
    rng = np.random.default_rng(0)
    returns, lengths = rng.standard_normal(32) * 100, rng.integers(0, 10_000, 32)
    payload = encode_result(12, 64, returns, lengths)
    if not isinstance(payload, (bytes, bytearray)):
        _fail(f"encode_result: must return bytes, got {type(payload).__name__}")
    if payload[:1] == b"\x80" or b"numpy" in payload:
        _fail("encode_result: this looks like a pickle; send raw bytes (np.ndarray.tobytes) with a small header")
    out = decode_result(payload)
    if out["generation"] != 12 or out["first"] != 64:
        _fail("decode_result: generation or first member came back wrong")
    got = np.asarray(out["returns"], dtype=np.float64)
    if not np.array_equal(got, returns):
        if np.allclose(got, returns, rtol=1e-6):
            _fail("encode_result: returns lose bits (float32?); send float64 so the run stays bit-identical")
        _fail("decode_result: returns came back different")
    if not np.array_equal(np.asarray(out["lengths"]), lengths):
        _fail("decode_result: lengths came back different")
    if len(payload) > 64 + 16 * 32:
        _fail(f"encode_result: {len(payload)} bytes for 32 members; aim for ~12 bytes per member plus a header")


@_register("chunks_to_requeue", "M3", 3, "03_redis")
def chunks_to_requeue(fn):
    """chunks_to_requeue(queued_at, in_queue, leases, now, lease_seconds) -> set of chunks, as
    es.distributed.master.chunks_to_requeue (the master's own rule)."""
    from ..distributed.master import chunks_to_requeue as ref
    queued_at = {"a": 0.0, "b": 0.0, "c": 0.0, "d": 9.5, "e": 0.0}
    in_queue = {"c"}
    leases = {"a": 9.0, "b": 2.0}       # last heartbeat
    got = set(fn(dict(queued_at), set(in_queue), dict(leases), 10.0, 5.0))
    want = ref(queued_at, in_queue, leases, 10.0, 5.0)
    if got == want:
        return
    if "c" in got:
        _fail("chunks_to_requeue: 'c' is still waiting in the queue; requeueing it makes duplicates")
    if "a" in got:
        _fail("chunks_to_requeue: 'a' has a fresh heartbeat; its worker is alive")
    if "d" in got:
        _fail("chunks_to_requeue: 'd' was queued 0.5 s ago; a worker may have taken it and not written its lease yet")
    if "b" not in got:
        _fail("chunks_to_requeue: 'b' has had no heartbeat for 8 s > 5 s; its worker is dead, hand it out again")
    _fail(f"chunks_to_requeue: expected {sorted(want)}, got {sorted(got)}")


# ---------------------------------------------------------------- milestone 4 (04)
@_register("downsample", "M4", 3, "04_pong")
def downsample(fn):
    """210x160 uint8 -> 42x42 float32 in [0, 1] by area averaging; tolerance 1/255."""
    from pong.env import downsample as ref
    frame = np.random.default_rng(0).integers(0, 256, (210, 160)).astype(np.uint8)
    got = np.asarray(fn(frame.copy()), dtype=np.float64)
    if got.shape != (42, 42):
        _fail(f"downsample: expected shape (42, 42), got {got.shape}")
    want = ref(frame) / 255.0
    if got.max() > 1.5:
        _fail("downsample: values above 1; divide by 255")
    if np.max(np.abs(got - want)) > 1.01 / 255:
        _fail(f"downsample: differs from area averaging by up to {255 * np.max(np.abs(got - want)):.1f} gray "
              "levels; average the 5x3.81 input cells each output covers (bilinear sampling misses thin objects)")


@_register("stack_frames", "M4", 2, "04_pong")
def stack_frames(fn):
    """stack_frames(stack (4, 42, 42), frame (42, 42)) -> new stack, oldest first."""
    stack = np.stack([np.full((42, 42), i, np.float32) for i in range(4)])
    new = np.full((42, 42), 9.0, np.float32)
    got = np.asarray(fn(stack.copy(), new))
    if got.shape != (4, 42, 42):
        _fail(f"stack_frames: expected shape (4, 42, 42), got {got.shape}")
    firsts = [float(got[i, 0, 0]) for i in range(4)]
    if firsts == [9.0, 0.0, 1.0, 2.0]:
        _fail("stack_frames: the newest frame went first; here frames are oldest first, newest at index 3")
    if firsts != [1.0, 2.0, 3.0, 9.0]:
        _fail(f"stack_frames: expected frames [1, 2, 3, new], got {firsts}")


@_register("batched_policy", "M4", 2, "04_pong")
def batched_policy(fn):
    """batched_policy(W (P, F, 3), b (P, 3), features (P, F)) -> actions (P,), member p with W[p]."""
    rng = np.random.default_rng(0)
    W, b, x = rng.standard_normal((6, 20, 3)), rng.standard_normal((6, 3)), rng.standard_normal((6, 20))
    got = np.asarray(fn(W, b, x))
    want = (np.einsum("pf,pfa->pa", x, W) + b).argmax(axis=1)
    if got.shape != (6,):
        _fail(f"batched_policy: expected one action per member, shape (6,), got {got.shape}")
    if np.array_equal(got, want):
        return
    if np.array_equal(got, (x @ W[0] + b[0]).argmax(axis=1)):
        _fail("batched_policy: every member used member 0's weights; member p must use W[p], b[p]")
    _fail(f"batched_policy: expected actions {want.tolist()}, got {got.tolist()}")


@_register("agent_beats_random", "M4", 3, "04_pong", "agent_params")
def agent_beats_random(agent_params):
    """The agent's mean score over full games on seeds 0..2 beats a random policy's."""
    from pong.problem import PongProblem
    problem = PongProblem()
    params = np.asarray(agent_params, dtype=np.float32).ravel()
    if params.size != problem.num_params:
        _fail(f"agent_params: expected {problem.num_params} parameters of the dense policy, got {params.size}")
    seeds = np.arange(3)
    agent, _ = problem.play(params, seeds)
    random = problem.play_random(seeds)
    if agent.mean() <= random.mean():
        _fail(f"agent_params: scores {agent.mean():.1f} against random's {random.mean():.1f} on seeds 0-2")


# ---------------------------------------------------------------- extras (05)
@_register("snes_step", "extras", 3, "05_extras")
def snes_step(fn):
    """Separable NES: mu += lr_mu * sigma * (w @ s); sigma *= exp(lr_sigma / 2 * (w @ (s**2 - 1)))."""
    rng = np.random.default_rng(0)
    mu, sigma = rng.standard_normal(5), np.abs(rng.standard_normal(5)) + 0.1
    s, w = rng.standard_normal((12, 5)), rng.standard_normal(12)
    got_mu, got_sigma = fn(mu.copy(), sigma.copy(), s.copy(), w.copy(), 1.0, 0.2)
    want_mu = mu + 1.0 * sigma * (w @ s)
    want_sigma = sigma * np.exp(0.2 / 2 * (w @ (s ** 2 - 1)))
    if rel_error(got_mu, want_mu) > 1e-6:
        _fail("snes_step: the mean update is off; mu += lr_mu * sigma * sum_i w_i s_i")
    if rel_error(got_sigma, want_sigma) > 1e-6:
        if rel_error(got_sigma, sigma + 0.2 / 2 * (w @ (s ** 2 - 1))) < 1e-6:
            _fail("snes_step: sigma must be updated multiplicatively (exp), or it can go negative")
        _fail("snes_step: the sigma update is off; sigma *= exp(lr_sigma / 2 * sum_i w_i (s_i**2 - 1))")
