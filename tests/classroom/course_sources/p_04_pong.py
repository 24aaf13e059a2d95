"""Sources of the numbers on page 04_pong."""
import ast
import inspect
import re
import statistics
from functools import lru_cache

import numpy as np
import pytest

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)
from course_sources import ROOT, cells, check_points, fmt, lines, load, printed, solution, source_of

NB = "04_pong"
RUN = "solutions/pong-run"                      # the notebook's own run (`reference`), as its solution trained it
KIT = "docs/runs/pong-student-release"          # the same run, and `linus`'s, trained from a student kit
HELD_OUT = "docs/runs/issue52-student"          # the 12 held-out identifiers of benchmarks/pong_student.py
STARTER = "OpenAI's evolution-strategies-starter at commit 951f199"
URL = "https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/"


# ---------------------------------------------------------------- the top
def points():
    assert check_points(NB) == 10


def ale_settings():
    """Pong-v5's own frameskip and sticky actions (the installed gymnasium/ale-py registration),
    and pong.games plays them."""
    import ale_py
    import gymnasium as gym
    from pong import games
    gym.register_envs(ale_py)
    kwargs = gym.spec("ALE/Pong-v5").kwargs
    assert (kwargs["frameskip"], kwargs["repeat_action_probability"]) == (4, 0.25)
    assert (games.FRAMESKIP, games.STICKY) == (4, 0.25)


# ---------------------------------------------------------------- 1. downsample
def column_weights():
    """The solution's (160, 42) overlaps: integers 0..42, each column summing to 160, so every
    output is N / 800 with N exact in float64 and float32 (5 x 255 x 160 < 2^24)."""
    from pong.env import downsample_batch
    w = solution(NB, "COLUMNS")["COLUMNS"]
    assert w.shape == (160, 42) and np.array_equal(w, np.round(w))
    assert (w.min(), w.max()) == (0, 42) and set(w.sum(axis=0)) == {160}
    assert 5 * 160 == 800 and 5 * 255 * 160 < 2 ** 24
    frames = np.random.default_rng(0).integers(0, 256, (3, 210, 160)).astype(np.uint8)
    n = frames.reshape(3, 42, 5, 160).sum(axis=2).astype(np.float32) @ w.astype(np.float32)
    assert np.array_equal(np.rint(n / np.float32(800)).astype(np.uint8), downsample_batch(frames))


def halves_per_frame():
    """Exact halves (classroom.references.downsample_halves) on the screens of 4 games (seeds
    0..3) played with seeded random moves, up to 1000 steps each."""
    from classroom.references import downsample_halves
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    counts = []

    def keep(frames):
        counts.extend(downsample_halves(f[None])["halves"] for f in frames)
        return downsample_batch(frames)
    rng = np.random.default_rng(0)
    PongGames(4, keep, stack_batch).play(lambda episodes, obs: rng.integers(0, 3, len(episodes)), [0, 1, 2, 3], 1000)
    assert len(counts) > 3000 and round(float(np.mean(counts)), 1) == 0.6, np.mean(counts)


def worked_example():
    from pong.env import downsample_batch
    ns = solution(NB, "COLUMNS", "downsample")
    w = ns["COLUMNS"]
    assert list(w[:4, 0]) == [42, 42, 42, 34] and not w[4:, 0].any() and round(160 / 42, 2) == 3.81
    frames = np.zeros((1, 210, 160), np.uint8)
    frames[0, 0, 0], frames[0, 1, 3], frames[0, 4, 3] = 14, 9, 9
    sums = frames[0, :5].sum(axis=0, dtype=np.int64)
    assert list(sums[:4]) == [14, 0, 0, 18]
    n = int(sums @ w[:, 0])
    assert n == 42 * 14 + 34 * 18 == 1200 and n / 800 == 1.5
    assert ns["downsample"](frames)[0, 0, 0] == 2 == downsample_batch(frames)[0, 0, 0]


def uint8_wraps():
    """uint8 + uint8 keeps the sum modulo 256 (NumPy), while ndarray.sum of uint8 adds in a wider
    integer type: the hint's sum(axis=2) does not wrap."""
    a, b = np.array([200], np.uint8), np.array([100], np.uint8)
    assert (a + b)[0] == (200 + 100) % 256 == 44 and np.iinfo(np.uint8).max + 1 == 256
    frames = np.full((1, 210, 160), 255, np.uint8)
    assert frames.reshape(1, 42, 5, 160).sum(axis=2).max() == 5 * 255


