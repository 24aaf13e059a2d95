"""The answer key: what each graded function must return, and what its likely mistakes return.

Only the instructor's checkout and the grader have this module. ``classroom.check`` asks it
for the expected outcomes of one set of inputs at once (a dict: the right answer under one
name, each diagnosed mistake under its own), so a check's questions never depend on the
student's answers. A student release carries no copy: ``python -m classroom release`` records
the answers to the questions its checks ask on a few fixed input seeds (``expected.json``).
"""
from __future__ import annotations

import functools
import hashlib
import struct

import numpy as np

from es import obs_norm
from es.distributed.master import chunks_to_requeue as master_requeue
from es.noise import mirrored
from es.optimizers import adam_moments, adam_rate, adam_step
from es.policies import MLPPolicy
from es.shaping import centered_ranks as es_centered_ranks
from es.shaping import ranks as es_ranks
from pong.env import _COLUMNS, downsample_batch, stack_batch
from pong.replay import reference_es_step


def centered_ranks(x) -> dict:
    """Ranks in [-0.5, 0.5], ties sharing the mean of their ranks, in float64 (es.shaping's)."""
    x = np.asarray(x, dtype=np.float64)
    return {"right": es_centered_ranks(x, dtype=np.float64), "ranks": es_ranks(x),
            "argsort": np.argsort(x, kind="stable").astype(np.float64)}


def es_gradient(noise, weights, sigma) -> dict:
    return {"right": np.asarray(noise).T @ np.asarray(weights) / (len(weights) * sigma)}


def adam_update(theta, grads, lr) -> dict:
    """Three Adam ascent steps from ``theta`` (betas 0.9, 0.999, epsilon 1e-8, bias correction),
    and the three mistakes the check names: descent, no bias correction, epsilon inside the
    square root."""
    def adam(correct, sign=1.0, inside=False):
        m = v = np.zeros(len(theta))
        x = np.asarray(theta, dtype=np.float64)
        for t, g in enumerate(grads, 1):
            m, v = adam_moments(m, v, np.asarray(g, dtype=np.float64))
            a = adam_rate(lr, t) if correct else lr
            x = x + sign * a * m / (np.sqrt(v + 1e-8) if inside else np.sqrt(v) + 1e-8)
        return x
    return {"right": adam(True), "descends": adam(True, -1.0), "no_bias_correction": adam(False),
            "epsilon_in_sqrt": adam(True, inside=True)}


