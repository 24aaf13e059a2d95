"""Sources of the numbers on page 05_extras."""
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)
from course_sources import ROOT, mirrored_lines

PIXEL_RUN = "docs/runs/pong-windows6-motion-vbn-s16"     # the shipped pixel agent's run (pong/agent-pixels.json)


def _snes_example():
    """Section 1's worked example, computed with the solution's snes_step."""
    ns = solution("05_extras", "snes_step")
    mu, sigma = ns["snes_step"](np.zeros(2), np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.0, 2.0]]),
                                np.array([0.5, -0.5]), 1.0, 0.2)
    assert fmt(mu, 4) == "[0.5, -2]" and fmt(sigma, 4) == "[1.0513, 1.6375]", (mu, sigma)


def _utilities():
    """The shaping as the text describes it, for the notebook's population and others."""
    u_of = solution("05_extras", "snes_step", "utilities")["utilities"]   # its cell runs section 2
    for n in (4, 10, 40):
        u = u_of(n)
        assert np.isclose((u + 1 / n).sum(), 1) and abs(u.sum()) < 1e-12
        assert np.all(np.diff(u) <= 0) and np.allclose(u[n // 2:], -1 / n)      # the worse half: -1/n


def _sigma_step():
    ns = solution("05_extras", "snes_step", "snes_sigma", "dim")
    assert ns["dim"] == 10 and f"{ns['snes_sigma']:.2f}" == "0.34" and f"{ns['snes_sigma'] / 2:.2f}" == "0.17"


def _vbn_example():
    """Section 3's worked example, computed with the solution's virtual_batch_norm."""
    vbn = solution("05_extras", "virtual_batch_norm")["virtual_batch_norm"]
    reference, inputs = np.array([[0, 1], [2, 1], [4, 1]], float), np.array([[3, 1.05], [40, 0]])
    assert reference.mean(axis=0).tolist() == [2, 1] and reference.std(axis=0)[1] == 0
    assert f"{reference.std(axis=0)[0]:.3f}" == "1.633" and np.isclose(reference.std(axis=0)[0] ** 2, 8 / 3)
    assert fmt(vbn(reference, inputs), 4) == "[0.6124, 0.5, 5, -5]"
    assert f"{(40 - 2) / reference.std(axis=0)[0]:.1f}" == "23.3" and (0 - 1) / 0.1 == -10


def _vbn_is_the_pixel_agents():
    """The contract is the pixel agent's own normalization: pong.keypoints' floor and clip, and
    the solution's function on a member's head inputs over the reference batch gives what
    PongKeypointsPolicy(..., vbn=True) computes."""
    from pong.keypoints import PULL_SCALE, VBN_CLIP, VBN_FLOOR, PongKeypointsPolicy, reference_batch
    assert (VBN_FLOOR, VBN_CLIP) == (0.1, 5.0)
    vbn = solution("05_extras", "virtual_batch_norm")["virtual_batch_norm"]
    options = dict(motion=True, pull_scale=PULL_SCALE, conv="taps", pull="windows")
    raw, own = PongKeypointsPolicy(6, (8,), **options), PongKeypointsPolicy(6, (8,), vbn=True, **options)
    obs = reference_batch()
    params = raw.initial_params(0) + 0.1 * np.random.default_rng(1).standard_normal(raw.num_params)
    front = raw.unflatten(np.repeat(params[None].astype(np.float32), len(obs), axis=0))[0][0]
    from pong.keypoints import _quadratic, keypoint_features
    q = _quadratic(keypoint_features(*raw.keypoints_of(front, obs)))       # the head's raw inputs, float64
    assert np.allclose(vbn(q, q[:10]), own.normalize(front[:10], q[:10]), rtol=1e-6, atol=1e-6)
    assert raw.num_features == q.shape[1]


def _vbn_check_names():
    """What the contract says the check names, its message for each; float64 returned on float64
    inputs, and a float32 computation named (as the check's own run on one shows)."""
    from classroom import check
    src = source_of(check._RAW["virtual_batch_norm"])
    for key in ("no_floor", "sample", "no_clip", "input_stats", "floor_variance"):
        assert f'("{key}"' in src, key
    assert '_call_leaving(fn, ("reference", "inputs")' in src and "_close(got, want[\"right\"])" in src
    assert '_dtype(out, np.float64' in src and "_close(got, want[\"right\"])" in src

    def in_float32(reference, inputs):
        reference, inputs = reference.astype(np.float32), inputs.astype(np.float32)
        out = np.clip((inputs - reference.mean(axis=0)) / np.maximum(reference.std(axis=0), 0.1), -5, 5)
        return out.astype(np.float64)
    for seed in range(5):
        try:
            check.virtual_batch_norm(in_float32, seed=seed)
        except check.CheckFailed as exc:
            assert "float32" in str(exc), exc
        else:
            raise AssertionError(f"a float32 computation passed on seed {seed}")


def _head_inputs():
    """What the pixel agent's head reads: 5 numbers per keypoint (pong.keypoints.keypoint_features:
    newest column and row, their slopes over the 4 frames, the newest presence), 30 for six
    keypoints, and their pairwise products and squares (_quadratic): 465 more, 495 in all."""
    import inspect
    from pong.keypoints import (FEATURES_PER_KEYPOINT, FRAMES, PULL_SCALE, PongKeypointsPolicy, _quadratic,
                                keypoint_features)
    assert FEATURES_PER_KEYPOINT == 5 and FRAMES == 4
    col, row, presence = (np.random.default_rng(i).random((3, 6, 4)) for i in range(3))
    f = keypoint_features(col, row, presence)
    assert f.shape == (3, 30) and _quadratic(f).shape == (3, 30 + 465) and 30 * 31 // 2 == 465
    src = inspect.getsource(keypoint_features)
    assert "col[..., 3]" in src and "row[..., 3]" in src and "(col * _STEPS)" in src and "(row * _STEPS)" in src
    assert "presence[..., 3]" in src
    policy = PongKeypointsPolicy(6, (8,), motion=True, pull_scale=PULL_SCALE, conv="taps", pull="windows")
    assert policy.num_features == 495


def _pixel_run_settings():
    """The cell's SEED, SIGMA and MEMBERS are the shipped pixel agent's run's (pong/agent-pixels.json)."""
    import re
    code = "\n".join(src for kind, src, _ in cells("05_extras") if kind == "code")
    seed, sigma, members = re.search(r"^SEED, SIGMA, MEMBERS = (\d+), ([\d.]+), (\d+)", code, re.M).groups()
    config = load("pong/agent-pixels.json")["config"]
    assert (int(seed), float(sigma), int(members)) == (config["seed"], config["sigma"], config["population"])
    assert "policy.initial_params(SEED)" in code and "center + SIGMA * n" in code
    assert config["init"] is None and config["antithetic"]          # from initial_params(seed); mirrored pairs


@lru_cache(maxsize=None)
def _figure():
    """The figure's run (its figure.json) and the checkpoint it shows: the keypoints' windows in
    pixel columns."""
    from es.play import load_agent
    from pong.keypoints import _unpack, window_columns
    seen = load(f"{PIXEL_RUN}/figure.json")
    problem, params, meta = load_agent(ROOT / PIXEL_RUN / "kept" / "230.npz")
    policy = problem.policy
    _, pulls = _unpack(policy.unflatten(np.asarray(params, np.float32)[None])[0][0], 6, policy.channels,
                       policy.pull_params)
    centre, half = (a[0] for a in window_columns(pulls, policy.pull_scale))
    spans = [f"{max(centre[i] - half[i], 0):.0f} to {centre[i] + half[i]:.0f}" for i in range(6)]
    return seen, [seen[f"keypoint_{i}"] for i in range(6)], spans, meta


def _pixel_agent_score():
    """The shipped pixel agent's record, and the figure shows that agent (its checkpoint's generation)."""
    shipped = load("pong/agent-pixels.json")
    _, _, _, meta = _figure()
    assert shipped["generations"] == meta["generation"] == 230 and shipped["config"]["seed"] == 16
    e = shipped["eval"]
    assert (f"+{e['agent_mean']:.1f}", e["episodes"], f"{e['random_mean']:.2f}") == ("+6.4", 20, "-20.15")
    assert e["seed"] == 1_200_000 and shipped["eval_command"].endswith("--episodes 20 --seed 1200000")
    import inspect
    from es.play import evaluate_checkpoint          # the random player plays the agent's seeds
    src = inspect.getsource(evaluate_checkpoint)
    assert "seeds = np.arange(seed, seed + episodes)" in src and "problem.play_random(seeds)" in src


def _figure_steps():
    seen, _, _, _ = _figure()
    assert seen["steps"] == 1500 and seen["seed"] == 5 and seen["figure"] == "docs/pong-windows.png"


def _middle_windows():
    _, kp, spans, _ = _figure()
    middle = kp[1:5]
    assert spans[1:5] == ["7 to 14", "15 to 22", "19 to 26", "26 to 33"], spans
    assert [f"{k['share_present']:.0%}" for k in middle] == ["19%", "11%", "15%", "5%"]
    assert [f"{k['ball_row_where_present']:.2f}" for k in middle] == ["0.86", "0.93", "0.97", "0.99"]
    assert [f"{k['ball_col_where_present']:.2f}" for k in middle] == ["0.93", "0.98", "0.98", "0.85"]


def _edge_windows():
    _, kp, spans, _ = _figure()
    assert (spans[0], spans[5]) == ("0 to 7", "35 to 42"), spans
    assert (f"{kp[0]['ball_row']:.2f}", f"{kp[0]['opponent_row']:.2f}") == ("0.94", "0.88")
    assert kp[0]["ball_row"] > kp[0]["opponent_row"]
    assert f"{kp[5]['paddle_row']:.2f}" == "0.70"


STARTER = Path("/work/.mirror/openai+evolution-strategies-starter/repo/.git")   # commit 951f199, where present
STARTER_URL = "https://github.com/openai/evolution-strategies-starter/blob/951f19986921135739633fb23e55b2075f66c2e6/"
POLICIES, ES_PY = STARTER_URL + "es_distributed/policies.py#L145", STARTER_URL + "es_distributed/es.py#L42"
S_VBN_PAPER = ("For its Atari networks the paper used **virtual batch normalization** (its section 2.2, after "
               "Salimans et al. 2016): batch normalization whose statistics come from a *reference batch* of "
               "observations chosen once, before training, and fixed.")
S_CLIP = ("OpenAI's starter code (linked in notebook 00) does both to observations: its std is `sqrt(max(var, 1e-2))`, "
          f"at least 0.1 ([`951f199:es_distributed/es.py` line 42]({ES_PY})), and it clips to [-5, 5] "
          f"([`951f199:es_distributed/policies.py` line 145]({POLICIES})).")


def _cited(snippet: str, *citations: str):
    def holds():
        for c in citations:
            assert c in snippet, f"the text no longer cites {c!r}"
    return holds


def _starter_clip():
    """The citations are in the text; the pixel agent's floor is the starter's std floor
    (sqrt(max(var, 1e-2)) = max(std, 0.1)) and its clip the starter's; where a mirror of the starter
    is at hand, es.py line 42 floors the variance at 1e-2 and policies.py line 145 clips the
    normalized observation to [-5, 5]."""
    _cited(S_CLIP, "`951f199:es_distributed/es.py` line 42", "es.py#L42",
           "`951f199:es_distributed/policies.py` line 145", "policies.py#L145")()
    from pong.keypoints import VBN_CLIP, VBN_FLOOR
    assert VBN_CLIP == 5.0 and VBN_FLOOR == 0.1 and np.isclose(np.sqrt(1e-2), VBN_FLOOR)
    var = np.array([0.0, 1e-4, 1e-2, 0.5, 9.0])
    assert np.allclose(np.sqrt(np.maximum(var, 1e-2)), np.maximum(np.sqrt(var), VBN_FLOOR))
    for path, line, text in (("es_distributed/es.py", 42, "np.sqrt(np.maximum(self.sumsq / self.count - "
                                                           "np.square(self.mean), 1e-2))"),
                             ("es_distributed/policies.py", 145, "tf.clip_by_value((o - ob_mean) / ob_std, -5.0, 5.0)")):
        got = mirrored_lines(STARTER, "951f199", path)
        if got is not None:
            assert text in got[line - 1], (path, line)


CLAIMS: list[Claim] = [
    Claim("sigma' = [exp(0.05), 2 exp(-0.2)] = [1.0513, 1.6375]`", _snes_example,
          "the solution's snes_step on the example's inputs"),
    Claim("normalised to sum to 1, minus `1/n`. So the best member counts most, the weights fall like a logarithm "
          "down to the middle, and the worse half all get the same `-1/n`. They sum to 0, and like centered ranks "
          "they depend only on the order of the scores", _utilities, "the solution's utilities(n) for n = 4, 10, 40 (the notebook: 40)"),
    Claim("Here, `d = 10`, it is 0.34: each update multiplies `sigma_j` by `exp(0.17 * sum_i w_i (s_ij^2 - 1))`",
          _sigma_step, "the solution's snes_sigma, (3 + log 10) / (5 sqrt 10), and half of it"),
    Claim("`inputs = [[3, 1.05], [40, 0]]`: feature 0 has mean 2 and standard deviation 1.633 (the square root of "
          "8/3), feature 1 mean 1 and standard deviation 0, floored to 0.1; so the result is `[[0.6124, 0.5], "
          "[5, -5]]` (40 gives 23.3 and 0 gives -10, both clipped)", _vbn_example,
          "the solution's virtual_batch_norm on the example's inputs"),
    Claim(S_VBN_PAPER, _cited(S_VBN_PAPER, "(its section 2.2", "Salimans et al. 2016"),
          "Salimans et al. 2017, arXiv:1703.03864, section 2.2: virtual batch normalization (Salimans et al., 2016), "
          "batch normalization whose statistics come from a reference minibatch chosen at the start of training and "
          "fixed; no floor or clip is described there"),
    Claim(S_CLIP, _starter_clip, "openai/evolution-strategies-starter at 951f199 (read in git show): "
          "es_distributed/es.py line 42, RunningStat.std = sqrt(max(sumsq / count - mean**2, 1e-2)); "
          "es_distributed/policies.py line 145, tf.clip_by_value((o - ob_mean) / ob_std, -5.0, 5.0); "
          "pong.keypoints.VBN_FLOOR and VBN_CLIP"),
    Claim("there floored at $0.1$, then clipped to $[-5, 5]$", _vbn_is_the_pixel_agents,
          "pong.keypoints' VBN_FLOOR and VBN_CLIP, and PongKeypointsPolicy.normalize against the solution"),
    Claim("float64 returned, within a relative error of `1e-6` (float32 statistics lose more), on random inputs "
          "with a feature constant over the reference batch, one that barely varies, and inputs far outside the "
          "batch; it names a missing floor, `ddof=1`, a missing clip, statistics of `inputs`, the variance floored at "
          "0.1 (instead of the std), float32 statistics, and an argument changed in place", _vbn_check_names,
          "classroom/check.py's virtual_batch_norm, and the check run on a float32 computation"),
    Claim("turns 495 numbers computed from them (per keypoint its newest column and row, their slopes and its "
          "presence, then their pairwise products and squares)", _head_inputs,
          "pong/keypoints.py: FEATURES_PER_KEYPOINT, keypoint_features, _quadratic, PongKeypointsPolicy.num_features"),
    Claim("(`policy.initial_params(SEED)`, the run's seed), `MEMBERS` members perturbed at the run's `SIGMA`",
          _pixel_run_settings, "the cell's SEED, SIGMA, MEMBERS against pong/agent-pixels.json's config"),
    Claim("It scores +6.4 a game (points won minus points lost) over 20 held-out games (seeds 1,200,000 to "
          "1,200,019), where a random player scores -20.15 on the same seeds", _pixel_agent_score,
          "pong/agent-pixels.json (its eval), and the figure's checkpoint is that agent's generation"),
    Claim("The numbers under the picture are measured on 1,500 steps of that game", _figure_steps,
          f"{PIXEL_RUN}/figure.json"),
    Claim("Windows 1 to 4 (columns 7 to 14, 15 to 22, 19 to 26 and 26 to 33) each hold something on 19%, 11%, 15% "
          "and 5% of the steps; there their rows follow the ball's "
          "(correlations 0.86, 0.93, 0.97 and 0.99) and so do their columns (0.93, 0.98, 0.98 and 0.85)",
          _middle_windows, f"{PIXEL_RUN}/figure.json and the windows of its checkpoint kept/230.npz"),
    Claim("Window 0 (columns 0 to 7) sits at the opponent's paddle, yet over all steps its row follows the ball's "
          "(0.94) more closely than the opponent's (0.88); window 5 (columns 35 to 42) sits on our paddle (row "
          "correlation 0.70)", _edge_windows, f"{PIXEL_RUN}/figure.json and the windows of its checkpoint"),
]
