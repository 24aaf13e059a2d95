"""Notebook 06's graded functions earn nothing when they call the course's own implementation
(``classroom.delegation.FORBIDDEN``: ``es.policies`` for ``linear_policy``, ``es.obs_norm`` for
``merge_stats`` and ``mean_std``), as the grader decides it (``classroom.grade`` hands
``findings`` the notebook's code cells); notebooks 05 and 06 keep their own imports."""
from pathlib import Path

import nbformat
import pytest

from classroom.check import CHECKS, checks_for
from classroom.delegation import findings

ROOT = Path(__file__).resolve().parents[2]

# a cell a student appends to the solution: the graded function now calls the course's own
DELEGATING = {
    "linear_policy": (
        "from es.policies import MLPPolicy\n\n\n"
        "def linear_policy(params, obs, mean, std, low, high):\n"
        "    net = MLPPolicy(obs.shape[1], len(low), (), discrete=False, low=low, high=high)\n"
        "    return net.forward(net.unflatten(params), np.clip((obs - mean) / std, -5, 5))\n"),
    "mean_std": (
        "import es.obs_norm as on\n\n\n"
        "def mean_std(count, total, squares):\n"
        "    return on.mean_std(on.ObsStats(count, total, squares))\n"),
    "merge_stats": (
        "def merge_stats(a, b):\n"
        "    from es import obs_norm\n"
        "    merged = obs_norm.merge(obs_norm.ObsStats(*a), obs_norm.ObsStats(*b))\n"
        "    return merged.count, merged.total, merged.squares\n"),
}


def code_cells(folder: str, name: str) -> list[str]:
    nb = nbformat.read(str(ROOT / folder / f"{name}.ipynb"), 4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def graded(name: str) -> dict:
    return {n: CHECKS[n][3] for n in checks_for(name)}


@pytest.mark.parametrize("check", sorted(DELEGATING))
def test_a_06_function_that_calls_the_course_s_own_scores_0_on_its_check_alone(check):
    found = findings(code_cells("solutions", "06_locomotion") + [DELEGATING[check]], graded("06_locomotion"))
    assert set(found) == {check} and "reference implementation" in found[check], found


def test_the_delegating_linear_policy_would_pass_its_check_without_the_scan():
    """The reason for the scan: the course's policy computes the right actions, in one batch."""
    import numpy as np
    from classroom import check
    namespace = {"np": np}
    exec(compile(DELEGATING["linear_policy"], "<notebook cell>", "exec"), namespace)
    check.linear_policy(namespace["linear_policy"], seed=0)


@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
@pytest.mark.parametrize("name", ["05_extras", "06_locomotion"])
def test_the_notebooks_own_code_delegates_nothing(folder, name):
    assert findings(code_cells(folder, name), graded(name)) == {}
