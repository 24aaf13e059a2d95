"""The training loop: ask, evaluate (any evaluator), tell, log the story (center return and
rank, population statistics, update ratio), checkpoint atomically. Everything random derives
from ``(seed, generation)``, so a resumed run is bit-identical to one that never stopped."""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from . import envs, obs_norm, seeding
from .checkpoint import load_checkpoint, load_extra, parameters_sha256, save_checkpoint
from .config import ESConfig
from .errors import ESError
from .evaluators import LocalEvaluator
from .parallel import ParallelEvaluator
from .plots import plot_curve
from .strategy import STRATEGIES


@dataclass
class TrainResult:
    center: np.ndarray
    summary: dict
    metrics: list = field(default_factory=list)
    run_dir: Path | None = None


def one_blas_thread():
    """Cap BLAS at one thread while ES runs: its small matmuls sit next to environments that use
    the cores themselves (measured on 2 cores: Pong 1.5x, Redis workers 2.9x faster)."""
    return threadpool_limits(limits=1, user_api="blas")


def make_problem_for(config: ESConfig, one_thread: bool | None = None):
    """The problem of ``config``; ``one_thread`` (default: with several workers) makes each
    process step its environments on one thread."""
    one_thread = config.workers > 1 if one_thread is None else one_thread
    return envs.entry_for(config.env).make_problem(config, one_thread)


def make_evaluator(config: ESConfig, problem):
    if config.workers > 1:
        return ParallelEvaluator(problem, workers=config.workers)
    return LocalEvaluator(problem)


def make_strategy(config: ESConfig, center: np.ndarray):
    """The strategy of ``config`` (``--strategy``, with its optimizer) from ``center``: what a run
    is built from, so anything that rebuilds a run from its config builds it the same way."""
    return STRATEGIES[config.strategy].from_config(config, center)


def _initial_center(config: ESConfig, problem, resume: bool) -> np.ndarray:
    """The problem's seeded initialisation, or the parameters of ``config.init`` (a checkpoint or
    shipped agent) for a run that fine-tunes, e.g. with longer episodes. Its hash is recorded
    in the config, so the run stays reproducible from what is written down."""
    if config.init is None or resume:   # a resumed run takes its center from its own checkpoint
        return problem.initial_params(config.seed)
    center = load_checkpoint(config.init)[0]
    if center.size != problem.num_params:
        raise ESError(f"--init {config.init} has {center.size} parameters, this run's policy needs {problem.num_params}")
    digest = parameters_sha256(center)
    if config.init_sha256 is not None and config.init_sha256 != digest:
        raise ESError(f"--init {config.init} is not the file this config was made with (sha256 differs)")
    config.init_sha256 = digest
    return center


def _prepare_run_dir(run_dir: Path, resume: bool) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ESError(f"cannot write to run directory {run_dir}: {exc.strerror or exc}") from None
    has_ckpt = (run_dir / "checkpoint.npz").exists()
    if resume and not has_ckpt:
        raise ESError(f"nothing to resume: {run_dir / 'checkpoint.npz'} does not exist")
    if not resume and has_ckpt:
        raise ESError(f"{run_dir} already holds a run (checkpoint.npz); pass --resume {run_dir} to continue it "
                      "or choose another --out")


# ---- rollback and replay: an evaluator that learns late that results it gave were lies (a
# Redis worker banned after its lies were used) names the first generation they touched; the
# run returns to the state before it and plays the generations since again, so that it equals
# the run in which the liar never lied. The state before each such generation is kept (in
# memory and in the checkpoint) while a later ban could still need it.
STATE_KEYS = ("streak", "env_steps", "finished", "restarts", "attempt_from", "best_mark", "best_mark_at")
# Kept in checkpoints since restarts were added; a checkpoint written before has none of them.
LATER_KEYS = {"restarts": 0, "attempt_from": 0, "best_mark": None, "best_mark_at": 0}