# ---------------------------------------------------------------- 2. stack_frames
def first_step():
    """pong.games calls stack with 4 zero frames and the first screen: 3 empty frames, then it."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    calls, seen = [], []

    def spy(stacks, frames):
        calls.append(np.array(stacks))
        return stack_batch(stacks, frames)
    PongGames(1, downsample_batch, spy).play(lambda e, obs: seen.append(obs.copy()) or np.zeros(len(e), int), [0], 2)
    assert calls[0].shape == (1, 4, 42, 42) and not calls[0].any()
    assert not seen[0][0, :3].any() and seen[0][0, 3].any()


def _sizes(name, spy, seeds=60):
    from classroom import check
    for seed in range(seeds):
        check._RAW[name](spy, rng=np.random.default_rng(seed))


def stack_check_sizes():
    from pong.env import stack_batch
    from classroom import check
    games = set()

    def spy(stacks, frames):
        games.add(len(stacks))
        return stack_batch(stacks, frames)
    _sizes("stack_frames", spy)
    assert "int(rng.integers(2, 6))" in source_of(check._RAW["stack_frames"])
    assert games == {2, 3, 4, 5}, games


# ---------------------------------------------------------------- the pipeline, the features, the actions
@lru_cache(maxsize=None)
def paddle():
    """Where our paddle is after 5 steps of game seed 0 with each action index (rows of the
    newest 42x42 frame between the walls, the columns it lights)."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    from pong.pixels import BACKGROUND_INT
    games, out = PongGames(1, downsample_batch, stack_batch), {}
    for action in (0, 1, 2):
        seen = []
        games.play(lambda e, obs: seen.append(obs[0, 3].copy()) or np.full(len(e), action), [0], 5)
        lit = np.abs(seen[-1].astype(int) - BACKGROUND_INT)[7:38, 30:]
        rows, columns = np.nonzero(lit)
        out[action] = (float(rows.mean()) + 7, sorted(set((columns + 30).tolist())))
    return out


def actions():
    """0 NOOP, 1 UP, 2 DOWN: ALE's NOOP, RIGHT and LEFT (pong.games.PONG_ACTIONS), and played,
    index 1 moves our paddle up, index 2 down; 3 logits (the policy's head)."""
    import ale_py
    import gymnasium as gym
    from pong.games import PONG_ACTIONS
    from pong.student import POLICY
    gym.register_envs(ale_py)
    names = gym.make("ALE/Pong-v5").unwrapped.get_action_meanings()
    assert [names[a] for a in PONG_ACTIONS] == ["NOOP", "RIGHT", "LEFT"]
    rows = {a: row for a, (row, _) in paddle().items()}
    assert rows[1] < rows[0] < rows[2], rows
    assert POLICY.head.num_params == (POLICY.num_features + 1) * 3


def features():
    """POLICY.features: per frame, 42 rows x 7 bands of 6 columns, sums of (pixel - empty field)
    / 255, float32, 1176 per observation; 0 on the empty field; our paddle lights columns
    36-37, inside the last band (36..41)."""
    from pong.pixels import BACKGROUND_INT
    from pong.student import POLICY
    obs = np.random.default_rng(0).integers(0, 256, (2, 4, 42, 42)).astype(np.uint8)
    x = POLICY.features(obs)
    want = ((obs - BACKGROUND_INT.astype(np.float64)) / 255).reshape(2, 4, 42, 7, 6).sum(-1).reshape(2, -1)
    assert POLICY.band == 6 and x.dtype == np.float32 and x.shape == (2, 4 * 42 * 7) == (2, 1176)
    assert np.allclose(x, want, atol=1e-4)
    empty = np.broadcast_to(BACKGROUND_INT.astype(np.uint8), (1, 4, 42, 42))
    assert not POLICY.features(empty).any()
    assert set(paddle()[0][1]) <= set(range(36, 42))


