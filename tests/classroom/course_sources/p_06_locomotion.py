"""Sources of the numbers on page 06_locomotion."""
from pathlib import Path

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)
from course_sources import mirrored_lines

RUN = "solutions/cheetah-run"
STARTER = Path("/work/.mirror/openai+evolution-strategies-starter/repo/.git")   # commit 951f199, where present
ARS = Path("/work/.mirror/modestyachts+ARS/repo")                              # commit 4c8e24e, where present
S = "https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/es_distributed"
A = "https://github.com/modestyachts/ARS/blob/4c8e24e0a99cf811030e90680fc29eb94fae8cdd/code/ars.py"


def _cites(snippet: str, *citations: str, repo: Path | None = None, commit: str = "", path: str = "",
           lines: dict | None = None):
    """A claim about another project: the text carries its citation; where a mirror is at hand,
    each cited line (1-based) holds the text given for it."""
    def holds():
        for c in citations:
            assert c in snippet, f"the text no longer cites {c!r}"
        got = mirrored_lines(repo, commit, path) if repo else None
        if got is not None:
            for number, text in (lines or {}).items():
                assert text in got[number - 1], f"{path} line {number} is {got[number - 1]!r}, not {text!r}"
    return holds


def _cheetah():
    """gymnasium's HalfCheetah-v5 as installed: (obs_dim, act_dim, low, high, steps an episode)."""
    import gymnasium as gym
    env = gym.make("HalfCheetah-v5")
    out = (env.observation_space.shape[0], env.action_space.shape[0], env.action_space.low, env.action_space.high,
           env.spec.max_episode_steps)
    env.close()
    return out


def _task_facts():
    d, a, low, high, steps = _cheetah()
    assert (d, a, steps) == (17, 6, 1000) and set(low) == {-1.0} and set(high) == {1.0}
    from classroom.mujoco_runs import TASKS
    assert TASKS["halfcheetah"] == ("HalfCheetah-v5", 0.0, 3430.0)


def _thresholds():
    from classroom.mujoco_runs import TASKS
    from locomotion.plugin import TASKS as ALL
    assert TASKS["hopper"][2] == ALL["hopper"][2] == 3120 and TASKS["halfcheetah"][2] == ALL["halfcheetah"][2] == 3430
    assert ALL["swimmer"][2] == 325


def _workers_and_params(workers=True, params=True):
    def holds():
        from classroom.mujoco_runs import RunConfig
        from es.policies import MLPPolicy
        if workers:
            assert RunConfig().workers == 2
        if params:
            assert MLPPolicy(17, 6, ()).num_params == 17 * 6 + 6 == 108
    return holds


def _merge_example():
    ns = solution("06_locomotion", "merge_stats")
    states_a, states_b = np.array([[0., 1.], [1., 3.]]), np.array([[2., 2.]])
    a = (2, states_a.sum(0), (states_a ** 2).sum(0))
    b = (1, states_b.sum(0), (states_b ** 2).sum(0))
    assert fmt(a[1], 0) == "[1, 4]" and fmt(a[2], 0) == "[1, 10]" and fmt(b[1], 0) == "[2, 2]" and fmt(b[2], 0) == "[4, 4]"
    count, total, squares = ns["merge_stats"](a, b)
    assert count == 3 and fmt(total, 0) == "[3, 6]" and fmt(squares, 0) == "[5, 14]"
    assert type(count) is int and total.dtype == squares.dtype == np.float64


def _mean_std_example():
    ns = solution("06_locomotion", "mean_std")
    mean, std = ns["mean_std"](3, np.array([3., 6.]), np.array([5., 14.]))
    assert fmt(mean, 0) == "[1, 2]" and fmt(std ** 2, 4) == "[0.6667, 0.6667]" and fmt(std, 4) == "[0.8165, 0.8165]"


def _check_tolerances():
    import inspect
    from classroom import check
    merge = source_of(check._RAW["merge_stats"])
    assert "rel_error(got, want[key]) <= 1e-12" in merge
    assert '_dtype(out[1], np.float64' in merge and '_dtype(out[2], np.float64' in merge
    assert inspect.signature(check._close).parameters["tol"].default == 1e-6
    assert '_close(got_mean, want["mean"])' in source_of(check._RAW["mean_std"])


