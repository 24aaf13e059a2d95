"""Notebook 06's checks (extras): observation statistics, the linear policy and the agent."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .base import (_array, _call, _call_leaving, _close, _dtype, _fail, _observe, _register, answers, rel_error)


def _stats_out(out, d, what):
    if not isinstance(out, (tuple, list)) or len(out) != 3:     # (graded, a tuple comes back as a list)
        _fail(f"{what}: return the tuple (count, total, squares)")
    count = np.asarray(out[0])
    if count.shape != () or not np.isfinite(count) or float(count) != int(count):
        _fail(f"{what}: the count must be a whole number, got {out[0]!r}")
    if count.dtype.kind not in "iu":
        _fail(f"{what}: the count is a {type(out[0]).__name__} ({out[0]!r}); the contract says an int (add the two "
              "counts as they are)")
    return int(count), _array(out[1], (d,), f"{what}'s total"), _array(out[2], (d,), f"{what}'s squares")


@_register("merge_stats", "extras", 2, "06_locomotion",
           forbidden=("es.obs_norm", "es.training"), reference=("merge_stats",))
def merge_stats(fn, rng):
    """merge_stats((count, total, squares), (count, total, squares)) -> (count, total, squares):
    counts, sums and sums of squares add, the count an int, the sums float64 arrays (a and b left
    as they were). The count exact, the sums within 1e-12 relative error, for two workers that saw very
    different numbers of states, then for a third merged in."""
    d = int(rng.integers(5, 18))

    def stats(n):
        x = rng.standard_normal((n, d)) * rng.uniform(0.1, 10, d) + rng.uniform(-3, 3, d)
        return [n, x.sum(axis=0), (x * x).sum(axis=0)]

    a, b = stats(int(rng.integers(200, 1000))), stats(int(rng.integers(5, 40)))
    c = stats(int(rng.integers(50, 150)))
    for first, second in ((a, b), (None, c)):
        if first is None:        # a third worker merged into the right merge of the first two
            first = [want["count"], want["total"], want["squares"]]
        want = answers("merge_stats", first, second)
        out = _call_leaving(fn, ("a", "b"), tuple(first), tuple(second))
        count, total, squares = _stats_out(out, d, "merge_stats")
        if count != want["count"]:
            if count in (first[0], second[0]):
                _fail(f"merge_stats: the count is {count}, one worker's; forgot to add the counts "
                      f"({first[0]} + {second[0]} = {want['count']} states in all)")
            _fail(f"merge_stats: the count is {count}, expected {first[0]} + {second[0]} = {want['count']}")
        _dtype(out[1], np.float64, "merge_stats's total")
        _dtype(out[2], np.float64, "merge_stats's squares")
        for got, key, name in ((total, "total", "sums"), (squares, "squares", "sums of squares")):
            if rel_error(got, want[key]) <= 1e-12:
                continue
            if _close(got, want[f"averaged_{key}"], 1e-9):
                _fail(f"merge_stats: it averaged the {name} instead of adding them; the {name} of all states add "
                      "(so do the counts): averages cannot be merged when workers saw different numbers of states")
            if key == "total" and _close(got, want["weighted_total"], 1e-9):
                _fail("merge_stats: it returned the count-weighted mean of the sums; merge_stats keeps sums, not "
                      "means: add them (mean_std divides by the count later)")
            if _close(got, want[f"last_{key}"], 1e-12) or (key == "total" and _close(got, want["first_total"], 1e-12)):
                _fail(f"merge_stats: it kept one worker's {name} (the statistics of the last worker only); add "
                      "both workers'")
            if key == "squares" and _close(got, want["squared_total"], 1e-9):
                _fail("merge_stats: squares are the sums of squares of the states; add the two workers' squares, "
                      "do not square the merged sum")
            _fail(f"merge_stats: the {name} are off by a relative error of {rel_error(got, want[key]):.2g}; "
                  f"add the two workers' {name}")


@_register("mean_std", "extras", 1, "06_locomotion",
           forbidden=("es.obs_norm", "es.training"), reference=("mean_std",))
def mean_std(fn, rng):
    """mean_std(count, total, squares) -> (mean, std): mean = total / count, std =
    sqrt(max(squares / count - mean**2, 1e-4)), float64; (0, 1) for count 0. Relative error 1e-6, on
    statistics with a constant state variable (its variance rounded below 0) and one whose variance is 0.01 to 1 (where
    sqrt(var + 1e-4) is off by more than 1e-6), then on count 0; total and squares left as they were (the
    training loop merges into them afterwards)."""
    d, n = int(rng.integers(4, 12)), int(rng.integers(20, 500))
    x = rng.standard_normal((n, d)) * rng.uniform(0.05, 20, d) + rng.uniform(-3, 3, d)
    j, k = (int(i) for i in rng.choice(d, 2, replace=False))
    x[:, k] = rng.standard_normal(n) * rng.uniform(0.1, 1) + rng.uniform(-3, 3)   # a small variance, 0.01 to 1
    for _ in range(100):    # a state variable that never moves, its variance rounded below 0 (its sqrt: nan)
        x[:, j] = rng.uniform(-2, 2)
        total, squares = x.sum(axis=0), (x * x).sum(axis=0)
        if squares[j] / n - (total[j] / n) ** 2 < 0:
            break
    want = answers("mean_std", n, total, squares)
    out = _call_leaving(fn, ("count", "total", "squares"), n, total.copy(), squares.copy())
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("mean_std: return the pair (mean, std)")
    got_mean, got_std = (_array(v, (d,), "mean_std") for v in out)
    _dtype(out[0], np.float64, "mean_std (the mean)")
    _dtype(out[1], np.float64, "mean_std (the std)")
    if not _close(got_mean, want["mean"]):
        _fail("mean_std: the mean is off; mean = total / count")
    if not _close(got_std, want["std"]):
        if _close(got_std, want["variance"]):
            _fail("mean_std: it returned the variance; std is its square root")
        if _close(got_std, want["no_mean_squared"]):
            _fail("mean_std: it left out the mean: var = squares / count - mean**2, not squares / count")
        if _close(got_std, want["sample"]):
            _fail("mean_std: it divided by count - 1; these are all the states seen: divide by count")
        if _close(got_std, want["added_floor"]):
            _fail(f"mean_std: state variable {k} has a small variance and got std {got_std[k]:.6g}: it added 1e-4 to "
                  "the variance; floor it instead: std = sqrt(max(var, 1e-4))")
        if np.all(np.isfinite(got_std)) and _close(got_std, want["std_floor"]):
            _fail(f"mean_std: state variable {j} never moves and got std {got_std[j]:.2g}: it floored the std at "
                  "1e-4; floor the variance at 1e-4 (std at least 0.01)")
        if not np.isfinite(got_std[j]):
            _fail(f"mean_std: state variable {j} never moves and got std {got_std[j]}: rounding leaves its variance "
                  f"squares / count - mean**2 at {squares[j] / n - (total[j] / n) ** 2:.1g}, below 0, and the square "
                  "root of that is nan; floor the variance at 1e-4 before the square root: std = sqrt(max(var, 1e-4))")
        if got_std[j] < 1e-3:
            _fail(f"mean_std: state variable {j} never moves and got std {got_std[j]:.2g} (dividing by it blows "
                  "up); floor the variance at 1e-4: std = sqrt(max(var, 1e-4))")
        _fail("mean_std: the std is off; std = sqrt(max(squares / count - mean**2, 1e-4))")
    want = answers("mean_std", 0, np.zeros(d), np.zeros(d))
    out = _call_leaving(fn, ("count", "total", "squares"), 0, np.zeros(d), np.zeros(d))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        _fail("mean_std: return the pair (mean, std)")
    got_mean, got_std = (_array(v, (d,), "mean_std with count 0") for v in out)
    if not (np.array_equal(got_mean, want["mean"]) and np.array_equal(got_std, want["std"])):
        _fail(f"mean_std: with count 0 (no state seen yet, the first generation) return mean 0 and std 1, got mean "
              f"{got_mean[:3]}... and std {got_std[:3]}...")


@_register("linear_policy", "extras", 2, "06_locomotion",
           forbidden=("es.policies", "es.obs_norm", "es.envs", "es.training", "es.evaluators", "es.play"),
           reference=("linear_policy",))
def linear_policy(fn, rng):
    """linear_policy(params (k, d*a + a) float32, obs (k, d), mean, std, low, high) -> (k, a):
    low + (tanh(clip((obs - mean) / std, -5, 5) @ W_k + b_k) + 1) / 2 * (high - low), W_k row
    k's first d*a numbers as (d, a) row by row, then b_k; within 1e-5 * (high - low) of the
    course's; and the Python lines it runs (outside installed packages) do not grow with the rows:
    a `for` loop, a comprehension, map or np.vectorize over the student's own function fails (map
    over a built-in such as np.dot runs none of those lines per row and is not caught)."""
    d, a = int(rng.integers(3, 12)), int(rng.integers(2, 6))

    def draw(k):
        for _ in range(50):      # inputs on which every mistake below is far from the right actions
            mean, std = rng.uniform(-2, 2, d), rng.uniform(0.1, 3, d)
            z = rng.standard_normal((k, d)) * 1.5
            far = rng.random((k, d)) < 0.15
            z[far] = rng.choice([-1, 1], int(far.sum())) * rng.uniform(6, 20, int(far.sum()))
            obs = mean + std * z
            params = (rng.standard_normal((k, d * a + a)) * 0.25).astype(np.float32)
            low = (-rng.uniform(0.2, 1.0, a)).astype(np.float32)
            high = rng.uniform(0.5, 2.0, a).astype(np.float32)
            want = answers("linear_policy", params, obs, mean, std, low, high)
            span = (high - low).astype(np.float64)
            if min(np.max(np.abs(want[key] - want["right"]) / span) for key in want if key != "right") > 1e-3:
                break
        return (params, obs, mean, std, low, high), want, span

    k = int(rng.integers(5, 40))
    args, want, span = draw(k)
    out = _call_leaving(fn, ("params", "obs", "mean", "std", "low", "high"), *[np.array(x) for x in args])
    if not isinstance(out, np.ndarray):
        _fail(f"linear_policy: returned a {type(out).__name__}, the contract says an array (k, act_dim)")
    got = np.asarray(out)
    if got.shape != (k, a):
        _fail(f"linear_policy: expected actions of shape ({k}, {a}) (one row per row of params), got {got.shape}")
    got = got.astype(np.float64)
    near = lambda key: bool(np.all(np.abs(got - want[key]) <= 1e-5 * span))     # noqa: E731
    if not near("right"):
        for key, why in (("no_clip", "forgot the clip: normalized observations are clipped to [-5, 5]"),
                         ("raw_obs", "it ignores mean and std: normalize, (obs - mean) / std, then clip"),
                         ("no_tanh", "forgot the tanh: squash x @ W + b with tanh before scaling it to the range"),
                         ("no_tanh_unclipped", "forgot the tanh: squash x @ W + b with tanh before scaling it "
                                               "to the range"),
                         ("no_scaling", "forgot to scale tanh's [-1, 1] to [low, high]: "
                                        "low + (tanh(...) + 1) / 2 * (high - low)"),
                         ("times_high", "tanh(...) * high is the range only when low = -high; scale as "
                                        "low + (tanh(...) + 1) / 2 * (high - low)"),
                         ("transposed", "transposed weights: W is (obs_dim, act_dim) row by row, entry i * act_dim "
                                        "+ j from observation i to action j (reshape(k, obs_dim, act_dim))"),
                         ("bias_first", "the biases come after the weights: params[:, :obs_dim * act_dim] is W, "
                                        "the last act_dim numbers are b"),
                         ("row_0", "every row used row 0's parameters; row k of params plays row k of obs")):
            if near(key):
                _fail(f"linear_policy: {why}")
        _fail(f"linear_policy: actions off by up to {np.max(np.abs(got - want['right']) / span):.2g} of the range "
              "(more than 1e-5), and not by one of the usual mistakes; compare with the formula above")
    one = np.asarray(_call(fn, *[np.array(x[:1]) if i < 2 else np.array(x) for i, x in enumerate(args)]))
    if one.shape != (1, a):
        _fail(f"linear_policy: for a single row it returned shape {one.shape}, expected (1, {a}): keep the row axis "
              "(no np.squeeze); the loop calls it with one row when one episode is left")
    lines = [_observe(fn, *[np.array(x) for x in draw(m)[0]], count_lines=True)["lines"] for m in (8, 64)]
    if lines[1] - lines[0] >= 56:
        _fail(f"linear_policy: it loops over the rows in Python ({lines[0]} lines run for 8 rows, {lines[1]} for "
              "64); one batched operation (np.einsum or a batched matmul) does them all at once")


def _course_policy(params, obs, mean, std, low, high):
    """The course's locomotion policy (``es.policies.MLPPolicy`` with no hidden layer on clipped
    normalized observations), what ``locomotion_agent`` plays a student's center with."""
    from es.policies import MLPPolicy
    net = MLPPolicy(obs.shape[1], len(low), (), discrete=False, low=low, high=high)
    return net.forward(net.unflatten(params), np.clip((obs - mean) / std, -5, 5).astype(np.float32))


