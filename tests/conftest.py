"""Shared fixtures. Tests run with whatever Python runs pytest, activated venv or not:
subprocesses get ``sys.executable`` and that interpreter's bin folder first on PATH."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def subprocess_env(**extra) -> dict:
    """The environment for a child process: this interpreter's bin folder (console scripts
    such as nbgrader's alembic) first on PATH, this checkout on PYTHONPATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PATH": path, "PYTHONPATH": pythonpath, "PYTHON": sys.executable, **extra}


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
