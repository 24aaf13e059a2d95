"""es-course: OpenAI-style Evolution Strategies in pure NumPy.

Reading order follows the course: ``noise`` (perturbations from seeds) -> ``shaping`` ->
``optimizers`` -> ``strategy`` (ask/tell OpenES) -> ``policies`` -> ``envs`` (problems) ->
``evaluators`` -> ``train``.
"""
from .config import ESConfig, config_for
from .errors import ESError
from .optimizers import SGD, Adam
from .shaping import centered_ranks, raw, z_score
from .strategy import GenerationTask, OpenES
from .api import optimize
from .train import TrainResult, train

__all__ = ["ESConfig", "config_for", "ESError", "SGD", "Adam", "centered_ranks", "z_score", "raw", "OpenES",
           "GenerationTask", "train", "TrainResult", "optimize"]
__version__ = "0.1.0"
