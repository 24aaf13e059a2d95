"""The environment for a test's child processes. A module of its own, not conftest.py: with
tests/web/conftest.py loaded too, ``from conftest import ...`` may find that one, and a Dask
worker that imports a test module searches the folders pytest put first on its path."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def subprocess_env(**extra) -> dict:
    """The environment for a child process: this interpreter's bin folder (console scripts
    such as nbgrader's alembic) first on PATH, this checkout on PYTHONPATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PATH": path, "PYTHONPATH": pythonpath, "PYTHON": sys.executable, **extra}
