"""Environments ES can train on, by short name or any gymnasium id. The core's register in
``es.registry`` as plug-ins do; ``entry_for`` answers every question about an environment and
``make_problem(spec)`` rebuilds every problem a worker is sent."""
from __future__ import annotations

import gymnasium as gym

from .. import registry
from ..errors import ESError
from .problems import EnvProblem, FunctionProblem

__all__ = ["EnvProblem", "FunctionProblem", "entry_for", "make_problem", "rebuildable", "allowed_env_id"]

# Short names and the settings that make each one train well on defaults.
CORE = {
    # CartPole: a linear policy, a large population (a generation costs its longest episode,
    # not its size) and z-score shaping (returns are bounded, and 500 vs 60 is information
    # that centered ranks would flatten). Chosen by sweeps over 10 and 20 seeds (20/20 solved).
    # It stops when the center scores a perfect 500 on 16 check episodes; a 475 stop on 4
    # episodes passed the 20-seed test on only 18/20 seeds.
    "cartpole": ("CartPole-v1", {"hidden": [], "population": 256, "sigma": 0.2, "learning_rate": 0.3,
                                 "optimizer": "sgd", "momentum": 0.0, "shaping": "z_score", "generations": 100,
                                 "reward_goal": 500.0, "center_episodes": 16, "solve_threshold": 475.0,
                                 "eval_seed": 1000}),
    "acrobot": ("Acrobot-v1", {"hidden": [16], "population": 32, "sigma": 0.1, "learning_rate": 0.05,
                               "generations": 100, "reward_goal": -100.0, "eval_seed": 0}),
    "pendulum": ("Pendulum-v1", {"hidden": [16], "population": 64, "sigma": 0.1, "learning_rate": 0.05,
                                 "generations": 300, "reward_goal": -200.0, "eval_seed": 0}),
}
GYM_DEFAULTS = {"hidden": [16], "eval_seed": 0}   # any other registered gymnasium id


def _env_problem(env_id: str):
    return lambda config, one_thread: EnvProblem(env_id, config.hidden, config.max_steps)


# What a worker agrees to build from a spec it did not write: nothing is imported by name,
# sizes are bounded (the registry's limits; plug-ins import them from here).
MAX_HIDDEN, MAX_LAYERS, MAX_STEPS = registry.MAX_HIDDEN, registry.MAX_LAYERS, registry.MAX_STEPS
int_in, layer_sizes_ok = registry.int_in, registry.layer_sizes_ok


def _validate_env_spec(spec: dict) -> None:
    if not allowed_env_id(spec.get("env_id")):
        raise ValueError(f"env_id {spec.get('env_id')!r:.60} is neither a known environment nor a registered "
                         "gymnasium id (module:Env imports are never allowed)")
    if not layer_sizes_ok(spec.get("hidden", [])):
        raise ValueError(f"hidden must be at most {MAX_LAYERS} sizes in [1, {MAX_HIDDEN}]")
    if spec.get("max_steps") is not None and not int_in(spec["max_steps"], 1, MAX_STEPS):
        raise ValueError(f"max_steps must be an integer in [1, {MAX_STEPS}], got {spec['max_steps']!r:.40}")


for _name, (_env_id, _defaults) in CORE.items():
    registry.register_env(_name, make_problem=_env_problem(_env_id), defaults=_defaults, aliases=(_env_id,),
                          title=_env_id)
registry.register_problem("env", validate_spec=_validate_env_spec,
                          from_spec=lambda s: EnvProblem(s["env_id"], s.get("hidden", (16,)), s.get("max_steps")))


def is_registered(env_id: str) -> bool:
    """A gymnasium id (Atari ones included) that ``gym.make`` can build without importing
    anything by name (``module:Env`` ids are refused)."""
    if ":" in env_id:
        return False
    try:
        import ale_py          # optional: Atari ids exist only with it
        gym.register_envs(ale_py)
    except ImportError:
        pass
    return env_id in gym.registry


def allowed_env_id(env_id) -> bool:
    """May a worker build this environment from a spec that came over the network? A core
    environment or a registered gymnasium id; never ``module:Env`` (gymnasium would import it)."""
    if not isinstance(env_id, str) or ":" in env_id or len(env_id) > 100:
        return False
    return any(env_id == e for e, _ in CORE.values()) or is_registered(env_id)


def entry_for(name: str) -> registry.EnvEntry:
    """The registry's entry for a short name, an alias or a registered gymnasium id."""
    entry = registry.env(name)
    if entry is not None:
        return entry
    if isinstance(name, str) and is_registered(name):
        return registry.EnvEntry(name, _env_problem(name), dict(GYM_DEFAULTS), title=name)
    raise registry.missing(f"unknown environment {name!r}: not one of {', '.join(registry.envs())} and not a "
                           "registered gymnasium id")


def make_problem(spec: dict):
    """Rebuild a problem from its JSON spec (what a worker receives)."""
    kind = registry.problem_kind(spec.get("kind"))
    if kind is None:
        raise registry.missing(f"cannot rebuild a problem of kind {spec.get('kind')!r} from its spec")
    try:
        return kind.from_spec(spec)
    except (KeyError, TypeError) as exc:
        raise ESError(f"a {spec.get('kind')} problem spec lacks or mistypes {exc}") from None


def rebuildable(spec: dict) -> bool:
    """A spec any process can rebuild the problem from (not a Python function)."""
    return not spec.get("local_only") and registry.problem_kind(spec.get("kind")) is not None
