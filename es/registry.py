"""One registry: environments, problem kinds, policy types and commands, by name.

The core registers its own (``es.envs``) exactly as plug-ins register theirs (``es.plugins``
entry points, ``$ES_PLUGINS``), and never imports a plug-in by name. How to write one: the
course repository's docs/design.md#plug-ins.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import entry_points
from typing import Callable

from .errors import ESError


@dataclass(frozen=True)
class EnvFlag:
    """A ``train`` flag an environment adds: ``FLAG VALUE`` sets ``config.extra[key]`` (checked by
    the environment's ``check_config``; fixed once a run has started)."""
    flag: str                         # e.g. "--policy"
    key: str                          # the config.extra key it sets
    help: str
    type: Callable = str
    choices: tuple = ()


@dataclass(frozen=True)
class EnvEntry:
    name: str
    make_problem: Callable            # (ESConfig, one_thread: bool) -> problem
    defaults: dict = field(default_factory=dict)   # ESConfig settings for this environment
    aliases: tuple = ()
    title: str = ""                   # one line for the course repository's `python -m es train --help`
    check_config: Callable | None = None   # (ESConfig) -> None, raises ESError
    flags: tuple = ()                 # EnvFlag rows: this environment's own train flags


@dataclass(frozen=True)
class ProblemKind:
    from_spec: Callable               # (spec dict) -> problem
    validate_spec: Callable           # (spec dict) -> None, raises ValueError


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Callable                     # (argv list) -> exit status


_ENVS: dict[str, EnvEntry] = {}
_PROBLEMS: dict[str, ProblemKind] = {}
_POLICIES: dict[str, Callable] = {}
_COMMANDS: dict[str, Command] = {}
_loaded = False
_errors: list[str] = []


def register_env(name: str, *, make_problem, defaults: dict | None = None, aliases=(), title: str = "",
                 check_config=None, flags=()) -> None:
    defaults = dict(defaults or {})
    defaults.update(defaults.pop("train", {}))   # the nested {"hidden": ..., "train": {...}} of plug-ins before 0.2
    _ENVS[name] = EnvEntry(name, make_problem, defaults, tuple(aliases), title, check_config, tuple(flags))


def register_problem(kind: str, *, from_spec, validate_spec) -> None:
    _PROBLEMS[kind] = ProblemKind(from_spec, validate_spec)


def register_policy(type_name: str, factory) -> None:
    _POLICIES[type_name] = factory


def register_command(name: str, *, help: str, run) -> None:
    """A ``python -m es NAME ...`` command of a plug-in (in the course repository; it registers notebooks, release
    and grade): ``run(argv)`` gets the arguments after NAME and returns the exit status."""
    _COMMANDS[name] = Command(name, help, run)


def load_plugins() -> None:
    """Import every plug-in once; one that fails is remembered and named in later errors."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    targets = [(ep.name, ep.value) for ep in entry_points(group="es.plugins")]
    targets += [(t.strip(), t.strip()) for t in os.environ.get("ES_PLUGINS", "").split(",") if t.strip()]
    for name, target in targets:
        module, _, func = target.partition(":")
        try:
            getattr(import_module(module), func or "register")()
        except Exception as exc:   # a broken plug-in must not take the core down with it
            _errors.append(f"plug-in {name} ({target}) failed to load: {exc.__class__.__name__}: {exc}")


def env(name) -> EnvEntry | None:
    """The environment registered as ``name`` or with ``name`` among its aliases."""
    load_plugins()
    if name in _ENVS:
        return _ENVS[name]
    return next((e for e in _ENVS.values() if name in e.aliases), None)


def envs() -> dict[str, EnvEntry]:
    load_plugins()
    return dict(_ENVS)


def problem_kind(kind) -> ProblemKind | None:
    load_plugins()
    return _PROBLEMS.get(kind) if isinstance(kind, str) else None


def validate_spec(spec) -> None:
    """A problem spec another process wrote (a task record from the network): its kind must be
    registered (``env``, a plug-in's) and pass that kind's own check; ``ValueError`` says why.
    Nothing is imported by name: a spec can only name what is registered already (the core's
    ``env`` kind registers when ``es.envs`` is imported)."""
    if not isinstance(spec, dict):
        raise ValueError(f"problem spec must be a JSON object, got {type(spec).__name__}")
    kind = problem_kind(spec.get("kind"))
    if kind is None:
        raise ValueError(f"problem spec: kind {spec.get('kind')!r:.40} is not env or a plug-in's problem kind")
    try:
        kind.validate_spec(spec)
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"problem spec: {exc}") from None


# Sizes a spec from elsewhere may ask for (the core's and plug-ins' checks use them).
MAX_HIDDEN, MAX_LAYERS, MAX_STEPS = 4096, 8, 10 ** 6


def int_in(v, lo: int, hi: int) -> bool:
    """An integer (not a bool) in ``[lo, hi]``."""
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def layer_sizes_ok(hidden) -> bool:
    """At most ``MAX_LAYERS`` hidden layer sizes, each in ``[1, MAX_HIDDEN]``."""
    return isinstance(hidden, list) and len(hidden) <= MAX_LAYERS and all(int_in(h, 1, MAX_HIDDEN) for h in hidden)


def policy_factory(type_name: str):
    load_plugins()
    if type_name not in _POLICIES:
        raise ValueError(f"unknown policy type {type_name!r}{_hint()}")
    return _POLICIES[type_name]


def commands() -> dict[str, Command]:
    load_plugins()
    return dict(_COMMANDS)


def load_errors() -> list[str]:
    """The plug-ins that failed to load, one sentence each (a usage error names them: a flag an
    unloaded plug-in adds looks like a typo otherwise)."""
    return list(_errors)


def _hint() -> str:
    if _errors:
        return "; " + "; ".join(_errors)
    return ""


def missing(what: str) -> ESError:
    return ESError(f"{what}{_hint()}")
