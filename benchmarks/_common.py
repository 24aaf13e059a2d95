"""Shared set-up for benchmarks: one core, one BLAS thread, import path."""
import os
import sys


def one_core(cpu: int | None = None) -> int:
    """Pin this process to one CPU (the last one unless told) and BLAS to one thread."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1] if cpu is None else cpu
    os.sched_setaffinity(0, {cpu})
    return cpu


def pythonpath(root) -> str:
    """A child's PYTHONPATH: the checkout measured first, then whatever the caller's held
    (packages installed with ``pip --target``, as on a borrowed machine)."""
    return os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
