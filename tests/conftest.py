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