def pipeline():
    """The figure's cell: 40 steps of game 0, action 0 (NOOP) for 36 steps, then 1 (up, by
    `actions`), and the features shown as 4 frames of 42 rows x 7 bands; played again, the
    observation it shows (the last) has our paddle higher in each frame than in the one before,
    and the ball elsewhere in each."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    from pong.pixels import BACKGROUND_INT
    from pong.student import POLICY
    code = [src for kind, src, _ in cells(NB) if kind == "code" and "frames_seen.append" in src]
    assert len(code) == 1 and "[0], max_steps=40" in code[0] and "1 if len(frames_seen) > 36 else 0" in code[0]
    assert ".reshape(4, 42, 7)" in code[0] and POLICY.num_features == 4 * 42 * 7
    assert paddle()[1][0] < paddle()[0][0]
    assert "shown = screens[len(frames_seen) - 1]" in code[0] and "(top[0, 0], shown," in code[0]
    seen, screens = [], []

    def keep(frames):
        screens.append(frames[0].copy())
        return downsample_batch(frames)

    def still_then_up(episodes, obs):
        seen.append(obs[0].copy())
        return np.full(1, 1 if len(seen) > 36 else 0)
    PongGames(1, keep, stack_batch).play(still_then_up, [0], max_steps=40)
    # the screen the figure shows is the one behind the observation it shows (the games downsample once more)
    assert len(screens) == len(seen) + 1 and np.array_equal(downsample_batch(screens[len(seen) - 1][None])[0], seen[-1][3])
    lit = np.abs(seen[-1].astype(int) - BACKGROUND_INT) > 0          # 4 frames, oldest first
    ours = [np.nonzero(f[7:38, 36:38].any(1))[0].mean() for f in lit]   # between the walls, our paddle's columns
    ball = [tuple(np.argwhere(f[7:38, 6:36]).mean(0)) for f in lit]
    assert len(seen) == 40 and all(a > b for a, b in zip(ours, ours[1:])), ours
    assert len(set(ball)) == 4 and not any(np.isnan(ball).ravel()), ball


def policy_check_sizes():
    """check.batched_policy: 20..39 members for the exact actions, then as many on float32 inputs
    whose two highest logits tie or lie 1/64 apart (float16 rounds them to the same number), then
    8 and 64 for the lines."""
    from classroom import check
    from classroom.references import batched_policy
    members = []

    def spy(W, b, features):
        members.append(len(W))
        logits = np.einsum("pf,pfa->pa", features, W) + b
        if W.dtype == np.float32:
            top = np.sort(logits, axis=1)
            gaps = top[:, 2] - top[:, 1]
            assert set(gaps.tolist()) == {0, 1 / 64} and logits.max(1).min() > 256, gaps
            assert np.array_equal(top[:, 2].astype(np.float16), top[:, 1].astype(np.float16))   # float16 ties them
        return batched_policy(W, b, features)["right"]
    for seed in range(30):
        before = len(members)
        check._RAW["batched_policy"](spy, rng=np.random.default_rng(seed))
        first, second, *rest = members[before:]
        assert 20 <= first <= 39 and second == first and rest == [8, 64], members[before:]
    assert "int(rng.integers(20, 40))" in source_of(check._RAW["batched_policy"])
    # fails when the lines grow by one per member or more: 56 = 64 - 8 more lines
    assert "if lines[1] - lines[0] >= 56:" in source_of(check._RAW["batched_policy"]) and 64 - 8 == 56
    student = {"np": np}        # compiled as a notebook cell is: the probe counts lines outside the course's files
    exec(compile("def looped(W, b, x):\n    return np.array([np.argmax(x[p] @ W[p] + b[p]) for p in range(len(W))])\n"
                 "def in_map(W, b, x):\n    return np.argmax(np.array(list(map(np.dot, x, W))) + b, 1)\n",
                 "<student cell>", "exec"), student)
    with pytest.raises(check.CheckFailed, match="loops over the members in Python"):
        check._RAW["batched_policy"](student["looped"], rng=np.random.default_rng(0))
    for seed in range(3):      # a loop inside a builtin runs no line of the student's: it passes
        check._RAW["batched_policy"](student["in_map"], rng=np.random.default_rng(seed))


# ---------------------------------------------------------------- 4. es_step
def ranks_example():
    """The course's centered ranks (es.shaping, what pong.replay.reference_es_step uses), and
    notebook 00's centered_ranks (its solution) gives the same weights, ties included."""
    from es.shaping import centered_ranks
    from pong.replay import reference_es_step
    assert "centered_ranks(fitness)" in source_of(reference_es_step)
    ours = solution("00_es_from_scratch", "centered_ranks")["centered_ranks"]
    tied = np.random.default_rng(0).integers(-21, -15, 64).astype(np.float64)
    for f in (np.array([-21.0, -20.0, -21.0, -19.0]), tied):    # es.shaping's are float32
        assert np.allclose(ours(f), centered_ranks(f), rtol=0, atol=1e-7) and len(set(f)) < len(f)
    weights = centered_ranks(np.array([-21.0, -20.0, -21.0, -19.0]))
    ranks = (weights + 0.5) * 3
    assert fmt(ranks, 1) == "[0.5, 2, 0.5, 3]" and fmt(weights, 4) == "[-0.3333, 0.1667, -0.3333, 0.5]"
    assert np.isclose(ranks.min(), 0.5) and centered_ranks(np.arange(5.0))[[0, -1]].tolist() == [-0.5, 0.5]