@_register("locomotion_agent", "extras", 3, "06_locomotion", "RUN_DIR",
           forbidden=(), reference=())
def locomotion_agent(run_dir, rng):
    """The run in ``run_dir`` (notebook 06's ``cheetah-run``) reached its task's threshold, and
    its center, played by the course's policy with the run's frozen statistics on 20 episodes on
    seeds that training never used, is not significantly below the threshold: their mean plus
    1.645 standard errors (a one-sided test at 5%) reaches it. Training confirmed the center
    20 above the threshold on 20 other episodes, so an agent as trained passes."""
    from ..mujoco_runs import HELD_OUT, TASKS, load_metrics, play
    run_dir = Path(run_dir)
    missing = [f for f in ("config.json", "metrics.jsonl", "checkpoint.npz") if not (run_dir / f).is_file()]
    if missing:
        _fail(f"locomotion_agent: {run_dir} lacks {', '.join(missing)}: train first (section 4 writes them)")
    try:
        task = json.loads((run_dir / "config.json").read_text())["task"]
        with np.load(run_dir / "checkpoint.npz") as saved:
            center, finished = saved["center"].astype(np.float32), bool(saved["finished"])
            mean, std = saved["obs_mean"].astype(np.float64), saved["obs_std"].astype(np.float64)
        rows = load_metrics(run_dir)
    except Exception as exc:
        _fail(f"locomotion_agent: {run_dir}'s files cannot be read ({exc.__class__.__name__}: {str(exc)[:100]}); "
              "train again into a new folder")
    if task not in TASKS:
        _fail(f"locomotion_agent: {run_dir} trained {task!r}, not one of {', '.join(TASKS)}")
    env_id, shift, threshold = TASKS[task]
    if not finished:
        best = max((r["center_score"] for r in rows), default=float("nan"))
        _fail(f"locomotion_agent: {run_dir} has not reached {threshold:.0f} yet (best center {best:.0f} in "
              f"{len(rows)} generations): train on (re-running the training cell resumes the run)")
    dim = center.size
    obs_dim = mean.size
    if obs_dim == 0 or dim % (obs_dim + 1) or std.shape != mean.shape:
        _fail(f"locomotion_agent: {run_dir}'s checkpoint does not hold a linear policy and its statistics")
    seeds = rng.integers(2 * HELD_OUT, 2 ** 31 - 1, 20)
    returns, lengths, _, _ = play(env_id, _course_policy, np.repeat(center[None, :], len(seeds), 0), seeds, mean, std)
    scores = returns + shift * lengths                 # gymnasium's own returns (an alive bonus added back)
    score, error = float(np.mean(scores)), float(np.std(scores, ddof=1) / np.sqrt(len(scores)))
    if score + 1.645 * error < threshold:
        _fail(f"locomotion_agent: the agent scores {score:.0f} +- {error:.0f} (standard error) on 20 new episodes "
              f"(seeds {seeds[0]}, ...), significantly below {threshold:.0f}, played by the course's policy with the "
              "run's statistics; if training confirmed it above the threshold, your linear_policy differs from the "
              "course's (check.linear_policy says how)")
    print(f"locomotion_agent: the {task} agent scores {score:.0f} +- {error:.0f} (standard error) on 20 new episodes "
          f"(threshold {threshold:.0f})")
