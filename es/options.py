"""Every training setting once, as in pycma's options table: default, valid values, help text,
flag. ``ESConfig`` takes its fields and checks from here, ``python -m es train`` its flags and
``--help``. An environment's registered defaults override the default; flags override both."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

from .noise import SCHEMES
from .optimizers import OPTIMIZERS
from .shaping import SHAPINGS
from .strategy import STRATEGIES
from .strategy.base import RULES


def is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Option:
    name: str
    default: object
    help: str
    rule: str = ""                     # what a valid value is, for the error message
    check: Callable = lambda v: True   # valid(value) -> bool
    choices: tuple = ()
    flag_type: Callable | None = None  # how the CLI parses it; None: not a plain --flag
    resumable: bool = False            # may change on --resume without changing the run's trajectory

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def valid(self, value) -> bool:
        return (value in self.choices) if self.choices else bool(self.check(value))

    def message(self, value, flag: bool = True) -> str:
        """What is wrong with ``value``, naming the CLI flag (or, for the Python API, the argument)."""
        rule = self.rule or f"one of {', '.join(self.choices)}"
        return f"{self.flag if flag else self.name} must be {rule}, got {value!r:.80}"


def _positive(v) -> bool:
    return is_number(v) and v > 0


def _at_least(n):
    return lambda v: is_int(v) and v >= n


def _optional(check):
    return lambda v: v is None or check(v)


OPTIONS: dict[str, Option] = {o.name: o for o in [
    Option("env", "cartpole", "environment name or gymnasium id", "a name", lambda v: isinstance(v, str) and v != ""),
    Option("seed", 0, "run seed: every random number of the run derives from it", "a non-negative integer",
           lambda v: is_int(v) and 0 <= v < 2 ** 63, flag_type=int),
    Option("strategy", "openes", "evolution strategy: " + "; ".join(f"{n}: {c.summary}" for n, c in STRATEGIES.items()),
           choices=tuple(STRATEGIES), flag_type=str),
    Option("population", 64, "members per generation (even with antithetic sampling)", *RULES["population"],
           flag_type=int),
    Option("sigma", 0.1, "standard deviation of the parameter noise (snes: where every parameter's starts)",
           *RULES["sigma"], flag_type=float),
    Option("sigma_learning_rate", None, "snes: step size of log sigma (default (3 + ln d) / (5 sqrt d), d parameters)",
           "a positive number", _optional(_positive), flag_type=float),
    Option("learning_rate", 0.05, "optimizer step size", "a positive number", _positive, flag_type=float),
    Option("optimizer", "adam", "gradient ascent rule", choices=tuple(OPTIMIZERS), flag_type=str),
    Option("momentum", 0.9, "SGD momentum", "in [0, 1)", lambda v: is_number(v) and 0 <= v < 1, flag_type=float),
    Option("weight_decay", 0.0, "L2 penalty on the parameters (folded into the gradient, not the fitness)",
           "a number >= 0", lambda v: is_number(v) and v >= 0, flag_type=float),
    Option("antithetic", True, "mirrored sampling: members 2k and 2k+1 are +eps_k and -eps_k", "true or false",
           lambda v: isinstance(v, bool)),
    Option("noise", "seeds", "seeds: noise drawn from seeded generators; table: slices of a shared 128 MiB table "
           "(for large populations and networks)", choices=SCHEMES, flag_type=str),
    Option("shaping", "centered_ranks", "fitness shaping", choices=tuple(SHAPINGS), flag_type=str),
    Option("generations", 200, "maximum number of generations", "an integer >= 1", _at_least(1), flag_type=int,
           resumable=True),
    Option("episodes_per_member", 1, "episodes averaged per member", "an integer >= 1", _at_least(1),
           flag_type=int),
    Option("center_episodes", 1, "episodes of the unperturbed center each generation", "an integer >= 1",
           _at_least(1), flag_type=int),
    Option("reward_goal", None, "stop once the center's mean return reaches this ...", "a number",
           _optional(is_number), flag_type=float),
    Option("consecutive_goal_stopping", 1, "... for this many generations in a row", "an integer >= 1",
           _at_least(1), flag_type=int),
    Option("confirm_goal", False, "... and only if the center's mean over the final check's episodes (seeds "
           "eval_seed.., never trained on) also reaches solve_threshold", "true or false",
           lambda v: isinstance(v, bool)),
    Option("restart_steps", None, "start again from the first center, with a fresh optimizer and observation "
           "statistics, when an attempt has used this many env steps without stopping at the goal (the "
           "generations go on, so it draws noise and episodes it never drew)", "a positive integer",
           _optional(_at_least(1)), flag_type=int),
    Option("stall_steps", None, "start again as restart_steps does when the attempt's best center return has "
           "not risen by stall_gain within this many env steps (a plateau; IPOP-CMA-ES restarts on "
           "stagnation too)", "a positive integer", _optional(_at_least(1)), flag_type=int),
    Option("stall_gain", 0.0, "the rise of the attempt's best center return that resets stall_steps' count",
           "a non-negative number", lambda v: is_number(v) and v >= 0, flag_type=float),
    Option("solve_threshold", None, "final eval mean that counts as solved (default: the reward goal)",
           "a number", _optional(is_number), flag_type=float, resumable=True),
    Option("hidden", [16], "hidden layer sizes of the MLP policy ([] = linear)", "a list of positive layer sizes",
           lambda v: isinstance(v, list) and all(is_int(h) and h >= 1 for h in v)),
    Option("max_steps", None, "cap on episode length", "a positive integer", _optional(_at_least(1)),
           flag_type=int),
    Option("eval_episodes", 20, "episodes of the final check (seeds eval_seed..)", "an integer >= 1",
           _at_least(1), flag_type=int, resumable=True),
    Option("eval_seed", 1000, "first seed of the final check", "a non-negative integer",
           lambda v: is_int(v) and v >= 0, flag_type=int, resumable=True),
    Option("workers", 1, "processes evaluating the population (1 = this process)", "an integer >= 1",
           _at_least(1), flag_type=int, resumable=True),
    Option("init", None, "start from these parameters (fine-tuning)", "a path", _optional(lambda v: isinstance(v, str))),
    Option("init_sha256", None, "sha256 of the --init parameters, recorded when the run starts", "a hex digest",
           _optional(lambda v: isinstance(v, str))),
    Option("extra", {}, "problem-specific settings (e.g. Pong's policy)", "a JSON object",
           lambda v: isinstance(v, dict)),
    Option("record_returns", False, "write each generation's member returns to metrics.jsonl (replayable)",
           "true or false", lambda v: isinstance(v, bool)),
]}


def defaults() -> dict:
    """Fresh copies of every default (lists and dicts are never shared between configs)."""
    return {name: (list(o.default) if isinstance(o.default, list) else
                   dict(o.default) if isinstance(o.default, dict) else o.default) for name, o in OPTIONS.items()}