# ---------------------------------------------------------------- before training: speed
def speed():
    """check.speed_of: a batch of 32 screens, from the games it plays (4)."""
    from classroom import check
    params = inspect.signature(check.speed_of).parameters
    assert params["batch"].default == 32 and params["games"].default == 4
    assert "frames = frames[np.arange(batch) % len(frames)]" in source_of(check.speed_of)
    assert check.SPEED_TARGET == 1.0                       # at most 100%: a game step at most twice ALE's


# ---------------------------------------------------------------- 5. the run
def config():
    from pong.student import StudentConfig
    saved = load(f"{RUN}/config.json")
    default = StudentConfig(seed=saved["seed"])
    assert {k: getattr(default, k) for k in saved} == saved
    return saved


def loop():
    """2 worker processes; the grader's 20 unseen games (check.pong_agent's beats_random call,
    its default number of games)."""
    from classroom import check
    from pong import student
    assert config()["workers"] == 2
    assert student.GAMES == 20 and inspect.signature(student.beats_random).parameters["games"].default == 20
    assert "beats_random(REFERENCE, replay.center, first_seed=first)" in source_of(check._RAW["pong_agent"])


def population():
    from pong.student import perturbations
    assert config()["population"] == 64
    eps = perturbations(1, 0, 64, 10)
    assert np.array_equal(eps[0::2], -eps[1::2]) and len(eps[0::2]) == 32


def sigma_value():
    assert config()["sigma"] == 0.05


def sigma_reason():
    """With the run's last center (after 30 updates), how often a member's action differs from
    the center's, on the observations of the center's own first 900 steps of game seed 0 (each
    member scored on them, not on a game of its own): the median over the 64 members of its
    next generation (the run's own perturbations of generation 30), at sigma 0.05, 0.02 and 0.1."""
    from es.policies import split_layers
    from pong.games import PongGames
    from pong.replay import REFERENCE
    from pong.student import POLICY, perturbations
    centers = np.load(ROOT / RUN / "centers.npy")
    last = len(centers) - 1
    assert last == 30 == len(lines(f"{RUN}/metrics.jsonl"))
    (w, b), = split_layers(centers[last][None], [(POLICY.num_features, 3)])
    seen = []

    def choose(episodes, obs):
        seen.append(obs.copy())
        return (POLICY.features(obs) @ w[0] + b[0, 0]).argmax(1)
    PongGames(1, REFERENCE.downsample, REFERENCE.stack_frames).play(choose, [0], 900)
    x = POLICY.features(np.concatenate(seen))
    assert len(x) == 900
    base = (x @ w[0] + b[0, 0]).argmax(1)
    noise = perturbations(config()["seed"], last, config()["population"], centers.shape[1])
    assert len(noise) == 64

    def median(sigma):
        out = []
        for eps in noise:
            (wm, bm), = split_layers((centers[last] + sigma * eps)[None], [(POLICY.num_features, 3)])
            out.append(((x @ wm[0] + bm[0, 0]).argmax(1) != base).mean())
        return round(100 * float(np.median(out)))
    assert [median(s) for s in (0.05, 0.02, 0.1)] == [18, 7, 33]


def adam():
    c = config()
    assert c["learning_rate"] == 0.01 and round(c["learning_rate"] / c["sigma"], 10) == 0.2      # a fifth of sigma


def _cites(snippet, citation):
    assert citation in snippet, citation


