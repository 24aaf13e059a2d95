"""es-course: OpenAI-style Evolution Strategies in pure NumPy.

Reading order follows the course: ``seeding`` and ``noise`` (perturbations from seeds) ->
``shaping`` -> ``optimizers`` -> ``strategy`` (ask/tell: OpenES, SNES) -> ``policies`` -> ``envs``
(problems) -> ``evaluators`` / ``parallel`` / ``distributed`` -> ``train`` (a student release
holds a few of them; the course repository holds all, and docs/design.md, which maps the layers
and the flow of one generation).

The names below load on first use (PEP 562), so ``import es`` is cheap and importing one
module (``es.envs.cartpole``) does not pull in the rest.
"""
from importlib import import_module
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed

_EXPORTS = {"ESConfig": "config", "config_for": "config", "ESError": "errors", "SGD": "optimizers",
            "Adam": "optimizers", "centered_ranks": "shaping", "z_score": "shaping", "raw": "shaping",
            "OpenES": "strategy", "SNES": "strategy", "GenerationTask": "strategy", "train": "training",
            "TrainResult": "training",
            "optimize": "api"}
__all__ = list(_EXPORTS)


def version() -> str:
    """es-course's version as installed (the course repository's pyproject.toml is its one source)."""
    try:
        return _installed("es-course")
    except PackageNotFoundError:      # a checkout that was never installed, or a student release
        return "unknown (not installed)"


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    if name == "__version__":
        return version()
    raise AttributeError(f"module 'es' has no attribute {name!r}")