def _cartpole_run(seed, generations=60, population=256, sigma=0.2, lr=0.3, mistake=None):
    """Notebook 01's training loop, its five steps in their order and float operations (SGD,
    z-scores), or with one named ``mistake``: ``(returned center, log, the center each log value
    was measured on)``."""
    from es.envs.cartpole import run_cartpole_batch
    policy = MLPPolicy(4, 2, hidden=())
    rng = np.random.default_rng(seed)
    center, log, centers = np.zeros(policy.num_params), [], []
    fixed = rng.integers(0, 2 ** 31, 128) if mistake == "fixed_starts" else None
    for g in range(generations):
        if mistake == "noise_first":
            half = rng.standard_normal((population // 2, policy.num_params))
        starts = fixed if fixed is not None else rng.integers(0, 2 ** 31, 128)
        scores, _ = run_cartpole_batch(policy, np.asarray(center, np.float32)[None], np.zeros(len(starts), int), starts)
        log.append(scores.mean())
        centers.append(center)
        if scores.min() >= 500 or (mistake == "stop_475" and scores.mean() >= 475):
            break
        if mistake != "noise_first":
            half = rng.standard_normal((population // 2, policy.num_params))
        noise = mirrored(half)
        members = np.asarray(center + sigma * noise, dtype=np.float32)
        start = int(starts[g if mistake == "starts_g" else 0])
        returns, _ = run_cartpole_batch(policy, members, np.arange(population), np.full(population, start))
        weights = (returns - returns.mean()) / (returns.std() + 1e-8)
        grad = noise.T @ weights / (population * (1.0 if mistake == "no_sigma" else sigma))
        center = center - lr * grad if mistake == "descends" else center + lr * grad
    return center, np.array(log), np.array(centers)


def train_cartpole(seed, generations, population, sigma, lr) -> dict:
    """Notebook 01's five steps from ``seed``: the center they return (``right``), their log,
    and the center each log value was measured on (``centers``)."""
    right, log, centers = _cartpole_run(seed, generations, population, sigma, lr)
    return {"right": right, "log": log, "centers": centers}


CARTPOLE_MISTAKES = ("noise_first", "fixed_starts", "starts_g", "no_sigma", "descends", "stop_475")


def train_cartpole_steps(seed, generations) -> dict:
    """The center after a few generations on the defaults: the five steps' (``right``), and the
    center each mistake ``classroom.check.train_cartpole`` names gives."""
    return {m: _cartpole_run(seed, generations, mistake=None if m == "right" else m)[0]
            for m in ("right", *CARTPOLE_MISTAKES)}


def chunks_to_requeue(queued_at, in_queue, leases, now, lease_seconds) -> dict:
    return {"right": sorted(master_requeue(queued_at, set(in_queue), leases, now, lease_seconds))}


def downsample(frames) -> dict:
    """The right frames, the named mistakes' frames (transposed; as digests, means truncated
    instead of rounded, and row sums that wrapped around in uint8), and ``halves``: where the
    exact mean is a half (N % 800 == 400)."""
    right = downsample_batch(np.asarray(frames, dtype=np.uint8))
    n = _sums(frames).reshape(right.shape)
    wrapped = _sums(frames, wrap=True).reshape(right.shape)
    return {"right": right, "transposed": right.transpose(0, 2, 1), "truncated": uint8_digest((n // 800).astype(np.uint8)),
            "wrapped": uint8_digest(np.rint(wrapped / 800).astype(np.uint8)), "halves": n % 800 == 400}


def downsample_halves(frames) -> dict:
    """How many outputs of ``frames`` are exact halves (where a float computation can round
    either way): each output is an integer N over 800 (pong.env.downsample_batch)."""
    return {"halves": int(np.count_nonzero(_sums(frames) % 800 == 400))}


def _sums(frames, wrap: bool = False) -> np.ndarray:
    """Each output of ``downsample_batch`` as the integer N of N / 800 (float64: exact, far below
    2**53), one row per 42 output pixels; ``wrap``: with each sum of 5 rows taken modulo 256,
    as uint8 arithmetic (``frames[:, 0::5] + frames[:, 1::5] + ...``) computes it."""
    rows = np.asarray(frames, dtype=np.uint8).reshape(-1, 5, 160).sum(axis=1, dtype=np.int64)
    return (rows % 256 if wrap else rows).astype(np.float64) @ _COLUMNS.astype(np.float64)


def stack_frames(stacks, frames) -> dict:
    """Digests (``uint8_digest``) of the right stacks and of newest-first ones: a release records
    32 bytes instead of the arrays."""
    stacks, frames = np.asarray(stacks), np.asarray(frames)
    return {"right": uint8_digest(stack_batch(stacks, frames)),
            "newest_first": uint8_digest(np.concatenate([frames[:, None], stacks[:, :-1]], axis=1))}


def uint8_digest(a) -> str:
    """The digest ``classroom.check`` computes of a student's uint8 array: shape and bytes."""
    a = np.ascontiguousarray(a, dtype=np.uint8)
    return hashlib.sha256(repr(a.shape).encode() + a.tobytes()).hexdigest()


def batched_policy(w, b, x) -> dict:
    """The right actions (ties to the lowest index) and the named mistakes': no bias, member 0's
    weights for all, ties to the highest index, and logits computed in float16."""
    logits = np.einsum("pf,pfa->pa", x, w)
    half = np.einsum("pf,pfa->pa", np.asarray(x, np.float16), np.asarray(w, np.float16)) + np.asarray(b, np.float16)
    return {"right": (logits + b).argmax(axis=1), "no_bias": logits.argmax(axis=1),
            "member_0": (x @ w[0] + b[0]).argmax(axis=1), "ties_high": 2 - (logits + b)[:, ::-1].argmax(axis=1),
            "float16": half.argmax(axis=1)}


def es_step(center, noises, fitnesses, sigma, lr, weight_decay) -> dict:
    """Updates from ``center``, one per (noise, fitness) pair, the state carried over
    (``pong.replay.reference_es_step``, what the grader's replay holds a run to), and each
    mistake the check names, as the same updates: the center after each update, one row each."""
    fitnesses = [np.asarray(f, dtype=np.float64) for f in fitnesses]
    ranked = [es_centered_ranks(f, dtype=np.float64) for f in fitnesses]     # once, not once per mistake

    def run(step, carry=True, **mistake):
        c, state, out = np.asarray(center, dtype=np.float64), None, []
        for noise, fitness, w in zip(noises, fitnesses, ranked):
            c, state = step(c, np.asarray(noise), fitness, state if carry else None, sigma, lr, weight_decay,
                            **mistake, **({"ranked": w} if step is _mistaken else {}))
            out.append(c)
        return np.stack(out)
    return {"right": run(reference_es_step), "raw_fitness": run(_mistaken, raw=True),
            "z_score": run(_mistaken, z_score=True), "no_sigma": run(_mistaken, no_sigma=True),
            "decay_added": run(_mistaken, decay_sign=1.0), "no_decay": run(_mistaken, decay_sign=0.0),
            "no_bias_correction": run(_mistaken, no_bias=True), "descends": run(_mistaken, sign=-1.0),
            "ties_apart": run(_mistaken, ties_apart=True), "state_not_carried": run(_mistaken, carry=False),
            "pairs": run(_mistaken, pairs=True), "amsgrad": run(_mistaken, amsgrad=True),
            "epsilon_in_sqrt": run(_mistaken, inside=True), "textbook_adam": run(_mistaken, textbook=True)}


def _mistaken(c, noise, fitness, state, sigma, lr, weight_decay, raw=False, z_score=False, no_sigma=False,
              decay_sign=-1.0, no_bias=False, sign=1.0, ties_apart=False, pairs=False, amsgrad=False, inside=False,
              textbook=False, ranked=None):
    """One update with one mistake switched on (``pairs``: the noise read as mirrored pairs, OpenAI's
    starter's form, ``noise[0::2]`` weighed by ``w[0::2] - w[1::2]``; ``amsgrad``: ``v`` never
    decreases; ``inside``: epsilon inside the square root; ``textbook``: Kingma and Ba's
    m_hat / (sqrt(v_hat) + epsilon), whose epsilon is not the course's where a gradient is tiny).
    The ranks exact in float64, as a student computes them: float32 ranks would leave a gradient
    of about 1e-7 where a mistake's is 0 (``ranked``: the fitness's centered ranks, where the
    caller has them already)."""
    if raw:
        w = fitness - fitness.mean()
    else:
        w = ranked if ranked is not None else es_centered_ranks(fitness, dtype=np.float64)
    if z_score:
        w = (fitness - fitness.mean()) / fitness.std()
    if ties_apart:                 # ranks from a stable argsort: tied members get different ranks
        ranks = np.empty(len(fitness))
        ranks[np.argsort(fitness, kind="stable")] = np.arange(len(fitness))
        w = ranks / (len(fitness) - 1) - 0.5
    es = noise[0::2].T @ (w[0::2] - w[1::2]) if pairs else noise.T @ w
    grad = es / (len(w) * (1.0 if no_sigma else sigma)) + decay_sign * weight_decay * c
    state = state or {"m": np.zeros(c.size), "v": np.zeros(c.size), "t": 0}
    t = state["t"] + 1
    m, v = adam_moments(state["m"], state["v"], grad)
    if amsgrad:
        v = np.maximum(v, state["v"])
    if textbook:
        return c + lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8), {"m": m, "v": v, "t": t}
    a = lr if no_bias else adam_rate(lr, t)
    return c + sign * a * m / (np.sqrt(v + 1e-8) if inside else np.sqrt(v) + 1e-8), {"m": m, "v": v, "t": t}


def snes_step(mu, sigma, s, w, lr_mu, lr_sigma) -> dict:
    mu, sigma, s, w = (np.asarray(a, dtype=np.float64) for a in (mu, sigma, s, w))
    return {"mu": mu + lr_mu * sigma * (w @ s), "sigma": sigma * np.exp(lr_sigma / 2 * (w @ (s ** 2 - 1))),
            "mu_without_sigma": mu + lr_mu * (w @ s), "sigma_additive": sigma + lr_sigma / 2 * (w @ (s ** 2 - 1))}


def virtual_batch_norm(reference, inputs) -> dict:
    """Notebook 05: the pixel agent's virtual batch normalization (``pong.keypoints``'s
    ``PongKeypointsPolicy.normalize``: floor ``VBN_FLOOR``, clip ``VBN_CLIP``, population std) of
    ``inputs`` with the statistics of ``reference``; and what its usual mistakes return."""
    from pong.keypoints import VBN_CLIP, VBN_FLOOR
    ref, x = np.asarray(reference, dtype=np.float64), np.asarray(inputs, dtype=np.float64)

    def norm(of=ref, ddof=0, floor=lambda s: np.maximum(s, VBN_FLOOR), clip=True):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (x - of.mean(axis=0)) / floor(of.std(axis=0, ddof=ddof))
        return np.clip(z, -VBN_CLIP, VBN_CLIP) if clip else z
    return {"right": norm(), "no_floor": norm(floor=lambda s: s), "sample": norm(ddof=1), "no_clip": norm(clip=False),
            "input_stats": norm(of=x), "floor_variance": norm(floor=lambda s: np.sqrt(np.maximum(s * s, VBN_FLOOR)))}


def merge_stats(a, b) -> dict:
    """Notebook 06: two workers' (count, total, squares) merged; and the merges gone wrong."""
    (ca, ta, sa), (cb, tb, sb) = a, b
    ta, sa, tb, sb = (np.asarray(x, dtype=np.float64) for x in (ta, sa, tb, sb))
    merged = obs_norm.merge(obs_norm.ObsStats(int(ca), ta, sa), obs_norm.ObsStats(int(cb), tb, sb))
    return {"count": merged.count, "total": merged.total, "squares": merged.squares,
            "averaged_total": (ta + tb) / 2, "averaged_squares": (sa + sb) / 2,
            "weighted_total": (ca * ta + cb * tb) / max(ca + cb, 1), "squared_total": (ta + tb) ** 2,
            "last_total": tb, "last_squares": sb, "first_total": ta}


def mean_std(count, total, squares) -> dict:
    """Notebook 06: es.obs_norm.mean_std, and what its usual mistakes return."""
    total, squares = np.asarray(total, dtype=np.float64), np.asarray(squares, dtype=np.float64)
    mean, std = obs_norm.mean_std(obs_norm.ObsStats(int(count), total, squares))
    c = max(int(count), 1)
    m = total / c
    var = squares / c - m ** 2
    return {"mean": mean, "std": std, "no_floor": np.sqrt(np.maximum(var, 0.0)),
            "std_floor": np.maximum(np.sqrt(np.maximum(var, 0.0)), 1e-4),
            "variance": np.maximum(var, obs_norm.MIN_VAR), "no_mean_squared": np.sqrt(np.maximum(squares / c, 1e-4)),
            "sample": np.sqrt(np.maximum((squares - c * m ** 2) / max(c - 1, 1), 1e-4)),
            "added_floor": np.sqrt(np.maximum(var, 0.0) + 1e-4)}


def linear_policy(params, obs, mean, std, low, high) -> dict:
    """Notebook 06: es.policies.MLPPolicy(obs_dim, act_dim, ()) on es.obs_norm.normalize'd
    observations (the course's locomotion policy), and the policy with its usual mistakes."""
    params = np.asarray(params, dtype=np.float32)
    obs, mean, std = (np.asarray(x, dtype=np.float64) for x in (obs, mean, std))
    low, high = np.asarray(low, dtype=np.float32), np.asarray(high, dtype=np.float32)
    k, d = obs.shape
    a = len(low)
    policy = MLPPolicy(d, a, (), discrete=False, low=low, high=high)
    right = policy.forward(policy.unflatten(params), obs_norm.normalize(obs, mean, std))
    x = np.clip((obs - mean) / std, -obs_norm.CLIP, obs_norm.CLIP)
    w, b = params[:, :d * a].reshape(k, d, a).astype(np.float64), params[:, d * a:].astype(np.float64)
    wt = params[:, :d * a].reshape(k, a, d).transpose(0, 2, 1).astype(np.float64)
    bias_first = params[:, :a].astype(np.float64), params[:, a:].reshape(k, d, a).astype(np.float64)
    scale = lambda h: low + (np.tanh(h) + 1) / 2 * (high - low)      # noqa: E731
    lin = lambda z, w, b: np.einsum("ki,kij->kj", z, w) + b          # noqa: E731
    return {"right": right, "no_clip": scale(lin((obs - mean) / std, w, b)), "raw_obs": scale(lin(obs, w, b)),
            "no_tanh": np.clip(low + (lin(x, w, b) + 1) / 2 * (high - low), low, high),
            "no_tanh_unclipped": low + (lin(x, w, b) + 1) / 2 * (high - low),
            "no_scaling": np.tanh(lin(x, w, b)), "times_high": np.tanh(lin(x, w, b)) * high,
            "transposed": scale(lin(x, wt, b)), "bias_first": scale(lin(x, bias_first[1], bias_first[0])),
            "row_0": scale(lin(x, np.repeat(w[:1], k, 0), np.repeat(b[:1], k, 0)))}


def result_payload(generation, first, returns, lengths) -> bytes:
    """Notebook 03's payload: generation, first, count (u32), float64 returns, uint32 lengths; what
    the course's workers push in the ``gather`` check (``classroom.redis_workers``)."""
    returns, lengths = np.asarray(returns, dtype="<f8"), np.asarray(lengths, dtype="<u4")
    return struct.pack("<III", generation, first, len(returns)) + returns.tobytes() + lengths.tobytes()


def result_codec(generation, first, returns, lengths) -> dict:
    """The digest of notebook 03's payload for these inputs: its bytes, exactly."""
    return {"right": hashlib.sha256(result_payload(generation, first, returns, lengths)).hexdigest()}


def decode_payload(payload) -> dict:
    generation, first, count = struct.unpack_from("<III", payload)
    returns = np.frombuffer(payload, "<f8", count, 12).astype(np.float64)
    lengths = np.frombuffer(payload, "<u4", count, 12 + 8 * count).astype(np.int64)
    return {"generation": generation, "first": first, "returns": returns, "lengths": lengths}


def seeds_only_update(center, seed, returns, sigma, lr) -> dict:
    """Notebook 03's update from (run seed, generation, returns): the centers after each
    generation of ``returns`` (a list per generation of the workers' chunks of returns), from
    ``center``, as notebook 03's section 4 updates it (``es_update``: mirrored pair noise from
    ``classroom.cartpole_workers.pair_noise``, z-scores of the whole population, one SGD step,
    float32); and the same run with each mistake the check names (``no_epsilon``: z-scores
    without the ``+ 1e-8``)."""
    from .cartpole_workers import pair_noise as draw_pair_noise

    @functools.cache
    def pair_noise(g, n, d):         # the nine runs use the same noise: drawn once, and read-only
        noise = draw_pair_noise(seed, g, n, d)
        noise.flags.writeable = False
        return noise

    def run(noise_of=pair_noise, shape="z", divide=True, epsilon=1e-8):
        c, out = np.asarray(center, dtype=np.float32), []
        for g, chunks in enumerate(returns):
            r = np.concatenate([np.asarray(x, dtype=np.float64) for x in chunks])
            noise = noise_of(g, len(r), c.size)
            if shape == "per_worker":
                z = np.concatenate([(np.asarray(x, np.float64) - np.mean(x)) / (np.std(x) + 1e-8) for x in chunks])
            elif shape == "ranks":
                z = es_centered_ranks(r).astype(np.float64)
            elif shape == "raw":
                z = r
            else:
                z = (r - r.mean()) / (r.std() + epsilon)
            c = (c + lr * (noise.T @ z) / (len(r) * (sigma if divide else 1.0))).astype(np.float32)
            out.append(c)
        return np.stack(out)

    def unsigned(g, n, d):
        noise = pair_noise(g, n, d).copy()
        noise[1::2] *= -1
        return noise
    return {"right": run(), "noise_reused": run(lambda g, n, d: pair_noise(0, n, d)),
            "previous_noise": run(lambda g, n, d: pair_noise(max(g - 1, 0), n, d)),
            "sign_lost": run(unsigned), "per_worker": run(shape="per_worker"), "ranks": run(shape="ranks"),
            "raw": run(shape="raw"), "no_sigma": run(divide=False), "no_epsilon": run(epsilon=0.0)}


def noise_table(seed, size) -> dict:
    """Notebook 03's table: ``size`` float32 standard normals drawn in one call from
    ``default_rng(seed)``, as digests (``float32_digest``); and the tables of its usual mistakes."""
    right = np.random.default_rng(seed).standard_normal(size, dtype=np.float32)
    return {"right": float32_digest(right),
            "float64_cast": float32_digest(np.random.default_rng(seed).standard_normal(size).astype(np.float32)),
            "global": float32_digest(np.random.RandomState(seed).standard_normal(size).astype(np.float32))}


def table_offsets(seed, generation, pairs, size, dim) -> dict:
    """One generation's offsets into a table of ``size`` values for noise of ``dim``: ``pairs``
    integers in ``[0, size - dim]`` from ``default_rng([seed, generation])`` in one call; and the
    offsets its usual mistakes give (the range one too wide, the generation left out)."""
    draw = lambda key, high: np.random.default_rng(key).integers(0, high, pairs).tolist()     # noqa: E731
    return {"right": draw([seed, generation], size - dim + 1), "to_the_end": draw([seed, generation], size),
            "no_generation": draw(seed, size - dim + 1)}


def float32_digest(a) -> str:
    """The digest ``classroom.check`` computes of a student's float32 array: shape and bytes."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    return hashlib.sha256(repr(a.shape).encode() + a.tobytes()).hexdigest()


def _adam_step(theta, grad, state, lr):
    return adam_step(np.asarray(theta, dtype=np.float64), grad, state, lr)


# The answer key as a student would write it, for each check whose questions need answers:
# the release records its answers by running each check on these (they must pass).
SOLUTIONS = {
    "centered_ranks": [lambda x: centered_ranks(x)["right"]],
    "es_gradient": [lambda noise, w, sigma: es_gradient(noise, w, sigma)["right"]],
    "adam_update": [_adam_step],
    "train_cartpole": [lambda seed, generations=60, population=256, sigma=0.2, lr=0.3:
                       _cartpole_run(seed, generations, population, sigma, lr)[0]],
    "result_codec": [result_payload, decode_payload],
    "chunks_to_requeue": [lambda q, i, leases, now, lease: set(chunks_to_requeue(q, sorted(i), leases, now, lease)["right"])],
    "downsample": [downsample_batch],
    "stack_frames": [stack_batch],
    "batched_policy": [lambda w, b, x: batched_policy(w, b, x)["right"]],
    "es_step": [lambda c, n, f, s, sigma, lr, wd: reference_es_step(np.asarray(c, dtype=np.float64), n, f, s, sigma,
                                                                     lr, wd)],
    "snes_step": [lambda *a: (snes_step(*a)["mu"], snes_step(*a)["sigma"])],
    "virtual_batch_norm": [lambda reference, inputs: virtual_batch_norm(reference, inputs)["right"]],
    "merge_stats": [lambda a, b: (merge_stats(a, b)["count"], merge_stats(a, b)["total"], merge_stats(a, b)["squares"])],
    "mean_std": [lambda *a: (mean_std(*a)["mean"], mean_std(*a)["std"])],
    "linear_policy": [lambda *a: linear_policy(*a)["right"]],
    "seeds_only_update": [lambda c, seed, g, chunks, sigma, lr: _one_update(c, seed, g, chunks, sigma, lr)],
    "noise_table": [lambda seed, size: np.random.default_rng(seed).standard_normal(size, dtype=np.float32),
                    lambda seed, g, pairs, size, dim: np.array(table_offsets(seed, g, pairs, size, dim)["right"]),
                    lambda table, offsets, member, dim: (1 - 2 * (member % 2)) * np.asarray(table)[
                        offsets[member // 2]:offsets[member // 2] + dim]],
}


def _one_update(center, seed, generation, chunks, sigma, lr):
    """One generation of ``seeds_only_update``'s right answer, for the answer key's solution."""
    from .cartpole_workers import pair_noise
    r = np.concatenate([np.asarray(x, dtype=np.float64) for x in chunks])
    z = (r - r.mean()) / (r.std() + 1e-8)
    c = np.asarray(center, dtype=np.float32)
    return (c + lr * (pair_noise(seed, generation, len(r), c.size).T @ z) / (len(r) * sigma)).astype(np.float32)