def starter_adam(snippet):
    # checked against the starter at 951f199: configurations/humanoid.json line 17, `"stepsize": 0.01` under
    # "optimizer": {"type": "adam"}; env_id Humanoid-v1 (MuJoCo); the repository's only configuration
    def holds():
        adam()
        _cites(snippet, "line 17](" + URL + "configurations/humanoid.json#L17)")
    return holds


def decay_citation(snippet):
    # checked at 951f199: configurations/humanoid.json line 6 `"l2coeff": 0.005`; es_distributed/es.py
    # line 247 `g /= returns_n2.size`, line 249 `update_ratio = optimizer.update(-g + config.l2coeff * theta)`
    # (no division by noise_stdev anywhere between)
    def holds():
        c = config()
        assert c["weight_decay"] == 0.005 and round(1 / c["sigma"]) == 20
        _cites(snippet, "line 6](" + URL + "configurations/humanoid.json#L6)")
        _cites(snippet, "lines 247-249 of its master](" + URL + "es_distributed/es.py#L247-L249)")
    return holds


def fitness():
    from pong import student
    assert config()["game_cap"] == 5000 and 5000 * 1e-5 < 1
    assert "scores + 1e-5 * lengths" in source_of(student._chunk)
    first = lines(f"{RUN}/metrics.jsonl")[0]["returns"]
    assert all(round(r) == -21 or round(r) == -20 for r in first)           # whole points, then + 1e-5 a step


def at_most():
    from pong import student
    assert config()["generations"] == 200
    assert "while run.generation < config.generations:" in source_of(student.train_until_beats_random)


def rule():
    """20 games each; the 95% t-interval (es.play.mean_ci95) of the agent above the random
    player's; the random player's on seeds 0..19 as the run's record holds it."""
    import math
    from es.play import mean_ci95
    from pong import student
    assert student.GAMES == 20 and "self.agent_ci[0] > self.random_ci[1]" in source_of(student.Verdict)
    record = load(f"{RUN}/beats_random.json")
    assert record["seeds"] == list(range(20)) and len(record["random_scores"]) == 20
    mean, std, ci = mean_ci95(record["random_scores"])
    assert np.allclose(ci, record["random_ci"])
    assert math.isclose(ci[1] - mean, 2.093 * std / math.sqrt(20), rel_tol=1e-3)     # Student's t, 19 degrees
    assert (round(mean, 2), [round(v, 2) for v in ci]) == (-20.25, [-20.65, -19.85])


def training_rule():
    from pong import student
    assert config()["check_every"] == 5
    src = source_of(student.train_until_beats_random)
    assert "run.rows[-config.check_every:]" in src and '> -20.0' in src
    assert "verdict = beats_random(code, run.center, first_seed)" in src and "first_seed: int = 0" in src
    assert "CONFIRM_SEEDS + GAMES * (run.generation // config.check_every)" in src and student.GAMES == 20


