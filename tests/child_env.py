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


def has_cpu_feature(feature: str) -> bool:
    """Whether NumPy found this feature (its name, as in ``__cpu_features__``) on this CPU."""
    from numpy._core._multiarray_umath import __cpu_features__
    return bool(__cpu_features__.get(feature))


def emulated_cpus() -> list[dict]:
    """Environments of three other x86-64 PCs, as far as this CPU can pretend: another OpenBLAS
    kernel each (``OPENBLAS_CORETYPE``); NumPy without AVX-512, and without AVX2 as well
    (``NPY_DISABLE_CPU_FEATURES``, where this CPU has them)."""
    no_v4 = " ".join(f for f in ("AVX512_SPR", "AVX512_ICL", "X86_V4") if has_cpu_feature(f))
    no_v3 = " ".join(f for f in ("AVX512_SPR", "AVX512_ICL", "X86_V4", "X86_V3") if has_cpu_feature(f))
    return [{"OPENBLAS_CORETYPE": "Sandybridge"},
            {"OPENBLAS_CORETYPE": "Haswell", **({"NPY_DISABLE_CPU_FEATURES": no_v4} if no_v4 else {})},
            {"OPENBLAS_CORETYPE": "Zen", **({"NPY_DISABLE_CPU_FEATURES": no_v3} if no_v3 else {})}]
