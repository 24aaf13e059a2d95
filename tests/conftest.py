"""Shared fixtures. Tests run with whatever Python runs pytest, activated venv or not:
subprocesses get ``sys.executable`` and that interpreter's bin folder first on PATH."""
import os
from pathlib import Path

import pytest

from child_env import subprocess_env  # noqa: F401 (tests that start processes import it from child_env)

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    """On a machine where graded kernels get no sandbox (not root, no bubblewrap), the tests
    grade anyway, as an instructor who passes --allow-unsandboxed does; the sandbox's own tests
    skip there, and the refusal itself is tested as nobody (test_grader_environment.py)."""
    from classroom.sandbox import mode
    if mode()[0] == "none":
        os.environ.setdefault("ES_COURSE_ALLOW_UNSANDBOXED", "1")


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): one worker more than cores, at most 4; one core runs
    in this process (``-n 0``). Many tests wait on processes of their own (Redis workers,
    kernels, Dask) and on leases, so a third worker keeps 2 cores busy (the fast lane: 134 s
    with 2 workers, 122 s with 3); more than 4 only queue."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores + 1, 4) if cores > 1 else 0


@pytest.hookimpl(tryfirst=True)     # before xdist's own, which reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``--dist loadgroup``), the tests that share a costly fixture run on
    one worker, so that it is built once per run: a module-scoped fixture groups its file's
    tests, a session-scoped one from a folder's conftest (the built site) groups its users. A
    test that names its own group keeps it."""
    root_conftest = Path(__file__).resolve()
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        defs = getattr(item, "_fixtureinfo", None)
        defs = defs.name2fixturedefs if defs else {}
        group = None
        for name in sorted(defs):
            fixture = defs[name][-1]
            code = getattr(fixture.func, "__code__", None)
            where = Path(code.co_filename) if code else None
            if fixture.scope == "session" and where and where.name == "conftest.py" and where != root_conftest \
                    and ROOT in where.parents:
                group = f"session:{name}"
                break
            if fixture.scope in ("module", "class") and where and ROOT in where.parents:
                group = f"module:{item.nodeid.split('::')[0]}"
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def child_env():
    return subprocess_env()


@pytest.fixture(scope="session")
def redis_server():
    """One embedded Redis (valkey) with the master and worker roles, for the tests that only
    need a server; each test that uses it starts from an empty database."""
    from es.distributed.server import EmbeddedRedis
    with EmbeddedRedis(admin=True) as server:
        yield server