def how_long():
    """The quiet runs: docs/benchmarks.md's table of them (their only record, 2026-11-25); the
    busy ones: the kit's JSON lines and the solution run's own clock."""
    from pong.student import run_minutes
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    quiet = re.findall(r"^\| (\S+) \| ([\d.]+) \| (\d+) \| -[\d.]+ \| -[\d.]+, passes \|$", bench, re.M)
    assert len(quiet) == 8
    minutes = [float(m) for _, m, _ in quiet]
    updates = [int(g) for _, _, g in quiet]
    assert (round(min(minutes), 1), round(max(minutes), 1)) == (3.6, 10.8)
    held_out = [r for r in lines(f"{HELD_OUT}/baseline.jsonl") if "student" in r]
    assert all(r["beats_random"] and r["grader_passes"] for r in held_out)
    script = ast.parse((ROOT / "benchmarks" / "pong_student.py").read_text())     # its STUDENTS, not imported
    STUDENTS = next(ast.literal_eval(n.value) for n in script.body
                    if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "STUDENTS")
    names = [q for q, _, _ in quiet] + [r["student"] for r in held_out]
    assert sorted(names) == sorted(STUDENTS) and len(STUDENTS) == len(set(STUDENTS)) == 20
    per_update = [m / u for m, u in zip(minutes, updates)]                 # the quiet machine's 8
    alone = [r["train_minutes"] / r["generations"] for r in held_out if r["load_mean"] <= 2.1]   # ~its own 2 workers
    assert len(alone) >= 4
    assert (round(min(per_update), 2), round(max(per_update), 2)) == (0.13, 0.18)
    assert (round(min(alone), 2), round(max(alone), 2)) == (0.45, 0.59)
    # the slowest identifier's 70 updates, a tenth left for the evaluations and the start (4.2-9.8% of the
    # training cell's clock in docs/benchmarks.md's table of wall and train minutes)
    assert 70 * max(per_update) <= 15 * 0.9 and 70 * max(alone) <= 50 * 0.9
    updates += [r["generations"] for r in held_out]
    assert (min(updates), max(updates), statistics.median(updates)) == (25, 70, 35)
    kit = lines(f"{KIT}/release.jsonl")
    reference = next(r for r in kit if r["student"] == "reference")
    assert reference["cpus"] == 2 and reference["generations"] == 30 and reference["load_mean"] > 2
    own = run_minutes(ROOT / RUN)["wall"]
    assert round(own, 1) == 20.8 and round(max(r["wall_minutes"] for r in kit), 1) == 52.7 == \
        round(reference["wall_minutes"], 1) > own
    busy = re.search(r"^\| reference \(`solutions/04_pong\.ipynb`'s own run.*?\| 30 \| ([\d.]+) \| [\d.]+ \| [^|]+\| "
                     r"([\d.]+) \|", bench, re.M)
    assert round(float(busy[1]), 1) == round(own, 1) and float(busy[2]) > 2        # load average above the 2 cores
    assert max(minutes) <= 15 and reference["wall_minutes"] <= 60          # the plan: 15 minutes, an hour
    assert config()["workers"] == 2


# ---------------------------------------------------------------- the curve
def same_run():
    """The kit's `reference` run is the solution's, every fitness of every generation."""
    kit = lines(f"{KIT}/reference-metrics.jsonl")
    own = lines(f"{RUN}/metrics.jsonl")
    assert len(kit) == len(own) == 30 and [r["returns"] for r in kit] == [r["returns"] for r in own]


def start():
    """Generation 0's mean and best fitness: the best member's score is -20 (a point won), plus
    its game length's bonus (1e-5 a step, pong.student._chunk)."""
    rows = lines(f"{RUN}/metrics.jsonl")
    mean, best = rows[0]["pop_mean"], rows[0]["pop_max"]
    assert round(mean, 2) == -20.96 and round(best, 2) == -19.99 and round(best - mean) == 1
    assert round(best) == -20 and max(rows[0]["returns"]) == best


def climb():
    runs = [lines(f"{RUN}/metrics.jsonl"), lines(f"{KIT}/linus-metrics.jsonl")]
    first = [next(r["generation"] for r in run if r["pop_mean"] > -20.5) for run in runs]
    assert first == [17, 11], first


def tried():
    runs = [lines(f"{RUN}/metrics.jsonl"), lines(f"{KIT}/linus-metrics.jsonl")]
    at = [next(g for g in range(5, len(run) + 1, 5) if np.mean([r["pop_mean"] for r in run[g - 5:g]]) > -20)
          for run in runs]
    assert at == [30, 25] == [len(run) for run in runs]          # tried after 30 and 25 updates, and they stopped there
    assert load(f"{RUN}/beats_random.json")["agent_mean"] == -17.5 == lines(f"{KIT}/release.jsonl")[0]["agent_mean"]


S_ADAM = ("OpenAI's starter code (linked in notebook 00) uses Adam with the same step in its one released "
          "configuration, for MuJoCo's humanoid, not Atari ([its stepsize, line 17]("
          + URL + "configurations/humanoid.json#L17)).")
S_DECAY = ("**Weight decay 0.005**, the `l2coeff` of that configuration ([line 6](" + URL
           + "configurations/humanoid.json#L6)), but a weaker pull here: the starter's update has no 1/sigma "
           "([lines 247-249 of its master](" + URL + "es_distributed/es.py#L247-L249): `g /= returns_n2.size`, then "
           "`optimizer.update(-g + config.l2coeff * theta)`), while here the ES term is divided by sigma = 0.05, so "
           "the same decay pulls 20 times less against it.")