def _torque_cost():
    import inspect
    from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv
    assert inspect.signature(HalfCheetahEnv.__init__).parameters["ctrl_cost_weight"].default == 0.1
    assert "np.sum(np.square(action))" in source_of(HalfCheetahEnv.control_cost)


def _alive_bonus():
    import inspect
    import gymnasium as gym
    from gymnasium.envs.mujoco import ant_v5, humanoid_v5, walker2d_v5
    from classroom.mujoco_runs import TASKS
    env = gym.make("Hopper-v5")
    assert env.unwrapped._healthy_reward == 1.0 and env.spec.max_episode_steps == 1000
    env.close()
    for cls in (walker2d_v5.Walker2dEnv, ant_v5.AntEnv, humanoid_v5.HumanoidEnv):
        assert inspect.signature(cls.__init__).parameters["healthy_reward"].default > 0, cls
    assert TASKS["hopper"][1] == 1.0


def _cheetah_never_falls():
    import inspect
    from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv
    from classroom.mujoco_runs import TASKS
    names = inspect.signature(HalfCheetahEnv.__init__).parameters
    assert "healthy_reward" not in names and "terminate_when_unhealthy" not in names
    assert _cheetah()[4] == 1000 and TASKS["halfcheetah"][1] == 0.0


def _settings():
    from classroom.mujoco_runs import RunConfig
    c = RunConfig()
    assert (c.population, c.sigma, c.learning_rate, c.workers) == (64, 0.03, 0.01, 2)


def _generation_cap():
    from classroom.mujoco_runs import RUN_DEFINED, RunConfig
    assert RunConfig().max_generations == 300 and "max_generations" not in RUN_DEFINED


def _stopping():
    from classroom import check
    from classroom.mujoco_runs import HELD_OUT, MARGIN, TASKS, RunConfig
    threshold = TASKS["halfcheetah"][2]
    assert (threshold, threshold + MARGIN, MARGIN, HELD_OUT) == (3430, 3450, 20, 1_000_000)
    assert RunConfig().confirm_episodes == 20
    assert "rng.integers(2 * HELD_OUT, 2 ** 31 - 1, 20)" in source_of(check._RAW["locomotion_agent"])
    import re      # the solution's own agent: its 20 new episodes' mean fell below the threshold
    mean = float(re.search(r"scores (\d+) \+- \d+ \(standard error\) on 20 new episodes", outputs("06_locomotion"))[1])
    assert mean < threshold, mean


def _solution_run():
    from dataclasses import asdict
    from classroom.mujoco_runs import RunConfig
    assert load(f"{RUN}/config.json") == asdict(RunConfig())             # these settings, seed 0
    rows = lines(f"{RUN}/metrics.jsonl")
    with np.load(ROOT / RUN / "checkpoint.npz") as saved:
        assert bool(saved["finished"]) and int(saved["t"]) == len(rows) - 1 == 73   # Adam's steps: the updates
    assert f"{rows[-1]['steps'] / 1e6:.1f}" == "4.8"


def _grader():
    from statistics import NormalDist
    from classroom import check
    from classroom.mujoco_runs import TASKS
    src = source_of(check._RAW["locomotion_agent"])
    assert "score + 1.645 * error < threshold" in src and "rng.integers(2 * HELD_OUT, 2 ** 31 - 1, 20)" in src
    assert f"{NormalDist().inv_cdf(0.95):.3f}" == "1.645"       # one-sided, 5%
    assert TASKS["halfcheetah"][2] == 3430


def _network_size():
    from classroom.mujoco_runs import RunConfig
    from es.policies import MLPPolicy
    assert MLPPolicy(17, 6, (64, 64)).num_params == 5702 and MLPPolicy(17, 6, ()).num_params == 108
    assert RunConfig().population == 64


