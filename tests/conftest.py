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
    """``-n auto`` (pyproject's addopts): one worker per core, at most 4, and one more for the
    fast lane (``-m "not slow"``); one core runs in this process (``-n 0``). The fast lane's
    tests mostly wait on processes of their own (Redis workers, Dask) and on leases, so a third
    worker keeps 2 cores busy (134 s with 2 workers, 122 s with 3); the slow ones grade
    notebooks in kernels that take whole cores, and more workers than cores only queue them."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores == 1:
        return 0
    fast_lane = "not slow" in (config.option.markexpr or "")
    return min(cores + fast_lane, 4)


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
