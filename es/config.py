"""Training settings: one dataclass, validated with messages a user can act on."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from .errors import ESError
from .optimizers import OPTIMIZERS
from .shaping import SHAPINGS


@dataclass
class ESConfig:
    env: str = "cartpole"
    seed: int = 0
    population: int = 64
    sigma: float = 0.1
    learning_rate: float = 0.05
    optimizer: str = "adam"
    momentum: float = 0.9
    weight_decay: float = 0.0
    antithetic: bool = True
    noise: str = "seeds"   # "seeds" (a generator per block of pairs) or "table" (shared table, es.noise_table)
    shaping: str = "centered_ranks"
    generations: int = 200
    episodes_per_member: int = 1
    center_episodes: int = 1
    reward_goal: float | None = None
    solve_threshold: float | None = None   # "solved" = final eval mean >= this (default: reward_goal)
    consecutive_goal_stopping: int = 1
    hidden: list = field(default_factory=lambda: [16])
    max_steps: int | None = None
    eval_episodes: int = 20
    eval_seed: int = 1000
    workers: int = 1
    init: str | None = None          # start from this checkpoint's parameters (fine-tuning)
    init_sha256: str | None = None   # of those parameters' bytes, recorded when the run starts
    extra: dict = field(default_factory=dict)   # problem-specific settings (e.g. Pong's)
    record_returns: bool = False     # write each generation's member returns to metrics.jsonl (replayable)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ESConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ESError(f"config has unknown settings: {', '.join(sorted(unknown))}")
        return cls(**d)

    def validate(self) -> "ESConfig":
        def need(ok, msg):
            if not ok:
                raise ESError(msg)

        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        need(is_num(self.sigma) and self.sigma > 0, f"--sigma must be a positive number, got {self.sigma}")
        need(is_int(self.population) and self.population >= 2, f"--population must be an integer >= 2, got {self.population}")
        need(not (self.antithetic and self.population % 2),
             f"--population must be even with antithetic sampling (members come in +/- pairs), got {self.population}; "
             "use an even number or --no-antithetic")
        need(is_num(self.learning_rate) and self.learning_rate > 0, f"--learning-rate must be positive, got {self.learning_rate}")
        need(self.optimizer in OPTIMIZERS, f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        need(self.shaping in SHAPINGS, f"--shaping must be one of {', '.join(SHAPINGS)}, got {self.shaping!r}")
        need(is_num(self.momentum) and 0 <= self.momentum < 1, f"--momentum must be in [0, 1), got {self.momentum}")
        need(is_num(self.weight_decay) and self.weight_decay >= 0, f"--weight-decay must be >= 0, got {self.weight_decay}")
        need(is_int(self.generations) and self.generations >= 1, f"--generations must be an integer >= 1, got {self.generations}")
        need(is_int(self.episodes_per_member) and self.episodes_per_member >= 1,
             f"--episodes-per-member must be >= 1, got {self.episodes_per_member}")
        need(is_int(self.center_episodes) and self.center_episodes >= 1, f"--center-episodes must be >= 1, got {self.center_episodes}")
        need(is_int(self.consecutive_goal_stopping) and self.consecutive_goal_stopping >= 1,
             f"--consecutive-goal-stopping must be >= 1, got {self.consecutive_goal_stopping}")
        need(self.reward_goal is None or is_num(self.reward_goal), f"--reward-goal must be a number, got {self.reward_goal}")
        need(self.solve_threshold is None or is_num(self.solve_threshold),
             f"--solve-threshold must be a number, got {self.solve_threshold}")
        need(is_int(self.seed) and 0 <= self.seed < 2 ** 63, f"--seed must be a non-negative integer, got {self.seed}")
        need(is_int(self.eval_episodes) and self.eval_episodes >= 1, f"--eval-episodes must be >= 1, got {self.eval_episodes}")
        need(self.noise in ("seeds", "table"), f"--noise must be seeds or table, got {self.noise!r}")
        need(is_int(self.workers) and self.workers >= 1, f"--workers must be an integer >= 1, got {self.workers}")
        need(all(is_int(h) and h >= 1 for h in self.hidden), f"--hidden must be positive layer sizes, got {self.hidden}")
        need(self.max_steps is None or (is_int(self.max_steps) and self.max_steps >= 1),
             f"--max-steps must be a positive integer, got {self.max_steps}")
        from . import registry
        plugin = registry.env(self.env)
        if plugin is not None and plugin.check_config is not None:
            plugin.check_config(self)
        return self


def config_for(env: str, **overrides) -> ESConfig:
    """Defaults for a known environment, then the user's overrides (``None`` = keep default)."""
    from .envs import resolve
    name, entry = resolve(env)
    base = {"env": name, "hidden": list(entry.get("hidden", [16])), **entry.get("train", {})}
    if name not in ("cartpole",) and "eval_seed" not in entry.get("train", {}):
        base["eval_seed"] = 0
    extra = dict(base.get("extra", {}))
    extra.update({k: v for k, v in (overrides.pop("extra", None) or {}).items() if v is not None})
    base.update({k: v for k, v in overrides.items() if v is not None})
    base["extra"] = extra
    return ESConfig.from_dict(base).validate()