def _bonus_added_back():
    """A short Hopper run: its metrics' center_score, pop_mean and pop_max are gymnasium's own
    returns (its members replayed without the shift), though training ranks the shifted ones
    (play's returns, less the shift, go to the update)."""
    import tempfile
    from dataclasses import replace
    from classroom import references
    from classroom.mujoco_runs import HELD_OUT, RunConfig, StudentCode, load_metrics, mirrored_noise, play, train
    code = StudentCode(*(references.SOLUTIONS[k][0] for k in ("merge_stats", "mean_std", "linear_policy")))
    config = replace(RunConfig(task="hopper"), population=4, max_generations=1, workers=1)
    with tempfile.TemporaryDirectory() as tmp:
        train(code, tmp, config, progress=None)
        row = load_metrics(tmp)[0]
    dim = 11 * 3 + 3
    params = np.vstack([np.float32(config.sigma) * mirrored_noise(config.seed, 0, 4, dim), np.zeros((1, dim))])
    seed = np.random.default_rng([config.seed, 0, 7]).integers(HELD_OUT)
    returns, lengths, _, _ = play("Hopper-v5", code.policy, params, [seed] * 5, np.zeros(11), np.ones(11))
    assert np.allclose([row["center_score"], row["pop_mean"], row["pop_max"]],
                       [returns[4], returns[:4].mean(), returns[:4].max()], rtol=1e-9, atol=0), (row, returns)
    assert returns[:4].mean() - lengths[:4].mean() < row["pop_mean"]          # the bonus is in it
    import inspect
    src = inspect.getsource(train)
    assert "_update(center, noise, returns[:n]" in src and "seeds[a:b], mean, std, shift)" in src


def _every_member():
    """classroom.mujoco_runs.train merges the states of every member: in one generation, one merge
    per member, and the merged count is every state but the center's episode."""
    import tempfile
    from dataclasses import replace
    from classroom import references
    from classroom.mujoco_runs import RunConfig, StudentCode, load_metrics, train
    merge, mean_std, policy = (references.SOLUTIONS[k][0] for k in ("merge_stats", "mean_std", "linear_policy"))
    counts = []
    code = StudentCode(lambda a, b: counts.append(b[0]) or merge(a, b), mean_std, policy)
    config = replace(RunConfig(task="hopper"), population=4, max_generations=1, workers=1)
    with tempfile.TemporaryDirectory() as tmp:
        train(code, tmp, config, progress=None)
        steps = load_metrics(tmp)[0]["steps"]
        with np.load(f"{tmp}/checkpoint.npz") as saved:
            count = int(saved["count"])
    assert len(counts) == config.population and sum(counts) == count, (counts, count)
    assert 0 < steps - count <= 1000                   # what is left: the center's one episode


def _split():
    """The cell's split of a return, forward reward less 0.1 x the actions' sum of squares, is
    gymnasium's own: its info's reward_forward and reward_ctrl, step by step."""
    import gymnasium as gym
    policy = solution("06_locomotion", "linear_policy")["linear_policy"]
    params = (0.5 * np.random.default_rng(0).standard_normal((1, 108))).astype(np.float32)
    env = gym.make("HalfCheetah-v5")
    obs, _ = env.reset(seed=0)
    for _ in range(200):
        action = np.asarray(policy(params, np.asarray(obs, np.float64)[None], np.zeros(17), np.ones(17),
                                   env.action_space.low, env.action_space.high)[0], dtype=np.float64)
        obs, reward, _, _, info = env.step(action)
        cost = 0.1 * np.sum(np.square(action))
        assert np.isclose(-info["reward_ctrl"], cost) and np.isclose(reward + cost, info["reward_forward"])
    env.close()


def _chaotic():
    """The cell's random episodes, played by the course's float32 policy and by the solution with
    `@` in place of its einsum: other returns than the solution's printed."""
    from classroom import references
    from classroom.mujoco_runs import play
    rng = np.random.default_rng(0)
    params = (0.5 * rng.standard_normal((3, 108))).astype(np.float32)
    assert 'np.einsum("ki,kij->kj", x, weights)' in Path(ROOT, "source/06_locomotion.py").read_text()

    def with_matmul(params, obs, mean, std, low, high):
        d, a = obs.shape[1], len(low)
        x = np.clip((obs - mean) / std, -5.0, 5.0)
        z = (x[:, None, :] @ params[:, :d * a].reshape(len(obs), d, a))[:, 0, :] + params[:, d * a:]
        return low + 0.5 * (np.tanh(z) + 1.0) * (high - low)
    printed("06_locomotion", "returns -494.3, -665.8, -1560.4")
    for policy in (references.SOLUTIONS["linear_policy"][0], with_matmul):
        returns, _, _, _ = play("HalfCheetah-v5", policy, params, [0, 1, 2], np.zeros(17), np.ones(17))
        assert all(f"{r:.1f}" not in ("-494.3", "-665.8", "-1560.4") for r in returns), returns


