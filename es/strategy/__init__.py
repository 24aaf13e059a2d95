"""Evolution strategies behind one interface (``base.Strategy``), one per module, by name:
``STRATEGIES[name]`` is the class ``--strategy name`` trains with. Every module of this package
is imported here, so a new strategy's module registers its class by being there."""
from importlib import import_module
from pkgutil import iter_modules

from .base import STRATEGIES, GenerationTask, Strategy, check_hyperparameters

for _module in iter_modules(__path__):
    import_module(f"{__name__}.{_module.name}")

from .open_es import OpenES  # noqa: E402 -- the names ``es`` exports
from .snes import SNES  # noqa: E402

__all__ = ["STRATEGIES", "GenerationTask", "Strategy", "check_hyperparameters", "OpenES", "SNES"]
