"""Sources of the numbers on page paper (docs/paper.md).

Two kinds: figures of the course, recomputed from the committed data or code the page names;
and facts about the paper and OpenAI's starter, which no code here can read at test time, so
the page carries their citation (the paper's section, the starter's file and line at commit
951f199) and the claim checks that the citation is in its text. Where the environment variable
``ES_STARTER_GIT`` names a git directory of openai/evolution-strategies-starter, the claims
also read the cited lines there (``ES_STARTER_GIT=... python tests/classroom/course_numbers.py paper``
then holds them)."""
import os
import subprocess
from functools import lru_cache

import numpy as np

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)
from course_sources import ROOT, lines, load

PAPER = ("the paper, arXiv:1703.03864v2, read in a public transcription of its full text (sections 2, 2.1, 2.2, "
         "4.1-4.4, Figures 1-2, Table 2)")
STARTER = "openai/evolution-strategies-starter at 951f199, each cited line read with git show 951f199:PATH"


def cited(snippet: str, *citations: str):
    """A claim about another project: its text carries each citation."""
    def holds():
        for citation in citations:
            assert citation in snippet, f"the citation {citation!r} is not in the text"
    return holds


@lru_cache(maxsize=None)
def _starter_file(path: str) -> list:
    out = subprocess.run(["git", "-C", os.environ["ES_STARTER_GIT"], "show", f"951f199:{path}"],
                         capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def starter(snippet: str, citations: tuple, at: tuple):
    """A claim about the starter: the citations are in the text, and, where ``ES_STARTER_GIT`` is
    set, each ``(path, line, text)`` of ``at`` is on that line of the starter."""
    def holds():
        cited(snippet, *citations)()
        if os.environ.get("ES_STARTER_GIT"):
            for path, line, text in at:
                assert text in _starter_file(path)[line - 1], (path, line, text)
    return holds


ES = "es_distributed/es.py"

# ---------------------------------------------------------------- the paper
S_ESTIMATOR = ("without backpropagation (section 2, Algorithm 1). The starter divides by the number of returns only "
               "(`g /= returns_n2.size`, `es_distributed/es.py` line 247)")
S_CAP = "at twice the mean episode length, CPU use stays above 50% in the worst case (section 2.1)"
S_FRAMESKIP = "ES learns Pong about equally fast with a frame-skip of 1, 2, 3 or 4 (section 4.4, Figure 2)"
S_MUJOCO = ("two hidden layers of 64 tanh units (section 4.1); the 3D humanoid solved in 10 minutes on 1,440 CPU "
            "cores (section 4.3)")
S_ATARI = ("51 games from pixels with A3C's feedforward network, 1 billion frames each, about one hour per game on "
           "720 CPUs (section 4.2); Pong: 21.0 (Table 2)")
S_SCALING = ("the 3D humanoid in a median 657 minutes on 18 cores and 10 on 1,440 (section 4.3, Figure 1); the update "
             "takes a small fraction of the time even with 1,440 workers (section 2.1)")

# ---------------------------------------------------------------- the starter
S_MIRRORED = "the starter plays `params + v`, then `params - v` (`es_distributed/es.py` lines 358 and 362)"
S_RANKS = ("`compute_centered_ranks` scales the ranks to $[-0.5, 0.5]$ (`es_distributed/es.py` lines 80-84; its "
           "`compute_ranks`, lines 69-77, gives tied returns distinct ranks)")
S_DECAY = ("the starter steps on `-g + config.l2coeff * theta` (`es_distributed/es.py` line 249), with `l2coeff` "
           "0.005 and Adam's step 0.01 in `configurations/humanoid.json` (lines 6 and 17)")
S_INDICES = "(`noise_inds_n`, `es_distributed/es.py` line 373)"
S_TABLE = ("the starter's is 250,000,000 float32 (1 GB) from `RandomState(123)` (`es_distributed/es.py` lines 50-60), "
           "each worker drawing its offsets from an unseeded `RandomState()` (lines 319 and 355)")
S_ADAPTIVE = "(`episode_cutoff_mode` `adaptive:...`, `es_distributed/es.py` lines 149-161 and 256-259)"
S_OBSTAT = ("(`es_distributed/es.py` line 216), clipped to $[-5, 5]$ (`es_distributed/policies.py` line 145)")


def _table_bytes():
    cited(S_TABLE, "lines 50-60", "lines 319 and 355")()
    assert 250_000_000 * np.dtype(np.float32).itemsize == 10 ** 9          # 1 GB
    check = starter(S_TABLE, (), ((ES, 53, "seed = 123"), (ES, 54, "count = 250000000"),
                                  (ES, 59, "np.random.RandomState(seed).randn(count)"),
                                  (ES, 319, "rs = np.random.RandomState()"), (ES, 355, "noise.sample_index(rs")))
    check()


# ---------------------------------------------------------------- the course's figures
def _settings():
    from pong.student import StudentConfig
    config = StudentConfig(seed=0)
    assert (config.weight_decay, config.learning_rate) == (0.005, 0.01)


def _traffic():
    from es.distributed.protocol import encode_result
    ids = ("00" * 8, "00" * 8, "00" * 8)
    size = [len(encode_result(b"w" * 8, *ids, 0, 0, np.zeros(n), np.zeros(n, int))) for n in (1, 2, 3)]
    assert size[2] - size[1] == size[1] - size[0] == 12 and size[0] - 12 == 50, size


def _package_table():
    from es.noise_table import TABLE_SIZE
    assert TABLE_SIZE == 2 ** 25 and TABLE_SIZE * 4 == 128 * 2 ** 20


def _reference_batch():
    with np.load(ROOT / "pong" / "reference.npz") as batch:
        assert batch["obs"].shape[0] == 64, batch["obs"].shape


def _vbn():
    runs = {"13": "pong-windows6-s0", "14": "pong-windows6-vbn-s0"}
    readme = (ROOT / "pong" / "README.md").read_text()
    configs = []
    for attempt, run in runs.items():
        assert f"| {attempt} | `docs/runs/{run}`" in readme, (attempt, run)
        config = load(f"docs/runs/{run}/config.json")
        configs.append(config)
    extra = [c.pop("extra") for c in configs]
    assert configs[0] == configs[1] and extra[0].pop("head_inputs", None) is None
    assert extra[1].pop("head_inputs") == "vbn" and extra[0] == extra[1]         # one choice apart, the same seed
    spread, mean = [], []
    for run in runs.values():
        rows = {r["generation"]: r for r in lines(f"docs/runs/{run}/metrics.jsonl")}
        spread.append(f"{np.mean([rows[g]['pop_std'] for g in range(40, 60)]):.2f}")
        mean.append(f"{np.mean([rows[g]['pop_mean'] for g in range(60, 90)]):.2f}")
    assert spread == ["0.58", "3.79"] and mean == ["-20.17", "-16.15"], (spread, mean)


def _game_cap():
    from pong.student import StudentConfig
    assert StudentConfig(seed=0).game_cap == 5000


def _frameskip():
    import ale_py
    import gymnasium as gym
    gym.register_envs(ale_py)
    assert gym.spec("ALE/Pong-v5").kwargs["frameskip"] == 4


def _locomotion():
    from course_sources.p_readme import SWIMMER, _locomotion as benchmark_row
    benchmark_row("hopper", 5, "12.0", "20.5", ("3,139.4", "3,200.2"), 3)()
    benchmark_row("halfcheetah", 5, "4.2", "16.7", ("3,432.1", "3,633.0"), 1)()
    benchmark_row("swimmer", 5, "3.8", "7.6", ("325.6", "331.1"), 1, SWIMMER)()
    import es
    assert es.config_for("swimmer").stall_steps and not es.config_for("hopper").stall_steps

def _notebook_06():
    """Notebook 06's stop rule (classroom.mujoco_runs.train: one center episode at the threshold, then
    the mean of RunConfig().confirm_episodes held-out episodes at the threshold + MARGIN) and its
    solution's run."""
    from classroom.mujoco_runs import MARGIN, RunConfig, train
    assert RunConfig().confirm_episodes == 20 and MARGIN == 20
    src = source_of(train)
    assert "if score >= threshold:" in src and "finished = confirmed >= threshold + MARGIN" in src
    rows = lines("solutions/cheetah-run/metrics.jsonl")
    assert load("solutions/cheetah-run/config.json")["task"] == "halfcheetah" and len(rows) - 1 == 73
    assert rows[-1]["confirmed"] >= 3430 + 20 and all("confirmed" not in r or r["confirmed"] < 3450 for r in rows[:-1])


def _course_agent():
    run = load("solutions/pong-run/beats_random.json")
    assert run["seeds"] == list(range(20))
    assert f"{run['agent_mean']:.1f}" == "-17.5" and f"{run['random_mean']:.2f}" == "-20.25"


def _shipped():
    e = load("pong/agent.json")["eval"]
    assert e["episodes"] == 20 and f"+{e['agent_mean']:.1f}" == "+9.6"
    assert [f"{v:.1f}" for v in e["agent_ci95"]] == ["7.2", "12.0"]


def _pixels():
    agent = load("pong/agent-pixels.json")
    e = agent["eval"]
    assert e["episodes"] == 20 and f"+{e['agent_mean']:.1f}" == "+6.4"
    assert [f"{v:.1f}" for v in e["agent_ci95"]] == ["3.7", "9.1"]
    assert f"{agent['wall_seconds'] / 3600:.2f}" == "2.57" and agent["machine"].startswith("2 cores")
    assert agent["started_from"] == [] and agent["config"].get("init") is None          # from scratch


CLAIMS: list[Claim] = [
    Claim(S_ESTIMATOR, starter(S_ESTIMATOR, ("section 2, Algorithm 1", "line 247"),
                               ((ES, 247, "g /= returns_n2.size"),)), f"{PAPER}; {STARTER}"),
    Claim(S_MIRRORED, starter(S_MIRRORED, ("lines 358 and 362",),
                              ((ES, 358, "task_data.params + v"), (ES, 362, "task_data.params - v"))), STARTER),
    Claim(S_RANKS, starter(S_RANKS, ("lines 80-84", "lines 69-77"),
                           ((ES, 69, "def compute_ranks(x)"), (ES, 76, "ranks[x.argsort()] = np.arange(len(x))"),
                            (ES, 80, "def compute_centered_ranks(x)"), (ES, 83, "y -= .5"))), STARTER),
    Claim(S_DECAY, starter(S_DECAY, ("line 249", "`configurations/humanoid.json` (lines 6 and 17)"),
                           ((ES, 249, "optimizer.update(-g + config.l2coeff * theta)"),
                            ("configurations/humanoid.json", 6, '"l2coeff": 0.005'),
                            ("configurations/humanoid.json", 17, '"stepsize": 0.01'))), STARTER),
    Claim("the settings: weight decay 0.005 and Adam 0.01 (`pong.student.StudentConfig`)", _settings,
          "pong.student.StudentConfig's weight_decay and learning_rate"),
    Claim(S_INDICES, starter(S_INDICES, ("line 373",), ((ES, 373, "noise_inds_n=np.array(noise_inds)"),)), STARTER),
    Claim("a result is 12 bytes per member plus 50 per chunk, for a task without observation normalization such as "
          "CartPole (`es/distributed/protocol.py`)", _traffic,
          "es.distributed.protocol.encode_result: the payload's size for 1, 2 and 3 members"),
    Claim(S_TABLE, _table_bytes, f"{STARTER}; 250,000,000 x 4 bytes"),
    Claim("the package's table holds $2^{25}$ float32 (128 MiB)", _package_table, "es.noise_table.TABLE_SIZE"),
    Claim("`pong/reference.npz`, 64 observations", _reference_batch, "pong/reference.npz's obs array"),
    Claim("the same design and seed without it (attempt 13) and with it (attempt 14); the members' scores within a "
          "generation spread 0.58 and 3.79 (their standard deviation, averaged over generations 40-59), and the "
          "population's mean was -20.17 and -16.15 over generations 60-89", _vbn,
          "docs/runs/pong-windows6-s0 and pong-windows6-vbn-s0: config.json (one choice apart) and metrics.jsonl "
          "(pop_std, pop_mean); the attempt numbers from pong/README.md's table"),
    Claim(S_CAP, cited(S_CAP, "section 2.1"), PAPER),
    Claim(S_ADAPTIVE, starter(S_ADAPTIVE, ("lines 149-161 and 256-259",),
                              ((ES, 149, "startswith('adaptive:')"), (ES, 161, "raise NotImplementedError"),
                               (ES, 256, "if adaptive_tslimit and"), (ES, 259, "Increased timestep limit"))), STARTER),
    Claim("at 5,000 agent steps (`pong.student.StudentConfig.game_cap`)", _game_cap, "pong.student.StudentConfig"),
    Claim(S_FRAMESKIP, cited(S_FRAMESKIP, "section 4.4, Figure 2"), PAPER),
    Claim("`ALE/Pong-v5`'s own frame-skip of 4", _frameskip, "the installed ale_py's registration of ALE/Pong-v5"),
    Claim(S_MUJOCO, cited(S_MUJOCO, "section 4.1", "section 4.3"), PAPER),
    Claim(S_OBSTAT, starter(S_OBSTAT, ("line 216", "line 145"),
                            ((ES, 216, "ob_stat.increment(result.ob_sum, result.ob_sumsq, result.ob_count)"),
                             ("es_distributed/policies.py", 145, "tf.clip_by_value((o - ob_mean) / ob_std, -5.0, 5.0)"))),
          STARTER),
    Claim("notebook 06 stops a run when one episode of its center reaches the threshold and its mean over 20 "
          "held-out episodes then reaches the threshold plus 20 (the solution's HalfCheetah run: 73 updates)",
          _notebook_06, "classroom.mujoco_runs (train's stop rule, MARGIN, RunConfig.confirm_episodes); "
          "solutions/cheetah-run (config.json, metrics.jsonl)"),
    Claim("with a linear policy on 2 cores, a run stops when the center's mean over its 5 training episodes and then "
          "its mean over 20 held-out episodes pass the threshold, and starts again from zeros after its task's budget "
          "of steps (Swimmer also after a stall); HalfCheetah passed 3,430, Hopper 3,120 and Swimmer 325 so on 5 of 5 "
          "seeds each, within 30 minutes", _locomotion,
          "docs/runs/issue52-mujoco/lines-2workers.jsonl and lines-swimmer-raw-2workers.jsonl (benchmarks/mujoco.py: "
          "es.config_for's defaults, a linear policy, confirm_goal, restart_steps, stall_steps)"),
    Claim(S_ATARI, cited(S_ATARI, "section 4.2", "Table 2"), PAPER),
    Claim("notebook 04's own agent scores -17.5 a game against the random player's -20.25 on seeds 0..19", _course_agent,
          "solutions/pong-run/beats_random.json"),
    Claim("+9.6 on 20 held-out games (95% CI [7.2, 12.0]; `pong/agent.json`)", _shipped, "pong/agent.json's eval"),
    Claim("**+6.4 on 20 held-out games (95% CI [3.7, 9.1])** after 2.57 hours on 2 cores, from scratch", _pixels,
          "pong/agent-pixels.json: eval, wall_seconds, machine, started_from"),
    Claim(S_SCALING, cited(S_SCALING, "section 4.3, Figure 1", "section 2.1"), PAPER),
]