def _line_count():
    """check.linear_policy counts the lines of the notebook's code for 8 rows and for 64 and fails
    a line per row: a for loop, and map or np.vectorize over the notebook's own function."""
    from classroom import check
    src = source_of(check._RAW["linear_policy"])
    assert "for m in (8, 64)" in src and "lines[1] - lines[0] >= 56" in src and 64 - 8 == 56

    # defined as a notebook cell's code is (the check counts no lines of files in this repository)
    cell = """
import numpy as np


def layout(params, obs, mean, std, low):
    d, a = obs.shape[1], len(low)
    x = np.clip((obs - mean) / std, -5, 5)
    return x, params[:, :d * a].reshape(len(obs), d, a), params[:, d * a:]


def scaled(z, low, high):
    return low + 0.5 * (np.tanh(z) + 1) * (high - low)


def looped(params, obs, mean, std, low, high):
    x, w, b = layout(params, obs, mean, std, low)
    return scaled(np.array([x[r] @ w[r] for r in range(len(x))]) + b, low, high)


def row(xr, wr):
    return xr @ wr


def mapped(params, obs, mean, std, low, high):
    x, w, b = layout(params, obs, mean, std, low)
    return scaled(np.array(list(map(row, x, w))) + b, low, high)


def vectorized(params, obs, mean, std, low, high):
    x, w, b = layout(params, obs, mean, std, low)
    return scaled(np.vectorize(row, signature="(i),(i,j)->(j)")(x, w) + b, low, high)
"""
    namespace = {"__name__": "__main__"}
    exec(compile(cell, "<notebook cell>", "exec"), namespace)
    looped, mapped, vectorized = namespace["looped"], namespace["mapped"], namespace["vectorized"]
    for fn in (looped, mapped, vectorized):
        try:
            check.linear_policy(fn, seed=0)
        except check.CheckFailed as exc:
            assert "loops over the rows" in str(exc), exc
        else:
            raise AssertionError(f"{fn.__name__} over the rows passed")


def _center_lags():
    """The solution's run: the center below 11 in generations 0-7 while the population's mean
    reached 312 (generation 7), behind the mean at generation 8, ahead of it from 9 on."""
    rows = lines(f"{RUN}/metrics.jsonl")
    assert max(r["center_score"] for r in rows[:8]) < 11 and f"{rows[7]['pop_mean']:.0f}" == "312"
    assert max(r["pop_mean"] for r in rows[:8]) == rows[7]["pop_mean"]
    assert rows[8]["center_score"] < rows[8]["pop_mean"]
    assert all(r["center_score"] > r["pop_mean"] for r in rows[9:])


def _floors_and_dtypes():
    """The solution's mean_std floors the variance at 1e-4 (a std of 0.01 for a constant state
    variable); classroom.mujoco_runs sums the states in float64 and starts from float64 zeros."""
    import inspect
    from classroom import mujoco_runs
    mean_std = solution("06_locomotion", "mean_std")["mean_std"]
    _, std = mean_std(4, np.array([8.0]), np.array([16.0]))
    assert np.isclose(std[0], 0.01)
    assert "stats = (0, np.zeros(obs_dim), np.zeros(obs_dim))" in inspect.getsource(mujoco_runs.train)
    play = inspect.getsource(mujoco_runs.play)
    assert "np.asarray(e.reset(seed=int(s))[0], dtype=np.float64)" in play and "sums, squares = np.zeros_like(obs)" in play


