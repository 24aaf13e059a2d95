"""Sources of the numbers on page 02_parallel."""
import ast
import re

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)


def _points():
    assert check_points("02_parallel") == 5


def _line(module, number, text):
    """Line ``number`` of an installed module's source is ``text`` (stripped)."""
    got = source_of(module).splitlines()[number - 1].strip()
    assert got == text, f"{module.__name__} line {number} is {got!r}, not {text!r}"


def _joblib_default_backend():
    import joblib
    import joblib.parallel
    assert joblib.__version__ == "1.6.0", joblib.__version__
    _line(joblib.parallel, 64, 'DEFAULT_BACKEND = "loky"')


def _joblib_blas_threads():
    import joblib
    from joblib import _parallel_backends
    assert joblib.__version__ == "1.6.0", joblib.__version__
    _line(_parallel_backends, 230, "default_n_threads = max(cpu_count() // n_jobs, 1)")
    # the loky backend (the default) gives its workers that environment
    assert "env=self._prepare_worker_env(n_jobs=n_jobs)" in source_of(_parallel_backends.LokyBackend)


def _numpy_docstrings():
    import numpy as np
    assert "Reseed the singleton RandomState instance" in np.random.seed.__doc__
    assert "that can be used to seed independent BitGenerators" in " ".join(np.random.SeedSequence.__doc__.split())
    assert "array_like[ints]" in np.random.default_rng.__doc__


def _corner():
    import numpy as np
    edges = np.linspace(0, 11, 4).astype(int)
    assert edges.tolist() == [0, 3, 7, 11]


def _parallel_returns_check():
    from classroom import check
    src = source_of(check._RAW["parallel_returns"])
    assert "for n_jobs in (3, 2):" in src
    assert "p % n_jobs and p % 2" in src


def _nine_neighbours():
    from classroom import check
    src = source_of(check._RAW["member_noise"])
    found = re.search(r"for ds, dg, dm in (\(.*?\)):", src, re.S)
    assert found and len(ast.literal_eval(found.group(1))) == 9


CLAIMS: list[Claim] = [
    Claim("each job reseeded [+5 points]", _points, "the graded points of notebook 02's checks (classroom.check)"),
    Claim('which runs jobs in worker *processes* (`DEFAULT_BACKEND = "loky"`: joblib 1.6.0, module '
          "`joblib.parallel`, line 64)", _joblib_default_backend, "the installed joblib's parallel.py, line 64"),
    Claim("allows each worker process `max(cpu_count() // n_jobs, 1)` of them (joblib 1.6.0, module "
          "`joblib._parallel_backends`, line 230)", _joblib_blas_threads,
          "the installed joblib's _parallel_backends.py, line 230, and LokyBackend passing it to its workers"),
    Claim('Never `np.random.seed`: it reseeds "the singleton RandomState instance" (its docstring)', _numpy_docstrings,
          "the installed NumPy's docstrings of np.random.seed, SeedSequence and default_rng"),
    Claim("**The corner:** 11 members in 3 jobs. `np.linspace(0, 11, 4).astype(int)` is `[0, 3, 7, 11]`: chunks "
          "`[0, 3)`, `[3, 7)`, `[7, 11)`.", _corner, "computed with NumPy"),
    Claim("two populations (odd, not multiples of `n_jobs`) with `n_jobs` 3 and 2", _parallel_returns_check,
          "classroom.check.parallel_returns"),
    Claim("nine neighbouring triples", _nine_neighbours, "classroom.check.member_noise's list of neighbours"),
]