CLAIMS: list[Claim] = [
    Claim("[+10 points]", points, "the graded checks' points (classroom.check.CHECKS)"),
    Claim("4 emulator frames per action, and with probability 0.25 on every frame", ale_settings,
          "gymnasium.spec('ALE/Pong-v5').kwargs (ale-py's registration) and pong.games.FRAMESKIP, STICKY"),
    Claim("the overlap is an integer from 0 to 42, and each output column's weights sum to 160. Sum the 5 rows as "
          "integers: every output is then `N / 800` for an integer `N` (5 rows x 160)", column_weights,
          "the solution's COLUMNS, against pong.env.downsample_batch"),
    Claim("Exact halves are common on real frames (0.6 per frame on average in random play)", halves_per_frame,
          "classroom.references.downsample_halves on seeded random play (pong.games)", slow=True),
    Claim("output pixel (0, 0): output column 0 covers input columns 0, 1, 2 wholly (42 each) and 34/42 of column 3 "
          "(up to 160/42 = 3.81). If the first 5 rows summed per column are 14, 0, 0 and 18 in columns 0..3, then "
          "`N = 42 x 14 + 34 x 18 = 1200`, and `1200 / 800 = 1.5` rounds to **2**", worked_example,
          "the solution's COLUMNS and downsample, and pong.env.downsample_batch, on that frame"),
    Claim("sums the rows as integers (`+` between uint8 arrays would wrap around at 256)", uint8_wraps,
          "NumPy's uint8 arithmetic and ndarray.sum's accumulator, computed"),
    Claim("so a game starts with 3 empty frames, then its first frame.", first_step,
          "pong.games.PongGames' first call of stack, spied on"),
    Claim("**The check:** exact, for 2 to 5 games.", stack_check_sizes, "check.stack_frames, spied on"),
    Claim("40 steps of game 0, our paddle left still for 36 steps, then moved up. Top row: the screen behind the last "
          "observation, what your `downsample` made of it", pipeline, "the figure's code cell; pong.games played"),
    Claim("from one frame to the next the ball moves and our paddle, at the right, climbs", pipeline,
          "the figure's observation, played again"),
    Claim("each 42 rows x 7 bands", pipeline, "the figure's code cell; POLICY.num_features"),
    Claim("the ball and the paddles light up, the empty field is 0", features, "pong.student.POLICY.features"),
    Claim("for each frame, each of the 42 rows and each band of 6 columns, the sum of `(pixel - empty field) / 255`, "
          "so 4 x 42 x 7 = 1176 numbers per observation (float32). The band with your paddle (the 6 columns at the "
          "right)", features, "pong.student.POLICY.features, and our paddle's columns in a played game"),
    Claim("the argmax of its 3 logits `features[p] @ W[p] + b[p]` (0 NOOP, 1 UP, 2 DOWN;", actions,
          "pong.games.PONG_ACTIONS, ALE's action meanings, and the paddle moved by each in a played game"),
    Claim("exact actions for 20 to 39 members, on inputs where ignoring `b` or using member 0's weights for everyone "
          "changes many actions, then on float32 inputs where logits tie or lie 1/64 apart (float16 cannot tell them "
          "apart); then it counts the lines of your own code that run for 8 and for 64 members, and fails when they "
          "grow by a line per member or more (a Python loop over members); a loop inside NumPy or a builtin "
          "(`map(np.dot, ...)`) runs no line of yours.", policy_check_sizes,
          "check.batched_policy, spied on, and run on a looped and a map(np.dot) policy"),
    Claim("1. **Centered ranks** of the fitness (0 for the worst ... `population - 1` for the best, tied values "
          "sharing the mean of their ranks, divided by `population - 1`, minus 0.5): one long rally must not outweigh "
          "everything else, and two members that played the same game tie. This is notebook 00's `centered_ranks`: "
          "paste yours in. Example: fitness `[-21, -20, -21, -19]` gives ranks `[0.5, 2, 0.5, 3]` and weights "
          "`[-0.3333, 0.1667, -0.3333, 0.5]`.", ranks_example,
          "es.shaping.centered_ranks, the ranks of pong.replay.reference_es_step; notebook 00's solution"),
    Claim("a batch of 32 real screens at once (from 4 games it plays)", speed, "check.speed_of's batch and games; "
          "config.json: 64 members over 2 worker processes"),
    Claim("**Target: your three functions together add at most 100% to a game step**", speed, "check.SPEED_TARGET"),
    Claim("plays the games in 2 worker processes", loop, "solutions/pong-run/config.json, pong.student"),
    Claim("plays your agent on 20 games it never saw", loop, "check.pong_agent's beats_random, pong.student.GAMES"),
    Claim("**Population 64** (32 mirrored pairs)", population, "solutions/pong-run/config.json, perturbations"),
    Claim("**Sigma 0.05**", sigma_value, "solutions/pong-run/config.json"),
    Claim("with the center this notebook's own run (`reference`) ended on, after 30 updates, a member of its next "
          "generation, shown the observations of the center's own first 900 steps of game seed 0, picks another "
          "action than the center on 18% of them (the median of its 64 members); at sigma 0.02 on 7%, at 0.1 on "
          "33%.", sigma_reason,
          "solutions/pong-run/centers.npy and the run's own perturbations of generation 30, played again"),
    Claim("**Adam, step 0.01**", adam, "solutions/pong-run/config.json"),
    Claim(S_ADAM, starter_adam(S_ADAM), f"{STARTER}: configurations/humanoid.json line 17, Adam stepsize 0.01"),
    Claim(S_DECAY, decay_citation(S_DECAY), f"{STARTER}: configurations/humanoid.json line 6 (l2coeff 0.005), "
          "es_distributed/es.py lines 247 (g /= returns_n2.size) and 249 (optimizer.update(-g + config.l2coeff * "
          "theta)); the 20 is 1 / sigma of solutions/pong-run/config.json"),
    Claim("(capped at 5000 agent steps), the score you are judged on. Equal scores rank by how long the game lasted "
          "(+ 0.00001 per step, never enough to pass a point)", fitness, "pong.student._chunk, config.json"),
    Claim("**At most 200 updates** (`StudentConfig.generations`): training stops at the first agent that beats random "
          "by the rule below, or after 200 updates.", at_most, "config.json, pong.student.train_until_beats_random"),
    Claim("20 full games of `ALE/Pong-v5` with your agent and 20 with a uniformly random player on the same seeds; "
          "your agent beats random when its 95% t-interval lies entirely above the random player's. The random player "
          "scores -20.25 on seeds 0..19 (interval [-20.65, -19.85]) and a little more or less on other seeds", rule,
          "pong.student, es.play.mean_ci95, solutions/pong-run/beats_random.json"),
    Claim("Training applies the rule every 5 updates once the last 5 generations' populations average above -20, and "
          "stops at the first agent that passes it twice: on seeds 0..19, then on 20 games it has never seen (new "
          "seeds at each check). Why twice: the first of many checkpoints to pass on seeds 0..19 was picked partly "
          "for its luck on those 20 games", training_rule, "pong.student.train_until_beats_random"),
    Claim("The 20 identifiers the course measured on 2 cores took 25 to 70 updates (median 35). An update took 0.13 "
          "to 0.18 minutes on one 2-core machine with nothing else running (3.6 to 10.8 minutes of training for 8 "
          "identifiers) and 0.45 to 0.59 on a slower one with little else running. Plan for 15 minutes on a fast "
          "machine to yourself, 50 on a slow one and an hour or more on a busy one; more than 2 cores do not help "
          "(the loop uses 2 worker processes).", how_long,
          "docs/benchmarks.md's quiet table and its row of the solution's run (load average 6.0), "
          "docs/runs/issue52-student/baseline.jsonl (the 12 held-out identifiers), "
          "docs/runs/pong-student-release/release.jsonl, the run's checkpoint"),
    Claim("your run is the course's own run for your identifier, generation for generation", same_run,
          "docs/runs/pong-student-release/reference-metrics.jsonl against solutions/pong-run/metrics.jsonl"),
    Claim("the population's mean near -21 (almost every member loses 21:0; `reference`: -20.96), its best member about "
          "a point above the mean (`reference`: -19.99, one point won)", start, "solutions/pong-run/metrics.jsonl"),
    Claim("the mean first passes -20.5 at generation 17 (11 for `linus`, another identifier the course timed)", climb,
          "solutions/pong-run/metrics.jsonl, docs/runs/pong-student-release/linus-metrics.jsonl"),
    Claim("once five generations average above -20 (after 30 updates for `reference`, 25 for `linus`; both passed at "
          "once), and an agent that passes still loses its games (`reference`: -17.5 on seeds 0..19)", tried,
          "the two runs' metrics.jsonl, solutions/pong-run/beats_random.json, the kit's release.jsonl"),
]
