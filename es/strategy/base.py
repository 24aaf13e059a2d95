"""What every evolution strategy is to the rest of ``es``: the generation task it hands out, and
the interface ``train`` drives (``Strategy``).

A strategy owns everything that changes while a run goes on: the center, the generation, the
optimizer's state and whatever the strategy adapts itself (SNES: a sigma per parameter).
``state_dict`` gives it as named arrays and ``load_state_dict`` takes it back; checkpoints,
resume and rollback use nothing else, so a strategy with more state is saved whole without
training knowing what it holds.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import noise
from ..noise_table import check_dim
from ..optimizers import Optimizer, make_optimizer
from ..shaping import SHAPINGS, centered_ranks

STRATEGIES: dict[str, type] = {}    # --strategy name -> class; every subclass with a name registers


@dataclass(frozen=True)
class GenerationTask:
    """Everything a worker needs to evaluate any member of one generation. ``sigma``: one float
    for every parameter, or a float32 ``(dim,)`` vector (a sigma per parameter)."""
    seed: int
    generation: int
    sigma: float | np.ndarray
    antithetic: bool
    population: int
    center: np.ndarray  # float32, (dim,)
    noise: str = "seeds"   # es.noise scheme: "seeds" or "table"
    obs_norm: np.ndarray | None = None   # (2, obs_dim) float64: the frozen mean and std (es.obs_norm), or None

    def __post_init__(self):
        if np.ndim(self.sigma):   # a vector from elsewhere (a task record) must fit the center before it is used
            sigma = self.sigma
            if not (isinstance(sigma, np.ndarray) and sigma.dtype == np.float32 and sigma.shape == self.center.shape):
                raise ValueError(f"a sigma vector must be float32 of the center's shape {self.center.shape}, got "
                                 f"{getattr(sigma, 'dtype', type(sigma).__name__)} {np.shape(sigma)}")
            if not (np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
                raise ValueError("a sigma vector must be finite and positive")

    def member_params(self, members) -> np.ndarray:
        """Parameters of the given member ids, ``(len(members), dim)`` float32."""
        members = np.asarray(members, dtype=np.int64)
        if members.size and (members.min() < 0 or members.max() >= self.population):
            raise ValueError(f"member ids must lie in [0, {self.population}), got {members.min()}..{members.max()}")
        eps = noise.antithetic_noise(self.seed, self.generation, members, self.center.size, self.antithetic,
                                     self.noise)
        scale = self.sigma if np.ndim(self.sigma) else np.float32(self.sigma)
        return self.center[None, :] + scale * eps


def _population_ok(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 2


def _positive_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0


# What every strategy's population and sigma must be, as (rule, check): the options table's rows
# for them are made of these (the table lists the strategies, so it imports this module, never
# the reverse).
RULES = {"population": ("an integer >= 2", _population_ok), "sigma": ("a positive number", _positive_number)}


def check_hyperparameters(population: int, sigma: float, antithetic: bool) -> None:
    """The options table's rules for the Python API: ValueError with the reason."""
    for name, value in (("sigma", sigma), ("population", population)):
        rule, valid = RULES[name]
        if not valid(value):
            raise ValueError(f"{name} must be {rule}, got {value!r:.80}")
    if antithetic and population % 2:
        raise ValueError(f"population must be even with antithetic sampling (members come in +/- pairs), got {population}")


class Strategy:
    """Ask/tell around a search distribution centred on ``center``:

        task = strategy.ask()              # what every worker needs (a GenerationTask)
        strategy.tell(returns)             # one return per member: the next center (and sigma)
        state = strategy.state_dict()      # everything that changed, as arrays; load_state_dict(state)

    A new strategy is one subclass in its own module of this package: ``name`` (its
    ``--strategy`` value), ``summary`` (its line of ``--help``), ``tell``, and, if it adapts
    more than the center, ``state_dict``/``load_state_dict`` and ``from_config`` for its own
    rows of the options table."""
    name = ""
    summary = ""
    sigma: float | np.ndarray

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:
            STRATEGIES[cls.name] = cls

    def __init__(self, center: np.ndarray, optimizer: Optimizer, *, population: int, sigma: float, seed: int,
                 antithetic: bool = True, shaping: Callable[[np.ndarray], np.ndarray] = centered_ranks,
                 generation: int = 0, noise_scheme: str = "seeds"):
        check_hyperparameters(population, sigma, antithetic)
        if noise_scheme not in noise.SCHEMES:
            raise ValueError(f"noise must be one of {', '.join(noise.SCHEMES)}, got {noise_scheme!r}")
        if noise_scheme == "table":
            check_dim(np.asarray(center).size)
        self.noise_scheme = noise_scheme
        self.center = np.asarray(center, dtype=np.float32).copy()
        self.optimizer, self.population, self.sigma = optimizer, int(population), float(sigma)
        self.seed, self.antithetic, self.shaping, self.generation = int(seed), bool(antithetic), shaping, int(generation)

    @classmethod
    def from_config(cls, config, center: np.ndarray, **settings) -> Strategy:
        """The strategy of a run's settings (``es.config.ESConfig``), its optimizer included;
        ``settings``: a subclass's own, read from its rows of the options table."""
        optimizer = make_optimizer(config.optimizer, np.asarray(center).size, config.learning_rate, config.momentum,
                                   config.weight_decay)
        return cls(center, optimizer, population=config.population, sigma=config.sigma, seed=config.seed,
                   antithetic=config.antithetic, shaping=SHAPINGS[config.shaping], noise_scheme=config.noise,
                   **settings)

    def ask(self) -> GenerationTask:
        sigma = self.sigma.copy() if np.ndim(self.sigma) else self.sigma
        return GenerationTask(self.seed, self.generation, sigma, self.antithetic, self.population,
                              self.center.copy(), self.noise_scheme)

    def tell(self, returns) -> dict:
        """Update from the population's returns (member order); returns what the logs need."""
        raise NotImplementedError

    def weights(self, returns) -> np.ndarray:
        """The shaped returns, after checking there is one per member."""
        returns = np.asarray(returns, dtype=np.float64)
        if returns.shape != (self.population,):
            raise ValueError(f"tell() needs one return per member: expected shape ({self.population},), got {returns.shape}")
        return self.shaping(returns)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of the center (``center``), the generation (``generation``) and the optimizer's
        state (``opt_`` + its names): what a checkpoint holds."""
        return {"center": self.center.copy(), "generation": np.array(self.generation, dtype=np.int64),
                **{f"opt_{k}": np.array(v, copy=True) for k, v in self.optimizer.state_dict().items()}}

    def load_state_dict(self, state: dict) -> None:
        """Take back what ``state_dict`` gave (copies); ``ValueError`` names what is missing or wrong."""
        missing = {"center", "generation"} - set(state)
        if missing:
            raise ValueError(f"the {self.name} state lacks {', '.join(sorted(missing))}")
        center = np.asarray(state["center"])
        if center.dtype != np.float32 or center.shape != self.center.shape or not np.all(np.isfinite(center)):
            raise ValueError(f"the center must be a finite float32 vector of {self.center.size} parameters, got "
                             f"{center.dtype} {center.shape}")
        generation = np.asarray(state["generation"])
        if generation.shape != () or generation.dtype.kind not in "iu" or int(generation) < 0:
            raise ValueError(f"the generation must be a non-negative integer, got {generation!r:.60}")
        self.optimizer.load_state_dict({k[4:]: np.array(v, copy=True) for k, v in state.items() if k.startswith("opt_")})
        self.center, self.generation = center.copy(), int(generation)
