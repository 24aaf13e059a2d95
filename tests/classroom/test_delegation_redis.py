"""Notebook 03's graded functions earn nothing when they call the course's own implementation
(declared with each check: ``es.distributed`` for ``gather``, ``es.noise`` and its table for
``seeds_only_update`` and ``noise_table``), as the grader decides it; the notebook's own code
delegates nothing."""
import pytest

from classroom.delegation import findings
from test_delegation_locomotion import code_cells, graded

# a cell a student appends to the solution: the graded function now calls the course's own
DELEGATING = {
    "gather": (
        "from es.distributed import master\n\n\n"
        "def gather(url, generation, bounds, lease_seconds, timeout=60.0):\n"
        "    return master.collect(url, generation, bounds, lease_seconds, timeout)\n"),
    "seeds_only_update": (
        "import es.noise\n\n\n"
        "def update_from_returns(center, seed, generation, chunk_returns, sigma, lr):\n"
        "    r = np.concatenate(chunk_returns)\n"
        "    z = (r - r.mean()) / (r.std() + 1e-8)\n"
        "    eps = es.noise.antithetic_noise(seed, generation, np.arange(len(r)), center.size)\n"
        "    return (center + lr * eps.T @ z / (len(r) * sigma)).astype(np.float32)\n"),
    "noise_table": (
        "def generation_offsets(seed, generation, pairs, size, dim):\n"
        "    from es.noise_table import pair_offsets\n"
        "    return pair_offsets(seed, generation, pairs, dim)\n"),
}


@pytest.mark.parametrize("check", sorted(DELEGATING))
def test_a_03_function_that_calls_the_course_s_own_scores_0_on_its_check_alone(check):
    found = findings(code_cells("solutions", "03_redis") + [DELEGATING[check]], graded("03_redis"))
    assert set(found) == {check} and "reference implementation" in found[check], found


@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_the_notebooks_own_code_delegates_nothing(folder):
    assert findings(code_cells(folder, "03_redis"), graded("03_redis")) == {}
