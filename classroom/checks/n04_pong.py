"""Notebook 04's graded checks (milestone 4): the pixels, the policy, the update and the agent."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .base import (_array, _call, _call_leaving, _dtype, _fail, _observe, _register, _uint8_digest, answers, verdict)


@_register("downsample", "M4", 2, "04_pong",
           forbidden=("pong.env",), reference=("downsample", "downsample_halves"))
def downsample(fn, rng):
    """downsample(frames (k, 210, 160) uint8) -> (k, 42, 42) uint8: each output the exact mean of
    the 5 x 160/42 input cells it covers, rounded to the nearest integer, halves to even; exact
    (your run replays in the grader only if your frames are the course's), also on frames where
    many means are exactly halves."""
    k = int(rng.integers(2, 4))
    frames = rng.integers(0, 256, (k, 210, 160)).astype(np.uint8)
    while True:      # 3 frames of gray levels 0, 10, ..., 250: about 130 means exactly a half (random ones: 4 a frame)
        ties = (rng.integers(0, 26, (3, 210, 160)) * 10).astype(np.uint8)
        if answers("downsample_halves", ties)["halves"] >= 100:
            break
    frames = np.concatenate([frames, ties])
    want = answers("downsample", frames)
    raw = np.asarray(_call(fn, frames.copy()))
    if raw.shape == (42, 42):
        _fail("downsample: it returned one frame; it takes a batch (k, 210, 160) and returns (k, 42, 42)")
    got = _array(raw, (k + 3, 42, 42), "downsample")
    if raw.dtype != np.uint8:
        if got.max() <= 1.0 + 1e-6 and np.max(np.abs(got * 255 - want["right"])) <= 0.51:
            _fail(f"downsample: returns {raw.dtype} in [0, 1]; return the uint8 gray levels (0..255) the games "
                  "use, without dividing by 255")
        _fail(f"downsample: returns {raw.dtype}; return uint8 gray levels 0..255")
    if np.array_equal(got, want["right"]):
        return
    if np.array_equal(got, want["transposed"]):
        _fail("downsample: rows and columns are swapped (each frame is transposed); rows shrink by 5 (210 -> 42), "
              "columns by 160/42")
    if _uint8_digest(got) == want["wrapped"]:
        _fail("downsample: the sums of 5 rows wrapped around: uint8 arithmetic keeps only the sum modulo 256 "
              "(200 + 100 gives 44); sum the rows in a wider integer type (sum(axis=..., dtype=np.int64))")
    if _uint8_digest(got) == want["truncated"]:
        _fail("downsample: the means are truncated (astype(np.uint8) cuts 17.9 to 17); round to the nearest "
              "integer first, halves to even (np.rint)")
    off = np.abs(got - want["right"].astype(np.float64))
    at_halves = want["halves"]                            # where the exact mean is a half (N % 800 == 400)
    if off.max() <= 1 and not (off[~at_halves] > 0).any():
        _fail(f"downsample: {int((off > 0).sum())} gray levels differ by 1, all where a mean is exactly a half: a "
              "rounding difference (floating point lands on either side of .5, or halves were rounded up). Compute "
              "each mean exactly (sum the 5 rows as integers, weigh the columns in 42ths: every output is N / 800 "
              "with N an integer) and round once, halves to even (np.rint of N / 800)")
    if off.max() <= 1:
        _fail(f"downsample: {int((off[~at_halves] > 0).sum())} gray levels differ by 1 where the mean is not a half; "
              "round once, at the end (np.rint of the exact mean), not the row sums or partial means along the way")
    _fail(f"downsample: differs from area averaging by up to {off.max():.0f} gray levels; average all the input "
          "pixels each output covers (5 rows x 3.81 columns), each weighed by the part it covers: a few sampled "
          "pixels per output (nearest or interpolated) miss thin objects such as the ball")


@_register("stack_frames", "M4", 1, "04_pong",
           forbidden=("pong.env",), reference=("stack_frames",))
def stack_frames(fn, rng):
    """stack_frames(stacks (k, 4, 42, 42), frames (k, 42, 42)) -> (k, 4, 42, 42) uint8, a new
    array (the inputs left as they are): each stack without its oldest frame, then the new one
    (oldest first)."""
    k = int(rng.integers(2, 6))
    stacks = rng.integers(0, 256, (k, 4, 42, 42)).astype(np.uint8)
    frames = rng.integers(0, 256, (k, 42, 42)).astype(np.uint8)
    want = answers("stack_frames", stacks, frames)
    got = np.asarray(_call_leaving(fn, ("stacks", "frames"), stacks.copy(), frames.copy()))
    if got.shape == (4, 42, 42):
        _fail("stack_frames: it returned one stack; it takes k stacks and k frames and returns (k, 4, 42, 42)")
    got = _array(got, (k, 4, 42, 42), "stack_frames", got.dtype)
    _dtype(got, np.uint8, "stack_frames")
    digest = _uint8_digest(got)
    if digest == want["right"]:
        return
    if digest == want["newest_first"]:
        _fail("stack_frames: the newest frame went first; here frames are oldest first, newest at index 3")
    _fail("stack_frames: expected each stack's last three frames, then its new frame")


FLOAT16 = ("batched_policy: its actions are those of logits computed in float16, which cannot tell apart two logits "
           "near 512 that differ by 1/64; compute in the inputs' float32 (or float64)")


@_register("batched_policy", "M4", 1, "04_pong",
           forbidden=("pong.policy", "pong.problem", "es.policies"), reference=("batched_policy",))
def batched_policy(fn, rng):
    """batched_policy(W (P, F, 3), b (P, 3), features (P, F)) -> actions (P,), member p with
    W[p] and b[p], ties to the lowest index, with no Python loop over members: the lines of the
    student's own code run for 64 members do not exceed those for 8 by 56 (64 - 8) or more."""
    def draw(members):
        while True:       # inputs where the bias and each member's own weights change actions
            W, x = rng.standard_normal((members, features, 3)), rng.standard_normal((members, features))
            b = rng.standard_normal((members, 3)) * np.sqrt(features)
            want = answers("batched_policy", W, b, x)
            if (want["right"] != want["no_bias"]).mean() > 0.3 and (want["right"] != want["member_0"]).mean() > 0.3:
                return W, b, x, want

    def tied(members):    # float32 inputs, small integers: every logit exact, whatever the order of the sums
        x = rng.integers(-3, 4, (members, features)).astype(np.float32)
        W = rng.integers(-3, 4, (members, features, 3)).astype(np.float32)
        b = rng.integers(504, 521, (members, 3)).astype(np.float32)
        for p in range(members):      # two actions i < j tie on top, or all three, or j leads by 1/64
            i, j = sorted(rng.choice(3, 2, replace=False))
            W[p, :, j], b[p, j], b[p, 3 - i - j] = W[p, :, i], b[p, i] + (p % 3 == 2) / 64, b[p, i] - 500
            if p % 3 == 1:
                W[p], b[p] = W[p, :, i:i + 1], b[p, i]
        return W, b, x

    members, features = int(rng.integers(20, 40)), int(rng.integers(8, 24))
    W, b, x, want = draw(members)
    got = np.asarray(_call(fn, W, b, x))
    if got.shape == (members,) and not np.issubdtype(got.dtype, np.integer):
        _fail(f"batched_policy: returned dtype {got.dtype}; return integer actions (the games look each action up "
              "by index): np.argmax gives them")
    got = _array(got, (members,), "batched_policy", np.int64)
    if not np.array_equal(got, want["right"]):
        if np.array_equal(got, want["no_bias"]):
            _fail("batched_policy: it ignores the bias b; logits are features @ W[p] + b[p]")
        if np.array_equal(got, want["member_0"]):
            _fail("batched_policy: every member used member 0's weights; member p must use W[p], b[p]")
        if np.array_equal(got, want["float16"]):
            _fail(FLOAT16)
        _fail(f"batched_policy: {int((got != want['right']).sum())} of {members} actions differ from the argmax of "
              "member p's logits")
    W, b, x = tied(members)
    want = answers("batched_policy", W, b, x)
    got = _array(np.asarray(_call(fn, W, b, x)), (members,), "batched_policy", np.int64)
    if not np.array_equal(got, want["right"]):
        if np.array_equal(got, want["ties_high"]):
            _fail("batched_policy: where logits tie, it picks the highest index; ties go to the lowest, as np.argmax "
                  "does")
        if np.array_equal(got, want["float16"]):
            _fail(FLOAT16)
        _fail(f"batched_policy: {int((got != want['right']).sum())} of {members} actions differ from the argmax of "
              "member p's logits, on float32 inputs where logits tie (ties go to the lowest index) or lie 1/64 apart")
    lines = [_observe(fn, *draw(m)[:3], count_lines=True)["lines"] for m in (8, 64)]
    if lines[1] - lines[0] >= 56:
        _fail(f"batched_policy: it loops over the members in Python ({lines[0]} lines run for 8 members, "
              f"{lines[1]} for 64); one batched operation (np.einsum or a batched matmul) does them all at once")


@_register("es_step", "M4", 2, "04_pong",
           forbidden=("es.optimizers", "es.Adam", "es.shaping", "es.centered_ranks", "es.strategy", "es.OpenES"),
           reference=("es_step",))
def es_step(fn, rng):
    """es_step(center, noise, fitness, state, sigma, lr, weight_decay) -> (center, state): six
    updates in a row (each its own noise and fitness, with ties; the noise not mirrored) with the
    state carried over as the run's checkpoint saves it (a dict of arrays and numbers; a tuple
    fails), each parameter after each update within lr / 1000 of the course's update (the one the
    grader's replay holds your run to). Three columns of the noise are the check's own: one whose
    gradient is large on the first update and then small (AMSGrad's max(v) shows), one whose
    gradient is small throughout (epsilon inside the square root shows), and one whose first
    gradient is tiny, about 1e-5 (the textbook m_hat / (sqrt(v_hat) + 1e-8) shows: its epsilon
    is not the course's, which moves a step by more than lr / 1000 where a gradient is small, as
    some are on a Pong run's first update)."""
    updates = 6
    dim, population = int(rng.integers(5, 15)), 2 * int(rng.integers(5, 12))
    sigma, lr, decay = float(rng.uniform(0.02, 0.2)), float(rng.uniform(0.005, 0.05)), float(rng.uniform(0.2, 1.0))

    def fitness_with_ties():
        f = rng.choice(10_000, population, replace=False) / 100 - 50
        f[rng.integers(population)] = 1e3        # an outlier: raw fitness as weights follows it alone
        f[1::4] = f[0::4][:len(f[1::4])]          # ties (two members that played the same game): they share a rank
        return f

    far = lambda name: np.max(np.abs(want[name] - want["right"]))      # noqa: E731
    SUBTLE = ("amsgrad", "epsilon_in_sqrt", "textbook_adam")   # mistakes that move a step by a fraction of lr only
    for _ in range(50):     # inputs on which every mistake below ends far from the right update
        center = rng.standard_normal(dim) * 3.0 / sigma     # weight decay comparable to the ES term
        noises = [rng.standard_normal((population, dim)).astype(np.float32) for _ in range(updates)]
        fitnesses = [fitness_with_ties() for _ in range(updates)]
        center[:3] = 0.0
        for k, (noise, fitness) in enumerate(zip(noises, fitnesses)):
            up = np.sign(fitness - np.median(fitness))       # noise.T @ weights of this column: about population / 4
            noise[:, 0] = (30.0 if k == 0 else 0.0) * 4 * sigma * up     # a gradient of 30, then the decay's alone
            noise[:, 1] = 0.01 * 4 * sigma * up                          # a gradient of about 0.01 on every update
            noise[:, 2] = (1e-5 if k == 0 else 0.0) * 4 * sigma * up     # about 1e-5, then the decay's alone
        want = answers("es_step", center, noises, fitnesses, sigma, lr, decay)
        if min(far(k) for k in want if k != "right" and k not in SUBTLE) > lr / 20 \
                and min(far(k) for k in SUBTLE) > lr / 400:
            break
    got, state, centers = center.copy(), None, []
    for noise, fitness in zip(noises, fitnesses):
        out = _call(fn, got.copy(), noise.copy(), fitness.copy(), state, sigma, lr, decay)   # training passes a copy
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            _fail("es_step: return the pair (new center, state)")
        got, state = _array(out[0], (dim,), "es_step"), _as_saved(out[1])
        centers.append(got)
    centers = np.stack(centers)
    off = lambda name: np.max(np.abs(centers - want[name]))      # noqa: E731
    if off("right") <= lr / 1000:
        return
    for name, why in (("raw_fitness", "it weights the noise by the raw fitness; use centered ranks (robust to "
                                      "outliers such as one long rally)"),
                      ("z_score", "it weights the noise by standardised fitness ((f - mean) / std); use centered "
                                  "ranks: one outlier still sets the scale of a z-score"),
                      ("no_decay", "no weight decay; subtract weight_decay * center from the gradient"),
                      ("state_not_carried", "Adam's m, v and t start from zero on every call; return the new state "
                                            "and use the state you are given (None only on the first call)"),
                      ("no_sigma", "the gradient is not divided by sigma: noise.T @ w / (population * sigma)"),
                      ("decay_added", "weight decay has the wrong sign; subtract weight_decay * center from the "
                                      "gradient (it pulls the parameters towards 0)"),
                      ("no_bias_correction", "Adam without bias correction; scale by sqrt(1 - 0.999**t) / "
                                             "(1 - 0.9**t), with t counting from 1 and carried in the state"),
                      ("descends", "it descends; ES maximises the fitness, so add the step"),
                      ("ties_apart", "tied fitness values got different ranks; ties share the mean of their ranks "
                                     "(two members that played the same game tie)"),
                      ("pairs", "it reads the noise as mirrored pairs (noise[0::2] weighed by w[0::2] - w[1::2]); "
                                "the check's rows are independent draws, not mirrored: weigh every row, "
                                "noise.T @ weights (on mirrored noise it is the same sum)"),
                      ("amsgrad", "v never decreases (AMSGrad's max(v_old, v_new)); this Adam keeps v_t = 0.999 "
                                  "v_(t-1) + 0.001 g^2 as it is, even when it shrinks"),
                      ("epsilon_in_sqrt", "the 1e-8 is inside the square root; Adam divides by sqrt(v) + 1e-8"),
                      ("textbook_adam", "Adam in the textbook form, m_hat / (sqrt(v_hat) + 1e-8); write the step as "
                                        "above, lr * sqrt(1 - 0.999**t) / (1 - 0.9**t) * m / (sqrt(v) + 1e-8): the two "
                                        "differ by more than lr / 1000 where a gradient is tiny, and the grader's "
                                        "replay of your run would reject it")):
        if off(name) <= lr / 1000:
            _fail(f"es_step: {why}")
    k = int(np.argmax(np.max(np.abs(centers - want["right"]), axis=1) > lr / 1000))
    _fail(f"es_step: off by up to {off('right'):.3g} (more than lr / 1000) after update {k + 1} of {updates}, and "
          "not by one of the usual mistakes; compare each line with the update written out above: centered ranks "
          "(ties shared), noise.T @ weights (every row: the check's noise is not mirrored) / (n * sigma) - "
          "weight_decay * center, Adam with bias correction")


def _as_saved(state):
    """es_step's state as the run's checkpoint saves it and a resumed run reads it back
    (``pong.student.state_to_arrays``, ``state_from_arrays``): the check passes that on, so a
    state the checkpoint cannot hold fails here, not after a generation of training."""
    from pong.student import state_from_arrays, state_to_arrays
    if isinstance(state, (tuple, list)):
        _fail("es_step: the state is a tuple (or a list); return it as a dict of arrays and numbers, e.g. "
              "{'m': m, 'v': v, 't': t}: your run's checkpoint saves it by name, and a resumed run reads it back")
    try:
        return state_from_arrays(state_to_arrays(state))
    except ValueError as exc:
        _fail(f"es_step: {exc}")


@_register("pong_agent", "M4", 4, "04_pong", "RUN_DIR", "STUDENT_ID", slow=True,
           forbidden=(), reference=())
def pong_agent(run_dir, student_id, rng):
    """The run in ``run_dir`` is ``student_id``'s own (the course repository's ``pong.replay.verify_run``: the course's
    settings with their seed; every center the course's update of the one before; sampled
    games played again with identical fitness), and its agent beats a random player by
    ``pong.student.beats_random`` on 20 full games on seeds it never saw."""
    try:
        from pong.replay import REFERENCE, RunRejected, verify_run    # the grader's side: not in a release
    except ImportError:
        return _pong_agent_here(run_dir, student_id)
    from pong.student import beats_random
    try:
        replay = verify_run(run_dir, student_id, rng)
    except (RunRejected, ValueError) as exc:
        _fail(f"pong_agent: 0 points: {exc}")
    first = int(rng.integers(1_000_000, 2 ** 31 - 100))
    result = beats_random(REFERENCE, replay.center, first_seed=first)
    if not result.beats_random:
        _fail(f"pong_agent: your run replays, but its agent does not beat random yet: {result}; train on "
              "(re-running the training cell resumes the run)")
    print(f"pong_agent: the run replays ({replay.generations} updates, {len(replay.episodes)} games played "
          f"again, {replay.seconds:.0f} s); {result}")


def _pong_agent_here(run_dir, student_id):
    """A student release cannot replay a run (that needs the answer key): it checks that the run
    is complete, trained for ``student_id``, and that training recorded an agent beating random
    for its last checkpoint (``beats_random.json``, which the training cell writes when an agent
    passes the rule twice); it fails otherwise, and says what the grader will do."""
    from es.checkpoint import load_checkpoint
    from pong.student import _recorded_verdict, normalise_id, student_seed
    run_dir = Path(run_dir)
    files = ("config.json", "metrics.jsonl", "centers.npy", "checkpoint.npz")
    missing = [f for f in files if not (run_dir / f).is_file()]
    if missing:
        _fail(f"pong_agent: {run_dir} lacks {', '.join(missing)}: train first (the training cell writes them)")
    try:
        seed = json.loads((run_dir / "config.json").read_text()).get("seed")
    except (ValueError, AttributeError):
        _fail(f"pong_agent: {run_dir}/config.json is not the training cell's; train (or delete {run_dir} and train)")
    if seed != student_seed(student_id):
        _fail(f"pong_agent: {run_dir} was trained as another student (seed {seed}), not {normalise_id(student_id)!r}")
    try:
        generation = int(load_checkpoint(run_dir / "checkpoint.npz")[1]["generation"])
    except Exception as exc:       # es.checkpoint.ESError, or a header without its generation
        _fail(f"pong_agent: {run_dir}/checkpoint.npz is not a checkpoint of the training cell ({exc}); train (or "
              f"delete {run_dir} and train)")
    verdict = _recorded_verdict(run_dir / "beats_random.json", generation)
    if verdict is None or not verdict.beats_random:
        _fail(f"pong_agent: {run_dir} is trained as {normalise_id(student_id)!r} ({generation} updates), but its "
              f"agent has not beaten random yet: no {run_dir}/beats_random.json recording that this checkpoint "
              "beats random (the training cell writes it when an agent passes the rule twice); train on "
              "(re-running the training cell resumes the run)")
    print(f"pong_agent: {run_dir} is complete and trained as {normalise_id(student_id)!r} ({generation} updates); its "
          f"agent: {verdict}. The grader replays the run and plays 20 games on seeds it never saw.")