def _members_sent():
    """classroom.mujoco_runs.train hands each worker's chunk its members' rows of params, the center
    plus sigma times the noise."""
    import inspect
    from classroom import mujoco_runs
    src = inspect.getsource(mujoco_runs.train)
    assert "center[None, :] + np.float32(config.sigma) * noise" in src
    assert "delayed(_play_chunk)(env_id, code.policy, params[a:b]" in src


def _both(*fns):
    def holds():
        for fn in fns:
            fn()
    return holds


PAPER = "Salimans et al. 2017, arXiv:1703.03864v2, read in its text: section 4.1 (MuJoCo; 'multilayer perceptrons " \
        "with two 64-unit hidden layers separated by tanh nonlinearities'), 4.2 (Atari), 2.1 ('up to 1,440 parallel " \
        "workers'; Algorithm 2: workers send scalar returns to every other worker and reconstruct the perturbations " \
        "from known random seeds)"

def _hopper_settings():
    import es
    from classroom.mujoco_runs import RunConfig
    hopper = es.config_for("hopper")
    config = RunConfig(task="hopper", population=16, sigma=0.025, learning_rate=0.02, max_generations=1000)
    assert (config.population, config.sigma, config.learning_rate) == (hopper.population, hopper.sigma,
                                                                       hopper.learning_rate)
    assert hopper.optimizer == "adam" and hopper.hidden == [] and "normalize" not in hopper.extra
    assert hopper.center_episodes == 5 and hopper.restart_steps == 3_000_000 and hopper.stall_steps is None


