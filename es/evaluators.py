"""Evaluators turn one generation's task into returns. All of them (``LocalEvaluator`` here,
``es.parallel``, ``es.distributed``) share ``evaluate_members``, so that a member's return never
depends on where it was computed."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .interfaces import Evaluator
from .strategy import GenerationTask


@dataclass
class GenerationResult:
    returns: np.ndarray        # (population,) mean return over each member's episodes
    lengths: np.ndarray        # (population,) env steps each member used
    center_return: float       # mean return of the unperturbed center
    center_length: int
    info: dict = field(default_factory=dict)   # evaluator-specific facts for the log
    obs: tuple | None = None   # per member (population, obs_dim) sums and squares of the states it visited
                               # (es.obs_norm; the counts are ``lengths``), where the problem normalizes


class Evaluation(NamedTuple):
    """What ``evaluate_members`` found: per member, its mean return and its env steps; the
    center's mean return (``None`` if not played) and steps; ``obs``: ``None``, or per member
    the sum and the sum of squares of the states it visited, ``(members, obs_dim)`` each."""
    returns: np.ndarray
    lengths: np.ndarray
    center_return: float | None
    center_length: int
    obs: tuple | None = None


def evaluate_members(problem, task: GenerationTask, members, seeds, center_seeds=None) -> Evaluation:
    """Play ``len(seeds)`` episodes for each member id (and ``center_seeds`` for the center, in
    the same batch). A problem that normalizes observations (``task.obs_norm`` is set) plays
    with the task's frozen statistics and reports the states each member visited."""
    members = np.asarray(members, dtype=np.int64)
    seeds = np.asarray(seeds, dtype=np.int64)
    params = task.member_params(members)
    e = len(seeds)
    rows = np.repeat(np.arange(len(members)), e)
    ep_seeds = np.tile(seeds, len(members))
    if center_seeds is not None and len(center_seeds):
        params = np.vstack([params, task.center[None, :]])
        rows = np.r_[rows, np.full(len(center_seeds), len(members))]
        ep_seeds = np.r_[ep_seeds, np.asarray(center_seeds, dtype=np.int64)]
    obs = None
    if task.obs_norm is None:
        returns, lengths = problem.run_episodes(params, rows, ep_seeds)
    else:
        returns, lengths, totals, squares = problem.run_episodes(params, rows, ep_seeds, obs_norm=task.obs_norm)
    returns, lengths = np.asarray(returns, dtype=np.float64), np.asarray(lengths, dtype=np.int64)
    n = len(members) * e
    if task.obs_norm is not None:   # each member's episodes, in seed order: the same sums wherever it is played
        d = task.obs_norm.shape[1]
        obs = tuple(np.asarray(x[:n], dtype=np.float64).reshape(len(members), e, d).sum(axis=1)
                    for x in (totals, squares))
    if not np.all(np.isfinite(returns)):
        bad = int(np.flatnonzero(~np.isfinite(returns))[0])
        who = f"member {members[bad // e]}" if bad < n else "the center"
        raise FloatingPointError(f"non-finite return for {who} of generation {task.generation} "
                                 f"(run seed {task.seed}, episode seed {ep_seeds[bad]})")
    if n:
        member_returns = returns[:n].reshape(len(members), e).mean(axis=1)
        member_lengths = lengths[:n].reshape(len(members), e).sum(axis=1)
    else:   # only the center was asked for
        member_returns, member_lengths = np.zeros(0), np.zeros(0, dtype=np.int64)
    if n < len(returns):
        return Evaluation(member_returns, member_lengths, float(returns[n:].mean()), int(lengths[n:].sum()), obs)
    return Evaluation(member_returns, member_lengths, None, 0, obs)


def member_obs(task: GenerationTask, n: int) -> tuple | None:
    """Zeroed sums and squares of the states of ``n`` members, for an evaluator to fill chunk by
    chunk; None where the task does not normalize observations."""
    return None if task.obs_norm is None else tuple(np.zeros((n, task.obs_norm.shape[1])) for _ in range(2))


def put_obs(obs, a: int, b: int, part) -> None:
    """Members ``[a, b)``'s statistics into those ``member_obs`` made (nothing where there are none)."""
    if obs is not None:
        obs[0][a:b], obs[1][a:b] = part


def evaluate_center(problem, task: GenerationTask, center_seeds) -> tuple[float | None, int]:
    """The center's return and length alone (``None, 0`` without center seeds): what a master
    plays while its workers play the members."""
    if center_seeds is None or not len(center_seeds):
        return None, 0
    return evaluate_members(problem, task, [], [], center_seeds)[2:4]


class LocalEvaluator(Evaluator):
    """Every member in this process, in one batched call."""
    name = "local"

    def __init__(self, problem):
        self.problem = problem

    def evaluate(self, task: GenerationTask, seeds, center_seeds) -> GenerationResult:
        r, l, cr, cl, obs = evaluate_members(self.problem, task, np.arange(task.population), seeds, center_seeds)
        return GenerationResult(r, l, cr, cl, obs=obs)