def _snapshot(strategy, stats, state, metrics) -> dict:
    return {"strategy": strategy.state_dict(), "stats": None if stats is None else stats.to_array(),
            "state": {k: state[k] for k in STATE_KEYS}, "metrics": len(metrics)}


def _history_arrays(history: dict) -> tuple[dict, list]:
    """The snapshots as arrays for the checkpoint (``x_`` keys: ``history_`` + each name of the
    strategy's state, stacked over generations) and their JSON part."""
    gens = sorted(history)
    if not gens:
        return {}, []
    arrays = {"history_generation": np.array(gens, dtype=np.int64)}
    for k in history[gens[0]]["strategy"]:
        if k != "generation":     # the generation is the snapshot's own key
            arrays[f"history_{k}"] = np.stack([history[g]["strategy"][k] for g in gens])
    meta = [{"state": history[g]["state"], "metrics": history[g]["metrics"],
             "stats": None if history[g]["stats"] is None else history[g]["stats"].tolist()} for g in gens]
    return arrays, meta


def _history_from(arrays: dict, meta: list) -> dict:
    if "history_generation" not in arrays:
        return {}
    gens = [int(g) for g in arrays["history_generation"]]
    if len(gens) != len(meta):
        raise ESError("the checkpoint's rollback history is inconsistent")
    keys = [k[len("history_"):] for k in arrays if k.startswith("history_") and k != "history_generation"]
    return {g: {"strategy": {"generation": np.array(g, dtype=np.int64),
                             **{k: arrays[f"history_{k}"][i].copy() for k in keys}},
                "stats": None if meta[i]["stats"] is None else np.array(meta[i]["stats"], dtype=np.float64),
                "state": meta[i]["state"], "metrics": int(meta[i]["metrics"])} for i, g in enumerate(gens)}


def _checkpoint_parts(strategy_state: dict) -> tuple[np.ndarray, dict, dict]:
    """A strategy's state as a checkpoint holds it: the center, the optimizer's arrays, and the
    rest as ``strategy_`` extra arrays (the generation goes in the header)."""
    opt = {k[len("opt_"):]: v for k, v in strategy_state.items() if k.startswith("opt_")}
    rest = {f"strategy_{k}": v for k, v in strategy_state.items()
            if k not in ("center", "generation") and not k.startswith("opt_")}
    return strategy_state["center"], opt, rest


def _strategy_state(center, meta: dict, opt: dict, extra: dict) -> dict:
    """What ``_checkpoint_parts`` split, joined again (a checkpoint of a strategy without state of
    its own, such as every checkpoint OpenES wrote, has no ``strategy_`` arrays)."""
    return {"center": center, "generation": np.array(meta["generation"], dtype=np.int64),
            **{f"opt_{k}": v for k, v in opt.items()},
            **{k[len("strategy_"):]: v for k, v in extra.items() if k.startswith("strategy_")}}


def _center_rank(center_return, returns) -> int:
    """1 = the center beat every member; population + 1 = it was the worst."""
    return int(np.sum(np.asarray(returns) > center_return)) + 1


def load_run_config(run_dir: Path) -> ESConfig:
    try:
        return ESConfig.from_dict(json.loads((Path(run_dir) / "config.json").read_text()))
    except FileNotFoundError:
        raise ESError(f"{run_dir} has no config.json; is it a run directory?") from None
    except (json.JSONDecodeError, TypeError) as exc:
        raise ESError(f"{run_dir}/config.json is corrupt: {exc}") from None