CLAIMS: list[Claim] = [
    Claim("The paper (Salimans et al. 2017) tests ES on simulated robots in MuJoCo (its section 4.1) and on Atari. "
          "Mania, Guy and Recht (2018, arXiv:1803.07055) showed that a **linear** policy learns the robots' tasks with "
          "**augmented random search** (ARS), whose version V2 normalizes the observations (their code, "
          f"[`4c8e24e:code/ars.py`]({A}) line 362). Their Table 1 sets each task's return to reach (Hopper 3,120, "
          "HalfCheetah 3,430).",
          _both(_cites("The paper (Salimans et al. 2017) tests ES on simulated robots in MuJoCo (its section 4.1) "
                       "and on Atari. Mania, Guy and Recht (2018, arXiv:1803.07055)", "section 4.1",
                       "arXiv:1803.07055"),
                _cites(f"(their code, [`4c8e24e:code/ars.py`]({A}) line 362). Their Table 1",
                       f"[`4c8e24e:code/ars.py`]({A})", "line 362", "Table 1",
                       repo=ARS, commit="4c8e24e", path="code/ars.py",
                       lines={362: "'MeanStdFilter' for v2, 'NoFilter' for v1"}),
                _thresholds),
          PAPER + "; Mania, Guy, Recht 2018, arXiv:1803.07055, Table 1 (episodes to reach the thresholds "
          "Hopper-v1 3120, HalfCheetah-v1 3430), the thresholds the course's tasks use "
          "(classroom/mujoco_runs.py TASKS, locomotion/plugin.py TASKS); modestyachts/ARS at 4c8e24e, code/ars.py "
          "line 362 (MeanStdFilter for V2), read in git show"),
    Claim("`HalfCheetah-v5` (a 2D cheetah: 17 observations, 6 joint torques in `[-1, 1]`, 1,000 steps an episode, "
          "reward = forward speed less a small cost on the torques) to run past 3,430",
          _task_facts, "gymnasium's HalfCheetah-v5 as installed (spaces, max_episode_steps); TASKS's threshold"),
    Claim("plays every member of a generation in 2 worker processes", _workers_and_params(params=False),
          "RunConfig().workers"),
    Claim(f"OpenAI's starter code (linked in notebook 00) feeds its MuJoCo policies `clip((obs - mean) / std, -5, 5)` "
          f"([`951f199:es_distributed/policies.py` line 145]({S}/policies.py#L145))",
          _cites(f"([`951f199:es_distributed/policies.py` line 145]({S}/policies.py#L145))",
                 "`951f199:es_distributed/policies.py` line 145", "policies.py#L145", repo=STARTER, commit="951f199", path="es_distributed/policies.py",
                 lines={145: "tf.clip_by_value((o - ob_mean) / ob_std, -5.0, 5.0)"}),
          "openai/evolution-strategies-starter at 951f199, es_distributed/policies.py line 145 (read in git show)"),
    Claim("Workers do not send the states back (1,000 a member): each member reports its states' **count**, "
          "**sum** and **sum of squares** (vectors of 17 floats)",
          _task_facts, "gymnasium's HalfCheetah-v5 as installed: 1,000 steps an episode, 17 observations"),
    Claim("* **Example:** `a = (2, np.array([1., 4.]), np.array([1., 10.]))` (states `[0, 1]`, `[1, 3]`), "
          "`b = (1, np.array([2., 2.]), np.array([4., 4.]))` (state `[2, 2]`): "
          "`(3, np.array([3., 6.]), np.array([5., 14.]))`.",
          _merge_example, "the sums of the listed states, and the solution's merge_stats on them"),
    Claim("the sums float64 and within a relative error of 1e-12", _check_tolerances,
          "check.merge_stats's source (its _dtype lines and tolerance)"),
    Claim("* **Example:** `(3, np.array([3., 6.]), np.array([5., 14.]))`: `mean = [1, 2]`, `var = [5/3 - 1, "
          "14/3 - 4] = [0.6667, 0.6667]`, `std = [0.8165, 0.8165]`.", _mean_std_example, "the solution's mean_std"),
    Claim("**The check:** relative error at most 1e-6", _check_tolerances, "check._close's default tolerance, "
          "which check.mean_std uses"),
    Claim("`obs_dim * act_dim + act_dim` numbers (108 for HalfCheetah)", _workers_and_params(workers=False),
          "es.policies.MLPPolicy(17, 6, ()).num_params"),
    Claim("The cell splits each return: the forward reward less the torque cost (0.1 times the actions' sum of "
          "squares, every step).", _both(_torque_cost, _split),
          "gymnasium's HalfCheetahEnv as installed: ctrl_cost_weight 0.1, control_cost; its info's reward_forward "
          "and reward_ctrl against the cell's split, on an episode's first 200 steps"),
    Claim("(the solution's, which sums with `np.einsum`; these episodes are chaotic: sums in another order, such as "
          "`@`'s, or a float32 policy get others)", _chaotic,
          "the cell's random episodes replayed with the course's float32 policy (classroom.references)", slow=True),
    Claim("then it counts the lines of your own code that run for 8 rows and for 64: a line run once per row (a "
          "`for` loop, a comprehension, `map` or `np.vectorize` over your own function) fails;", _line_count, "check.linear_policy's source, and the check run on a for loop, map and np.vectorize"),
    Claim("Hopper (and Walker2d, Ant, Humanoid) pays a bonus for every step the robot has not fallen: 1 a step in "
          "`Hopper-v5`, up to 1,000 an episode.", _alive_bonus,
          "gymnasium's Hopper-v5 (healthy_reward, max_episode_steps), Walker2d, Ant, Humanoid v5 (healthy_reward)"),
    Claim(f"a `shift` of 1 a step for Hopper (their code, [`4c8e24e:code/ars.py`]({A}) lines 77 and 399)",
          _cites(f"(their code, [`4c8e24e:code/ars.py`]({A}) lines 77 and 399)", f"[`4c8e24e:code/ars.py`]({A})",
                 "lines 77 and 399", repo=ARS, commit="4c8e24e", path="code/ars.py",
                 lines={77: "total_reward += (reward - shift)", 399: "Hopper-v1, Walker2d-v1, and Ant-v1 use shift = 1"}),
          "modestyachts/ARS at 4c8e24e0a99cf811030e90680fc29eb94fae8cdd, code/ars.py lines 77 and 399 (read in git show)"),
    Claim("and so does the loop; every score it reports or compares with the threshold adds the bonus back: "
          "gymnasium's own return.", _bonus_added_back,
          "classroom.mujoco_runs.train: one Hopper generation, its members replayed without the shift; train's "
          "update ranks the shifted returns", slow=True),
    Claim("HalfCheetah cannot fall (its episodes all last 1,000 steps): no bonus, shift 0.",
          _cheetah_never_falls, "gymnasium's HalfCheetahEnv (no healthy_reward, no termination), TASKS's shift"),
    Claim("The settings (`RunConfig`): 64 members (32 mirrored pairs), `sigma = 0.03`, Adam with step 0.01, one "
          "episode per member (every member and the center on the same seed in a generation), 2 worker processes,",
          _settings, "RunConfig's defaults"),
    Claim("at most `max_generations=300` generations (if a run ends there without passing, add "
          "`max_generations=600` to the `RunConfig(...)` call and re-run the cell: the run goes on)", _generation_cap,
          "RunConfig().max_generations; mujoco_runs.RUN_DEFINED (the budget may change on a resumed run)"),
    Claim("Training stops when the center's episode reaches 3,430 and the center then averages at least 3,450 on 20 "
          "held-out episodes (seeds from 1,000,000). The grader plays 20 other episodes, whose mean can fall below "
          "3,430", _stopping,
          "classroom.mujoco_runs TASKS, MARGIN, HELD_OUT, RunConfig().confirm_episodes; check.locomotion_agent"),
    Claim("The solution's run (these settings, seed 0) stopped after 73 updates and 4.8 million steps", _solution_run, f"{RUN}/config.json, metrics.jsonl (last line), checkpoint.npz (Adam's t)"),
    Claim("in the solution's run it stayed below 11 up to generation 7, while the mean reached 312, and led from "
          "generation 9 on.", _center_lags, f"{RUN}/metrics.jsonl"),
    Claim("on 20 episodes, on seeds it chooses; it passes unless their mean is significantly below 3,430: mean + "
          "1.645 standard errors must reach it (a one-sided test at 5%).", _grader,
          "check.locomotion_agent's source; the normal distribution's 95% quantile"),
    Claim(f"([`951f199:es_distributed/es.py` lines 379-381]({S}/es.py#L379-L381)), the master adds them up (line "
          "216) and sends the parameters with the statistics in every task (lines 16 and 173-176).",
          _cites(f"([`951f199:es_distributed/es.py` lines 379-381]({S}/es.py#L379-L381)), the master adds them up "
                 "(line 216) and sends the parameters with the statistics in every task (lines 16 and 173-176).",
                 "`951f199:es_distributed/es.py` lines 379-381", "es.py#L379-L381", "(line 216)",
                 "(lines 16 and 173-176)", repo=STARTER, commit="951f199", path="es_distributed/es.py",
                 lines={379: "ob_sum=", 380: "ob_sumsq=", 381: "ob_count=", 216: "ob_stat.increment(result.ob_sum",
                        16: "Task = namedtuple('Task', ['params', 'ob_mean', 'ob_std', 'timestep_limit'])",
                        173: "curr_task_id = master.declare_task(Task(", 174: "params=theta",
                        175: "ob_mean=ob_stat.mean", 176: "ob_std=ob_stat.std"}),
          "openai/evolution-strategies-starter at 951f199, es_distributed/es.py lines 16, 173-176 (the master "
          "declares each task with theta and ob_stat's mean and std), 216, 379-381"),
    Claim(f"Differences include: the starter records the states of a random 1% of its rollouts (line 304; "
          f"`calc_obstat_prob` 0.01 in [`951f199:configurations/humanoid.json` line 3]({S[:-len('/es_distributed')]}"
          "/configurations/humanoid.json#L3)), this loop every member's; it floors the variance at 1e-2, a std of at "
          "least 0.1 (line 42), where `mean_std` floors it at 1e-4; and it adds the sums up in float32 (lines "
          "27-28), this loop in float64.",
          _both(_cites("Differences include: the starter records the states of a random 1% of its rollouts (line 304; ",
                       "(line 304", repo=STARTER, commit="951f199", path="es_distributed/es.py",
                       lines={304: "calc_obstat_prob != 0 and rs.rand() < calc_obstat_prob",
                              307: "task_ob_stat.increment(obs.sum(axis=0), np.square(obs).sum(axis=0), len(obs))"}),
                _cites("`calc_obstat_prob` 0.01 in [`951f199:configurations/humanoid.json` line 3]",
                       "`951f199:configurations/humanoid.json` line 3", repo=STARTER, commit="951f199",
                       path="configurations/humanoid.json", lines={3: '"calc_obstat_prob": 0.01'}),
                _cites("it floors the variance at 1e-2, a std of at least 0.1 (line 42), where `mean_std` floors it at "
                       "1e-4; and it adds the sums up in float32 (lines 27-28), this loop in float64.",
                       "(line 42)", "(lines 27-28)", repo=STARTER, commit="951f199", path="es_distributed/es.py",
                       lines={42: "np.sqrt(np.maximum(self.sumsq / self.count - np.square(self.mean), 1e-2))",
                              27: "self.sum = np.zeros(shape, dtype=np.float32)",
                              28: "self.sumsq = np.full(shape, eps, dtype=np.float32)"}),
                _every_member, _floors_and_dtypes),
          "openai/evolution-strategies-starter at 951f199, read in git show: es_distributed/es.py line 304 "
          "(rollout_and_update_ob_stat records a rollout's states only when rs.rand() < calc_obstat_prob), line 42 "
          "(RunningStat.std: the variance floored at 1e-2), lines 27-28 (RunningStat's sum and sumsq float32), "
          "configurations/humanoid.json line 3 (calc_obstat_prob 0.01); classroom.mujoco_runs.train merges every "
          "member's (a run with the solution's functions: the merged count is the members' steps) in float64; the "
          "solution's mean_std floors the variance at 1e-4"),
    Claim("The paper's MuJoCo policies are multilayer perceptrons with two hidden layers of 64 `tanh` units (its "
          "section 4.1): 5,702 parameters for HalfCheetah (`es.policies.MLPPolicy(17, 6, (64, 64)).num_params`), "
          "against your 108; with 64 members, ES's gradient estimate in 5,702 dimensions is far coarser than in 108. "
          "The paper ran up to 1,440 parallel workers (its section 2.1); in its Algorithm 2, workers exchange only "
          "scalar returns and rebuild each other's perturbations from known seeds (notebook 03). This loop has a "
          "master that sends its 2 worker processes each member's parameters, noise included; the starter's master "
          "sends the center, and its workers draw the noise (lines 355-358).",
          _both(_cites("The paper's MuJoCo policies are multilayer perceptrons with two hidden layers of 64 `tanh` "
                       "units (its section 4.1)", "(its section 4.1)"),
                _cites("The paper ran up to 1,440 parallel workers (its section 2.1); in its Algorithm 2, workers "
                       "exchange only scalar returns", "(its section 2.1)", "Algorithm 2"),
                _cites("the starter's master sends the center, and its workers draw the noise (lines 355-358).",
                       "(lines 355-358)", repo=STARTER, commit="951f199", path="es_distributed/es.py",
                       lines={174: "params=theta", 355: "noise_idx = noise.sample_index(rs, policy.num_params)",
                              356: "v = config.noise_stdev * noise.get(noise_idx, policy.num_params)",
                              358: "policy.set_trainable_flat(task_data.params + v)"}),
                _network_size, _workers_and_params(params=False), _members_sent),
          PAPER + "; es.policies.MLPPolicy's num_params; RunConfig().population and workers; "
          "classroom.mujoco_runs.train's source (each worker's chunk gets its members' parameters); "
          "openai/evolution-strategies-starter at 951f199, es_distributed/es.py line 174 (the task's params are "
          "theta) and lines 355-358 (the worker draws a noise index and plays task_data.params + v)"),
    Claim('train with `config = RunConfig(task="hopper", population=16, sigma=0.025, learning_rate=0.02, '
          'max_generations=1000)` into a folder of its own (`train(code, "hopper-run", config)`, leaving `RUN_DIR` as '
          'it is): the Hopper settings of the course\'s reference package (in the '
          'course repository, not in this release), where the center also plays 5 episodes a generation and a run '
          'starts again after 3M env steps without the goal', _hopper_settings,
          "es.config_for('hopper') (locomotion/plugin.py TUNED) and classroom.mujoco_runs.RunConfig's fields"),
]
