"""Sources of the numbers on page 01_cartpole."""
import contextlib
import io
from functools import lru_cache

import numpy as np

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)

NB = "01_cartpole"


@lru_cache(maxsize=None)
def _ns():
    with contextlib.redirect_stdout(io.StringIO()):
        return solution(NB, "cartpole_returns", "center_returns", "antithetic_noise", "adam_update", "policy")


def points():
    assert check_points("00_es_from_scratch") + check_points(NB) == 10


def policy_layout():
    """CartPole-v1 has 4 observations and 2 actions; MLPPolicy(4, 2, ()) has 10 parameters, the
    4x2 weights row by row, then the 2 biases."""
    import gymnasium
    from es.policies import MLPPolicy
    env = gymnasium.make("CartPole-v1")
    assert env.observation_space.shape == (4,) and env.action_space.n == 2
    policy = MLPPolicy(4, 2, hidden=())
    assert policy.num_params == 10 and _ns()["policy"].num_params == 10
    [(w, b)] = policy.unflatten(np.arange(10, dtype=np.float32)[None])
    assert np.array_equal(w[0], np.arange(8).reshape(4, 2)) and np.array_equal(b[0, 0], [8, 9])


def solved_bar():
    """The check's bar: mean >= 475 on seeds 1000..1019 (475 is gymnasium's reward threshold
    for CartPole-v1)."""
    import gymnasium
    from classroom import check
    src = source_of(check._RAW["train_cartpole"])
    assert "returns.mean() < 475" in src and "np.arange(1000, 1020)" in src
    assert gymnasium.spec("CartPole-v1").reward_threshold == 475


def return_bounds():
    """A return counts the steps balanced: at least 1, at most CartPole-v1's 500-step limit."""
    import gymnasium
    assert gymnasium.spec("CartPole-v1").max_episode_steps == 500
    ns = _ns()
    rng = np.random.default_rng(0)
    params = rng.standard_normal((64, 10)) * np.array([[0.0] * 10, [1.0] * 10] * 32)   # zeros and random rows
    returns = ns["cartpole_returns"](params, 7)
    assert returns.dtype == np.float64 and returns.min() >= 1 and returns.max() <= 500
    balancing = np.array([0, 0, 0, 0.1, 0, 0.5, 0, 1, 0, 0])    # push towards where the pole falls
    best = ns["center_returns"](balancing, range(8))
    assert best.dtype == np.float64 and best.max() == 500, best


class _Drawn:
    """A generator whose one draw is the example's [[1, 2], [3, 4]]."""
    def __init__(self):
        self.calls = []

    def standard_normal(self, shape):
        self.calls.append(shape)
        return np.array([[1.0, 2.0], [3.0, 4.0]])


def noise_example():
    rng = _Drawn()
    out = _ns()["antithetic_noise"](rng, 4, 2)
    assert rng.calls == [(2, 2)]
    assert np.array_equal(out, [[1, 2], [-1, -2], [3, 4], [-3, -4]])


def adam_example():
    theta, _ = _ns()["adam_update"](np.zeros(2), np.array([2.0, -0.5]), None, 0.1)
    assert np.max(np.abs(theta - [0.1, -0.1])) <= 1e-6, theta


def steps_check():
    """check.train_cartpole holds the loop to the answer key's (references._cartpole_run): each
    parameter within 1e-6, after 3 updates, on both full runs, and on a run at lr 0.05 whose log
    passes 475 before its end."""
    from classroom import check
    src = source_of(check._RAW["train_cartpole"])
    assert "_call(fn, a, 3)" in src and 'answers("train_cartpole_steps", a, 3)' in src
    assert "_call(fn, seed, 60, 256, 0.2, 0.05)" in src and 'run["log"][:-1] >= 475' in src
    assert "for seed in (a, b):" in src and "_same_center(raw[seed], run[\"right\"])" in src
    assert "<= 1e-6 * max(1.0, np.max(np.abs(want)))" in source_of(check._same_center)


CLAIMS: list[Claim] = [
    Claim("[10 points with notebook 00]", points, "the graded checks' points of notebooks 00 and 01"),
    Claim("4 observations -> 2 action logits, 10 parameters in the layout of `es.policies.MLPPolicy(4, 2, ())` "
          "(the 4x2 weights row by row, then the 2 biases)", policy_layout,
          "gymnasium's CartPole-v1 spaces; es.policies.MLPPolicy's num_params and unflatten"),
    Claim("at least 475 on gymnasium's `CartPole-v1` with seeds 1000..1019", solved_bar,
          "check.train_cartpole's bar; gymnasium's reward_threshold for CartPole-v1"),
    Claim("between 1 and 500", return_bounds,
          "gymnasium's max_episode_steps for CartPole-v1; the helpers' returns on random and balancing policies"),
    Claim("`population = 4`, `dim = 2`, and the call returns `[[1, 2], [3, 4]]`: the noise is "
          "`[[1, 2], [-1, -2], [3, 4], [-3, -4]]`", noise_example, "the solution's antithetic_noise"),
    Claim("With `theta = [0, 0]`, `grad = [2, -0.5]`, `lr = 0.1`: **`[0.1, -0.1]`** (to 1e-6)", adam_example,
          "the solution's adam_update"),
    Claim("each parameter within 1e-6 of the answer key's loop): the center after 3 updates "
          "(`train_cartpole(seed, 3)`), the centers both full runs return, and a run at `lr = 0.05` whose center "
          "reaches a mean of 475 before it solves", steps_check, "classroom.check.train_cartpole's source"),
]
