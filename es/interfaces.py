"""The three roles every part of ES plays, declared (``typing.Protocol``) instead of probed.
Concrete classes subclass them (and get the defaults below); anything with the same methods
also type-checks as the role."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Policy(Protocol):
    """Maps observations to actions for many parameter vectors at once: ``unflatten`` turns a
    ``(rows, num_params)`` matrix into per-row layers, ``forward(layers, obs)`` gives row ``r``'s
    action for ``obs[r]``, so a result never depends on the batch it was computed in."""
    num_params: int
    discrete: bool

    def spec(self) -> dict: ...
    def initial_params(self, seed: int) -> np.ndarray: ...
    def unflatten(self, params: np.ndarray) -> list: ...
    def forward(self, layers: list, obs: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class Problem(Protocol):
    """What ES optimises: parameters -> returns. ``run_episodes(params, rows, seeds)`` plays one
    episode per ``(params[rows[k]], seeds[k])`` and returns ``(returns, lengths)``; the outcome is
    a pure function of the parameters and the seed. ``spec()`` is JSON from which any process
    rebuilds the problem (``es.envs.make_problem``)."""
    chunks_per_worker = 3             # 1: a generation is one array computation, cut into one chunk per
                                      # worker (CartPole's batch); else chunks shrink towards the end of a
                                      # generation (course repository: es.parallel.guided_bounds), so workers finish together
    episode_cap: int | None = None    # most env steps one episode can take (None: no bound known)
    obs_dim: int = 0                  # > 0: the policy sees normalized observations (course repository: es.obs_norm):
                                      # run_episodes(..., obs_norm=(2, obs_dim) mean and std) also returns
                                      # each episode's state sums and squares, and play() uses ``obs_norm``
    obs_norm: np.ndarray | None = None   # the frozen (mean, std) that play() uses, where obs_dim > 0

    @property
    def num_params(self) -> int: ...
    def spec(self) -> dict: ...
    def initial_params(self, seed: int) -> np.ndarray: ...
    def run_episodes(self, params: np.ndarray, rows, seeds) -> tuple[np.ndarray, np.ndarray]: ...
    def play(self, params: np.ndarray, seeds) -> tuple[np.ndarray, np.ndarray]: ...

    def score(self, fitness: float, steps: float) -> float:
        """The environment's own return of an episode whose training fitness was ``fitness`` in
        ``steps`` steps: the same, unless the problem trains on a shifted return (locomotion)."""
        return fitness

    def warm_up(self, episodes: int) -> None:
        """Build now what playing ``episodes`` episodes at once would build on first use
        (environments, emulators), so that a generation's timing starts warm."""

    def close(self) -> None:
        """Release environments, threads and processes."""


@runtime_checkable
class Evaluator(Protocol):
    """Turns one generation's task into returns, wherever members are evaluated (this process,
    joblib workers, Redis workers, a Dask cluster). ``untrusted``: returns came over a network,
    so ``train`` asks ``verify_center`` before a goal stops the run."""
    name: str
    untrusted: bool = False   # every evaluator declares it (subclassing gives the default)

    def evaluate(self, task, seeds, center_seeds):
        """``task``: an ``es.strategy.GenerationTask``; returns an ``es.evaluators.GenerationResult`` (both in
        the course repository)."""

    def warm_up(self, population: int, episodes: int, center_episodes: int) -> None:
        """Start the workers and build the problem in each before the first generation is timed
        (``train`` calls it once; generations of ``population`` members of ``episodes`` episodes)."""

    def verify_center(self, center_seeds, reported: float) -> float:
        return reported

    def close(self) -> None:
        """Stop workers and free what the evaluator holds."""