def train(config: ESConfig, problem=None, *, run_dir=None, resume: bool = False, evaluator=None,
          progress: bool = False, final_eval: bool = True, on_generation=None) -> TrainResult:
    """Train ``config`` to its stopping rule. ``run_dir=None`` keeps everything in memory."""
    config.validate()
    run_dir = Path(run_dir) if run_dir is not None else None
    if run_dir is not None:
        _prepare_run_dir(run_dir, resume)
    problem = problem if problem is not None else make_problem_for(config)
    strategy = make_strategy(config, _initial_center(config, problem, resume))
    # restarts, attempt_from: how often the run started again, and at which env step; best_mark,
    # best_mark_at: the attempt's best center return when it last rose by stall_gain, and the env step
    state = {"streak": 0, "env_steps": 0, "train_seconds": 0.0, "finished": None, **LATER_KEYS}
    # The states the members visited (a problem that normalizes observations): frozen within a
    # generation, merged after it in member order, so the same for any evaluator (es.obs_norm).
    stats = obs_norm.ObsStats.empty(problem.obs_dim) if problem.obs_dim else None
    metrics: list[dict] = []
    history: dict = {}        # generation -> the state before it, while a rollback may need it
    rollbacks: list[dict] = []
    audit_state = None
    held_out = None           # the goal check that stopped the run: the final check, already played
    if run_dir is not None and resume:
        center, meta, opt_state = load_checkpoint(run_dir / "checkpoint.npz")
        extra = load_extra(run_dir / "checkpoint.npz")
        history = _history_from(extra, meta.get("history", []))
        audit_state, rollbacks = meta.get("audit"), meta.get("rollbacks", [])
        if center.size != problem.num_params:
            raise ESError(f"{run_dir}: checkpoint has {center.size} parameters, the problem needs {problem.num_params}")
        if meta.get("strategy", "openes") != strategy.name:    # checkpoints before SNES were all OpenES's
            raise ESError(f"{run_dir}: the checkpoint is of strategy {meta.get('strategy')!r}, "
                          f"this run's is {strategy.name!r}")
        try:
            strategy.load_state_dict(_strategy_state(center, meta, opt_state, extra))
        except (ValueError, KeyError) as exc:
            raise ESError(f"{run_dir}: the checkpoint's strategy state is invalid: {exc}") from None
        state.update({k: meta.get(k, LATER_KEYS[k]) if k in LATER_KEYS else meta[k] for k in state})
        if stats is not None:
            try:
                stats = obs_norm.ObsStats.from_array(meta["obs_stats"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ESError(f"{run_dir}: the checkpoint lacks valid observation statistics ({exc})") from None
        if state["finished"] == "generations":
            state["finished"] = None  # a generation limit is not an end: --generations may have grown
        done = strategy.generation + (1 if state["finished"] == "goal" else 0)
        metrics = _read_metrics(run_dir / "metrics.jsonl", done)
    if run_dir is not None:
        (run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        _write_metrics(run_dir / "metrics.jsonl", metrics)

    own_evaluator = evaluator is None
    evaluator = evaluator or make_evaluator(config, problem)
    audit = getattr(evaluator, "rollback", None)     # None: this evaluator never learns of lies late
    if audit is not None and audit_state is not None:
        evaluator.load_audit_state(audit_state)
    replaying = -1            # generations up to this one are played a second time
    bar = _progress_bar(config, strategy.generation) if progress else None
    n_seeds = max(config.episodes_per_member, config.center_episodes)
    blas = one_blas_thread()
    blas.__enter__()
    startup = 0.0
    try:
        t0 = time.perf_counter()    # workers started and warm before the first generation is timed
        evaluator.warm_up(config.population, config.episodes_per_member, config.center_episodes)
        startup = time.perf_counter() - t0
        while state["finished"] is None and strategy.generation < config.generations:
            t0 = time.perf_counter()
            g = strategy.generation
            restarted = _restart_reason(config, state)
            if restarted:
                stats = _restart(strategy, config, problem, stats, state)
                print(f"restart {state['restarts']}: {restarted[1]}; generation {g} starts again from the first "
                      "center", file=sys.stderr)
            if audit is not None:
                history[g] = _snapshot(strategy, stats, state, metrics)
            task = strategy.ask()
            if stats is not None:
                task = replace(task, obs_norm=np.stack(obs_norm.mean_std(stats)))
            seeds = seeding.episode_seeds(config.seed, g, n_seeds)
            res = evaluator.evaluate(task, seeds[:config.episodes_per_member], seeds[:config.center_episodes])
            if stats is not None:
                stats = obs_norm.merge(stats, obs_norm.from_members(res.lengths, *res.obs))
            # The center's score: the environment's own return (a shifted training fitness shifted back).
            score = problem.score(res.center_return, res.center_length / config.center_episodes)
            hit = config.reward_goal is not None and score >= config.reward_goal
            if hit and evaluator.untrusted:
                # A return reported over the network stops the run only if this process agrees.
                res.center_return = evaluator.verify_center(seeds[:config.center_episodes], res.center_return)
                score = problem.score(res.center_return, res.center_length / config.center_episodes)
                hit = score >= config.reward_goal
            back = audit() if audit is not None else None
            if back is not None:       # a ban: results used since generation back[0] were a liar's
                g0, ids = back
                if g0 not in history:   # e.g. a checkpoint of a version that kept no states
                    raise ESError(f"worker(s) {', '.join(ids)} were banned and their results were used since "
                                  f"generation {g0}, but the state before it was not kept: the run cannot be "
                                  "replayed without them; start it again from an earlier checkpoint")
                snap = history[g0]
                strategy.load_state_dict(snap["strategy"])
                stats = None if snap["stats"] is None else obs_norm.ObsStats.from_array(snap["stats"])
                state.update(snap["state"])
                del metrics[snap["metrics"]:]
                history = {k: v for k, v in history.items() if k <= g0}
                rollbacks.append({"banned": ids, "found_in_generation": g, "back_to_generation": g0,
                                  "replayed": list(range(g0, g + 1))})
                replaying = max(replaying, g)
                print(f"rollback: worker(s) {', '.join(ids)} banned in generation {g}; generations {g0}..{g} are "
                      f"played again without their results", file=sys.stderr)
                state["train_seconds"] += time.perf_counter() - t0    # the time lost counts
                if run_dir is not None:
                    _write_metrics(run_dir / "metrics.jsonl", metrics)
                    _save(run_dir, strategy, config, problem, state, time.perf_counter(), stats,
                          history={k: v for k, v in history.items() if k < g0}, evaluator=evaluator, rollbacks=rollbacks)
                if bar is not None:
                    bar.n = g0
                    bar.refresh()
                continue
            check = None      # (returns, lengths) of the held-out episodes, where confirm_goal looked
            if hit and config.confirm_goal and state["streak"] + 1 >= config.consecutive_goal_stopping:
                check = _goal_check(problem, strategy.center, stats, config)
                hit = float(np.mean(check[0])) >= _solve_threshold(config)
            state["streak"] = state["streak"] + 1 if hit else 0
            info = {"grad_norm": None, "update_ratio": None}
            if state["streak"] >= config.consecutive_goal_stopping:
                # Keep the center that reached the goal: no update after the last check.
                state["finished"] = "goal"
                held_out = check
            else:
                info = strategy.tell(res.returns)
            gen_steps = int(res.lengths.sum()) + int(res.center_length) + (int(np.sum(check[1])) if check else 0)
            state["env_steps"] += gen_steps
            if state["best_mark"] is None or score >= state["best_mark"] + config.stall_gain:
                state.update(best_mark=score, best_mark_at=state["env_steps"])
            row = {"generation": g, "center_return": score,
                   "pop_mean": float(res.returns.mean()), "pop_max": float(res.returns.max()),
                   "pop_min": float(res.returns.min()), "pop_std": float(res.returns.std()),
                   "center_rank": _center_rank(res.center_return, res.returns), **info, **res.info,
                   "env_steps": state["env_steps"], "gen_env_steps": gen_steps}
            if restarted:
                row["restart"] = state["restarts"]
                row["restart_reason"] = restarted[0]
            if check is not None:    # the held-out mean that decided whether the run stops here
                row["goal_check"] = float(np.mean(check[0]))
            if score != res.center_return:   # what the members' returns compare with (pop_*, center_rank)
                row["center_fitness"] = res.center_return
            if config.record_returns:   # what tell() was given: with the seed, it replays the run (pong.student)
                row["returns"] = [float(r) for r in res.returns]
            if g <= replaying:
                row["replayed"] = True
            if rollbacks and rollbacks[-1]["back_to_generation"] == g and rollbacks[-1].get("row") is None:
                rollbacks[-1]["row"] = True
                row["rollback"] = {k: v for k, v in rollbacks[-1].items() if k != "row"}
            if audit is not None:      # what a later ban may need: the states since the oldest unchecked result
                oldest = evaluator.oldest_unchecked()
                history = {k: v for k, v in history.items() if oldest is not None and k >= oldest}
            if state["finished"] is None and strategy.generation >= config.generations:
                state["finished"] = "generations"
            if run_dir is not None:
                _append_metrics(run_dir / "metrics.jsonl", row, t0, state)
                _save(run_dir, strategy, config, problem, state, t0, stats, history=history,
                      evaluator=evaluator if audit is not None else None, rollbacks=rollbacks)
            else:
                state["train_seconds"] += time.perf_counter() - t0
            row["seconds"] = time.perf_counter() - t0
            row["train_seconds"] = state["train_seconds"]
            metrics.append(row)
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"center {score:.1f} | pop {row['pop_mean']:.1f}/{row['pop_max']:.1f}"
                                    f" | {gen_steps / max(row['seconds'], 1e-9):,.0f} steps/s", refresh=False)
            if on_generation is not None:
                on_generation(row)
    finally:
        blas.__exit__(None, None, None)
        if bar is not None:
            bar.close()
        if own_evaluator:
            evaluator.close()
        problem.close()

    summary = {"env": config.env, "strategy": strategy.name, "seed": config.seed,
               "generations": strategy.generation if state["finished"] != "goal" else strategy.generation + 1,
               "stopped": state["finished"] or "generations",
               "train_seconds": state["train_seconds"], "startup_seconds": startup,
               "env_steps": state["env_steps"],
               "num_params": problem.num_params, "workers": config.workers}
    if config.restart_steps is not None or config.stall_steps is not None:
        summary["restarts"] = state["restarts"]
    if audit is not None:      # who was banned, and which generations were played again because of it
        summary["banned"] = dict(getattr(evaluator, "banned", {}))
        summary["rollbacks"] = [{k: v for k, v in r.items() if k != "row"} for r in rollbacks]
    if stats is not None:      # the statistics the next generation would have used go with the center
        problem.obs_norm = np.stack(obs_norm.mean_std(stats))
    if final_eval:
        eval_seeds = _eval_seeds(config)
        returns = held_out[0] if held_out is not None else problem.play(strategy.center, eval_seeds)[0]
        summary.update(eval_mean=float(np.mean(returns)), eval_std=float(np.std(returns)),
                       eval_episodes=config.eval_episodes, eval_seeds=[int(eval_seeds[0]), int(eval_seeds[-1])])
        threshold = _solve_threshold(config)
        summary["solve_threshold"] = threshold
        summary["solved"] = bool(threshold is not None and summary["eval_mean"] >= threshold)
    if run_dir is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if metrics:
            plot_curve(metrics, run_dir / "curve.png", title=f"{config.env} (seed {config.seed})",
                       goal=config.reward_goal)
    return TrainResult(strategy.center, summary, metrics, run_dir)


def _restart_reason(config: ESConfig, state: dict) -> tuple[str, str] | None:
    """Why the next generation starts again, as (kind, sentence), or None."""
    if config.restart_steps is not None and state["env_steps"] - state["attempt_from"] >= config.restart_steps:
        return "budget", f"no goal in {config.restart_steps:,} env steps"
    if config.stall_steps is not None and state["env_steps"] - state["best_mark_at"] >= config.stall_steps:
        return "stall", (f"the attempt's best center return rose less than {config.stall_gain:g} in "
                         f"{config.stall_steps:,} env steps")
    return None


def _restart(strategy, config: ESConfig, problem, stats, state: dict):
    """``restart_steps``, ``stall_steps``: the first center, a fresh optimizer and fresh observation
    statistics at the next generation. Noise and episodes derive from (seed, generation), and the generation
    goes on, so the new attempt is a fresh draw that a resumed or replayed run draws the same."""
    fresh = make_strategy(config, _initial_center(config, problem, False)).state_dict()
    fresh["generation"] = np.array(strategy.generation, dtype=np.int64)
    strategy.load_state_dict(fresh)
    state.update(restarts=state["restarts"] + 1, attempt_from=state["env_steps"], streak=0, best_mark=None,
                 best_mark_at=state["env_steps"])
    return None if stats is None else obs_norm.ObsStats.empty(problem.obs_dim)


def _solve_threshold(config: ESConfig):
    return config.solve_threshold if config.solve_threshold is not None else config.reward_goal


def _eval_seeds(config: ESConfig) -> np.ndarray:
    return np.arange(config.eval_seed, config.eval_seed + config.eval_episodes)


def _goal_check(problem, center, stats, config: ESConfig) -> tuple[np.ndarray, np.ndarray]:
    """``confirm_goal``: the center's returns and episode lengths over the final check's episodes,
    with the statistics the final check would use (this generation's merged in), so a run that
    stops here has passed its final check already. One lucky set of 5 episodes may carry a
    center over the line (Hopper's crossed 3,120 and averaged 3,114 on held-out ones)."""
    saved = problem.obs_norm if stats is not None else None
    if stats is not None:
        problem.obs_norm = np.stack(obs_norm.mean_std(stats))
    try:
        returns, lengths = problem.play(center, _eval_seeds(config))
    finally:
        if stats is not None:
            problem.obs_norm = saved
    return returns, lengths


def _save(run_dir, strategy, config, problem, state, t0, stats=None, history=None, evaluator=None,
          rollbacks=()):
    # The time of this generation counts up to and including its checkpoint.
    state["train_seconds"] += time.perf_counter() - t0
    center, opt, own = _checkpoint_parts(strategy.state_dict())
    meta = {"generation": strategy.generation, "strategy": strategy.name, "num_params": problem.num_params,
            "problem": problem.spec(), "config": config.to_dict(), **state}
    if stats is not None:     # JSON floats round-trip exactly: a resumed run goes on bit-identical
        meta["obs_stats"] = stats.to_array().tolist()
    extra, meta_history = _history_arrays(history or {})
    if evaluator is not None:   # what a rollback after a resume needs: the states, and which ids touched them
        meta.update(history=meta_history, audit=evaluator.audit_state(),
                    rollbacks=[{k: v for k, v in r.items() if k != "row"} for r in rollbacks])
    save_checkpoint(run_dir / "checkpoint.npz", center, meta, opt, {**extra, **own})


def _append_metrics(path, row, t0, state):
    row = {**row, "seconds": time.perf_counter() - t0, "train_seconds": state["train_seconds"] + time.perf_counter() - t0}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def _write_metrics(path, rows):
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def _read_metrics(path, before_generation: int) -> list[dict]:
    """Metrics up to the checkpoint; lines of a generation that was in flight are dropped."""
    rows = []
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            if row.get("generation", 1 << 60) < before_generation:
                rows.append(row)
    return rows


def _progress_bar(config, initial):
    return tqdm(total=config.generations, initial=initial, desc=f"ES {config.env}", unit="gen",
                file=sys.stderr, dynamic_ncols=True)
