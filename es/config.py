"""Training settings: one dataclass whose fields, defaults and checks are ``es.options``'."""
from __future__ import annotations

from dataclasses import asdict, field, make_dataclass

from . import envs
from .errors import ESError
from .options import OPTIONS, defaults


class _ConfigMethods:
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict):
        unknown = set(d) - set(OPTIONS)
        if unknown:
            raise ESError(f"config has unknown settings: {', '.join(sorted(unknown))}")
        return cls(**d)

    def validate(self):
        """Every setting against its row of the options table, then the rules that tie settings
        together, then the environment's own (a plug-in's ``check_config``)."""
        for name, option in OPTIONS.items():
            if not option.valid(getattr(self, name)):
                raise ESError(option.message(getattr(self, name)))
        if self.antithetic and self.population % 2:
            raise ESError(f"--population must be even with antithetic sampling (members come in +/- pairs), got "
                          f"{self.population}; use an even number or --no-antithetic")
        if self.env != "function":          # es.optimize's Python function has no registry entry
            entry = envs.entry_for(self.env)
            if entry.check_config is not None:
                entry.check_config(self)
        return self


ESConfig = make_dataclass(
    "ESConfig", [(name, object, field(default_factory=lambda name=name: defaults()[name])) for name in OPTIONS],
    bases=(_ConfigMethods,))
ESConfig.__module__ = __name__     # importable by name (pickled into joblib workers)
ESConfig.__doc__ = "Every setting of a training run; see es.options for what each one means."


def config_for(env: str, **overrides) -> ESConfig:
    """The options table's defaults, then the environment's, then the user's overrides
    (``None`` = keep the default; ``extra`` is merged key by key)."""
    entry = envs.entry_for(env)
    base = {**defaults(), **{k: (list(v) if isinstance(v, list) else v) for k, v in entry.defaults.items()},
            "env": entry.name}
    extra = {**base.get("extra", {}), **{k: v for k, v in (overrides.pop("extra", None) or {}).items() if v is not None}}
    base.update({k: v for k, v in overrides.items() if v is not None})
    base["extra"] = extra
    return ESConfig.from_dict(base).validate()
