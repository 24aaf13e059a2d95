"""The suite's own plumbing: tests that share a costly module-scoped fixture (the student's
Pong run, a built class) run on one worker, so it is built once (tests/conftest.py). With
pytest 9.2 and xdist 3.8 the groups silently stopped working (pytest-dev/pytest-xdist#1386)
and CI built the student's Pong run twice; this test fails if that happens again."""
import os

import pytest


@pytest.fixture(scope="module")
def shared():
    return os.getpid()


def test_tests_sharing_a_module_fixture_are_one_group_on_one_worker(request, shared):
    if getattr(request.config, "workerinput", None) is None:
        pytest.skip("not under pytest-xdist (-n 0): there is one process, nothing to group")
    assert request.config.getvalue("loadgroup"), "the tests run with --dist loadgroup (pyproject's addopts)"
    assert request.node.nodeid.endswith("@module:tests/test_test_groups.py"), (
        f"{request.node.nodeid}: the xdist group is not in the node id, so --dist loadgroup would spread this "
        "file's tests over the workers and build its fixture on each (pytest and pytest-xdist versions?)")
    assert shared == os.getpid()
