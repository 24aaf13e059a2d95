"""Sources of the numbers on page 02_parallel."""

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
    # section 2: default_rng's and SeedSequence's words, as the page quotes them
    assert "If an ``int`` or ``array_like[ints]`` is passed, then all values must be non-negative and will be " \
           "passed to `SeedSequence`" in " ".join(np.random.default_rng.__doc__.split())
    assert np.random.SeedSequence.__doc__.split()[:5] == ["SeedSequence", "mixes", "sources", "of", "entropy"]
    # the introduction: np.random.seed() without a seed reads the operating system's entropy
    assert "If `seed` is ``None``, then the `MT19937` BitGenerator is initialized by reading data from " \
           "``/dev/urandom``" in " ".join(np.random.RandomState.__doc__.split())


def _fork_default():
    """fork: multiprocessing's default on Linux in the course's Python (3.11, the installed one);
    joblib's multiprocessing backend takes multiprocessing's default context."""
    import multiprocessing as mp
    import sys
    import joblib
    import joblib.parallel
    assert sys.version_info[:2] == (3, 11), sys.version_info
    if sys.platform.startswith("linux"):
        assert mp.get_context().get_start_method() == "fork"
    assert joblib.__version__ == "1.6.0", joblib.__version__
    _line(joblib.parallel, 1304, 'self._backend_kwargs["context"] = mp.get_context()')


def _assignment():
    """The quoted tip: checked by hand in yandexdataschool/Practical_RL at commit 6f7fa8b, markdown
    cell "Tips on implementation": "* For joblib, make sure random variables are independent in
    each job. Simply add `np.random.seed()` at the beginning of your "job" function." """
    for cited in ("6f7fa8bc521af3d6bb47833c4670f44740f26aa6/week01_intro/project_starter_evolution_strategies.ipynb",
                  "*Tips on implementation*", '"For joblib, make sure random variables are independent in each job"'):
        assert cited in _ASSIGNMENT


def _corner():
    import numpy as np
    edges = np.linspace(0, 11, 4).astype(int)
    assert edges.tolist() == [0, 3, 7, 11]


def _parallel_returns_check():
    from classroom import check
    src = source_of(check._RAW["parallel_returns"])
    assert "for n_jobs in (3, 2):" in src
    assert "p % n_jobs and p % 2" in src


def _member_noise_check():
    """The check names what section 2 says it tests: each of these wrong member_noise fails it,
    the solution passes, and every integer the check passes is below 2**32 (the contract's range)."""
    import numpy as np
    from classroom import check

    def weighted(w, listed=False):
        if listed:
            return lambda s, g, m, d: np.random.default_rng([s, w * g + m]).standard_normal(d)
        return lambda s, g, m, d: np.random.default_rng(s * 10 ** 12 + w * g + m).standard_normal(d)

    def mirrored(s, g, m, d):
        e = np.random.default_rng([s, g, m // 2]).standard_normal(d)
        return -e if m % 2 else e

    wrong = {f"`w * generation + member` (w = {w})": weighted(w, listed) for w in (10, 100, 1000, 10 ** 4, 2 ** 16,
             10 ** 9, 2 ** 31) for listed in (False, True)}
    wrong.update({f"`{w} * seed + member`": lambda s, g, m, d, w=w: np.random.default_rng(
        w * s + 2 ** 40 * g + m).standard_normal(d) for w in (10 ** 6, 2 ** 20, 1000003)})
    wrong.update({f"the prime weight {w}": weighted(w, listed) for w in check.PRIME_WEIGHTS for listed in (False, True)})
    wrong.update({f"digits zero-padded to {k} (member), {j} (generation)": lambda s, g, m, d, k=k, j=j:
                  np.random.default_rng(int(f"{s}{g:0{j}d}{m:0{k}d}")).standard_normal(d)
                  for k in range(1, 10) for j in (1, 4, 10)})
    wrong.update({f"digits zero-padded to {k} (generation)": lambda s, g, m, d, k=k:
                  np.random.default_rng(int(f"{s:010d}{g:0{k}d}{m:010d}")).standard_normal(d) for k in range(1, 10)})
    wrong.update({"members `2k` and `2k + 1`": mirrored,
                  "mean near $0$, standard deviation near $1$": lambda s, g, m, d: np.random.default_rng(
                      [s, g, m]).uniform(-1, 1, d),
                  "shares of draws within $0.5$ of $0$ and beyond $\\pm 2$ near a normal's (uniform)":
                      lambda s, g, m, d: np.random.default_rng([s, g, m]).uniform(-3 ** 0.5, 3 ** 0.5, d),
                  "shares of draws within $0.5$ of $0$ and beyond $\\pm 2$ near a normal's (Laplace)":
                      lambda s, g, m, d: np.random.default_rng([s, g, m]).laplace(0, 0.5 ** 0.5, d)})
    once = {said for said in wrong if said.startswith(("the prime", "digits"))}      # many: on one seed
    for seed in range(3):
        for said, fn in wrong.items():
            if seed and said in once:
                continue
            try:
                check._RAW["member_noise"](fn, np.random.default_rng(seed))
            except check.CheckFailed:
                continue
            raise AssertionError(f"check.member_noise passes a member_noise the page says it catches ({said})")
        largest = []

        def right(s, g, m, d):
            largest.append(max(s, g, m))
            return np.random.default_rng([s, g, m]).standard_normal(d)
        check._RAW["member_noise"](right, np.random.default_rng(seed))
        assert 2 ** 31 <= max(largest) < 2 ** 32, max(largest)
        # a padding wide enough for every integer below 2**32 (10 digits) is a mix that passes
        check._RAW["member_noise"](lambda s, g, m, d: np.random.default_rng(int(f"{s}{g:010d}{m:010d}")).standard_normal(
            d), np.random.default_rng(seed))
    assert min(check.PRIME_WEIGHTS) == 31 and max(check.PRIME_WEIGHTS) == 2 ** 31 - 1
    assert all(all(w % p for p in range(2, int(w ** 0.5) + 1)) for w in check.PRIME_WEIGHTS)     # primes
    src = source_of(check._RAW["member_noise"])
    assert "for k in range(1, 10)" in src and "(0, 0, 10 ** k + r)" in src and "(0, 10 ** k + q, member)" in src


CORNER = ("A sum gives `(0, 1, 2)` and `(0, 2, 1)` the same noise; `seed * generation + member` gives every generation "
          "the same noise when `seed == 0`; digits run together, `int(f\"{seed}{generation}{member}\")`, make "
          "`(0, 1, 23)` and `(0, 12, 3)` one member; weights, `1000003 * seed + 1009 * generation + member`, make "
          "`(0, 1, 0)` and `(0, 0, 1009)` one; zero-padded digits, `int(f\"{seed}{generation:04d}{member:06d}\")`, "
          "make `(0, 1, 0)` and `(0, 0, 1000000)` one (a member of 7 digits runs past its padding).")


def _corner_mixes():
    """Each mix the corner names, on the triples it names, as the integer default_rng would get."""
    mixes = re.findall(r"`((?:int\(f|seed \*|1000003)[^`]*)`", CORNER)
    pairs = [tuple(tuple(map(int, t.split(", "))) for t in pair)
             for pair in re.findall(r"`\(([\d, ]+)\)` and `\(([\d, ]+)\)`", CORNER)]
    mixes = ["seed + generation + member"] + mixes
    assert len(mixes) == len(pairs) + 1 == 5, (mixes, pairs)
    for mix, (a, b) in zip(mixes[:1] + mixes[2:], pairs):
        key = lambda t: eval(mix, {}, dict(zip(("seed", "generation", "member"), t)))     # noqa: E731
        assert a != b and key(a) == key(b), (mix, a, b)
    assert all(eval(mixes[1], {}, {"seed": 0, "generation": g, "member": 5}) == 5 for g in range(9))
    assert len(str(1000000)) == 7 and "a member of 7 digits" in CORNER


def _member_range():
    """The contract's range: below 2**32 each, a list of the three is one 32-bit word per integer, so
    different triples are different words; beyond it SeedSequence splits an integer into words, and
    two triples can give the same words (the same noise)."""
    import numpy as np

    def noise(*key):
        return np.random.default_rng(list(key)).standard_normal(4)
    s, g = 5, 7
    assert np.array_equal(noise(s + g * 2 ** 32, 0, 1), noise(s, g, 2 ** 32))          # one beyond the range
    assert not np.array_equal(noise(s, g, 2 ** 32 - 1), noise(s, g + 1, 0))


_FORK = ("on Linux with Python 3.11, `fork` is `multiprocessing`'s default, which joblib's `\"multiprocessing\"` "
         "backend uses (joblib 1.6.0, module `joblib.parallel`, line 1304)")
_ASSIGNMENT = ("The course's original assignment (Practical_RL's [`week01_intro/project_starter_evolution_strategies.ipynb`]"
               "(https://github.com/yandexdataschool/Practical_RL/blob/6f7fa8bc521af3d6bb47833c4670f44740f26aa6/"
               "week01_intro/project_starter_evolution_strategies.ipynb), *Tips on implementation*) says: \"For joblib, "
               "make sure random variables are independent in each job\"")

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
    Claim("a long draw's mean near $0$, standard deviation near $1$, and shares of draws within $0.5$ of $0$ and "
          "beyond $\\pm 2$ near a normal's; a triple twice, in this process and in another; the global state neither "
          "used nor changed. Then triples that these mixes confuse, none equal to another nor to its negation: a sum, a "
          "product (`seed == 0` and `generation == 0` among them), digits run together; `(seed, generation, member + "
          "w)` against `(seed, generation + 1, member)` and `(seed + 1, generation, member)` ($w$ times the generation "
          "or the seed, plus the member) for $w$ a power of $10$ or of $2$ below $2^{32}$ or one of the primes in "
          "`check.PRIME_WEIGHTS` ($31$ to $2^{31} - 1$); digits zero-padded to $k$ places, $k = 1, \\dots, 9$, with a "
          "member or a generation of $k + 1$ digits; members `2k` and `2k + 1`.",
          _member_noise_check, "classroom.check.member_noise, run on wrong member_noise functions and on the "
          "solution's (the integers it passes stay below 2**32)", slow=True),
    Claim(CORNER, _corner_mixes, "each mix the corner names, computed on the triples it names"),
    Claim("four non-negative ints, the first three below $2^{32}$", _member_range,
          "NumPy's SeedSequence: a list of integers below 2**32 is one word each; a larger one collides"),
    Claim(_FORK, _fork_default, "the installed Python's (3.11) default start method, joblib's parallel.py line 1304"),
    Claim(_ASSIGNMENT, _assignment, "Practical_RL's week01_intro/project_starter_evolution_strategies.ipynb at "
          "commit 6f7fa8b, its markdown cell Tips on implementation, read by hand"),
]
