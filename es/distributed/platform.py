"""A worker's platform class: which PCs give the same bits, so that the master checks a result
only against evaluations that could have matched it (BOINC's homogeneous redundancy).

What a worker's return depends on, and so what the class holds:

* the forward passes: ``es.exact`` makes them the same on every x86-64 CPU, whatever OpenBLAS
  kernel or NumPy SIMD level (``tests/core/test_exact.py``); they stay in the description
  (``blas``, ``simd``) to tell a user what the PC is, not in the class;
* the simulators' math: MuJoCo, gymnasium's and our CartPole call the C library's ``sin``,
  ``cos``, ``exp``, ``pow``, ... whose last bits change with the C library and with the CPU
  (glibc picks FMA versions where the CPU has FMA): the class holds a fingerprint of their
  results on fixed inputs (``libm``), measured, not guessed;
* the architecture, and the versions of numpy, gymnasium, ale-py and mujoco.

A worker announces its description when it connects (``es:leases`` field
``platform:WORKER``); the master publishes its own in the task record. Neither is trusted:
a worker that claims the master's class is checked as any; one that claims another gains
nothing, for the master never uses a result it cannot check.
"""
from __future__ import annotations

import hashlib
import json
import math
import platform as _platform
from functools import cache
from importlib import metadata

import numpy as np

from . import protocol as P

PACKAGES = ("numpy", "gymnasium", "ale-py", "mujoco")
CLASS_FIELDS = ("arch", "libm", *PACKAGES)        # what decides the bits
MAX_BYTES = 1024                                  # an announced description, at most
REFUSAL = "platform class"                        # how a worker's error report that refuses a job begins


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def libm_fingerprint(n: int = 16384) -> str:
    """8 hex digits of the C library's results (through Python's ``math`` and NumPy's float64
    ``sin``/``cos``, which call it) on ``n`` fixed inputs, for the functions simulators call
    (trigonometry and its inverses, exponentials, logarithms, ``pow``): equal where a
    simulator's arithmetic is equal. 16,384 inputs: a PC without FMA differs on a few of them
    in ``cos``, ``exp``, ``pow``."""
    xs = (np.linspace(-10.0, 10.0, n) + 1e-3 * np.sin(np.arange(n))).tolist()     # no special values
    unit = [x / 10.5 for x in xs]                                                 # inside [-1, 1]
    h = hashlib.sha256()
    for f, args in ((math.sin, xs), (math.cos, xs), (math.tan, xs), (math.exp, xs), (math.expm1, xs),
                    (math.tanh, xs), (math.atan, xs), (math.asin, unit), (math.acos, unit)):
        h.update(np.array([f(x) for x in args]).tobytes())
    h.update(np.array([math.atan2(x, 1.3) for x in xs]).tobytes())
    h.update(np.array([math.log(abs(x) + 1e-3) for x in xs]).tobytes())
    h.update(np.array([math.log1p(abs(x)) for x in xs]).tobytes())
    h.update(np.array([math.pow(abs(x) + 0.5, 1.7) for x in xs]).tobytes())
    h.update(np.sin(np.array(xs)).tobytes() + np.cos(np.array(xs)).tobytes())
    return h.hexdigest()[:8]


def _blas_kernel() -> str:
    try:
        from threadpoolctl import threadpool_info
        return next((i.get("architecture") or "?" for i in threadpool_info() if i.get("user_api") == "blas"), "-")
    except Exception:   # noqa: BLE001 -- threadpoolctl is optional; the kernel is only reported
        return "?"


def _simd_level() -> str:
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as have
    except ImportError:   # noqa: BLE001 -- only reported
        return "?"
    levels = [lvl for lvl in ("X86_V2", "X86_V3", "X86_V4", "ASIMD", "SVE") if have.get(lvl)]
    return levels[-1] if levels else "baseline"


@cache
def describe() -> dict:
    """This process's platform: the class fields, the class ``key`` and what is only reported."""
    out = {"arch": _platform.machine() or "?", "libm": libm_fingerprint(),
           **{p: _version(p) for p in PACKAGES}}
    out["key"] = class_key(out)
    out.update(blas=_blas_kernel(), simd=_simd_level())
    return out


def class_key(desc: dict) -> str:
    """16 hex digits naming the class of a description (its ``CLASS_FIELDS``)."""
    return hashlib.sha256(json.dumps([str(desc.get(f)) for f in CLASS_FIELDS]).encode()).hexdigest()[:16]


def encode(desc: dict) -> str:
    return json.dumps(desc, sort_keys=True)


def decode(raw) -> dict:
    """A description from the network: a flat JSON object of short strings, its key recomputed
    (a worker cannot name a class its fields do not make); else ``BadPayload``."""
    desc = P.loads(raw, MAX_BYTES)
    if not (isinstance(desc, dict) and len(desc) <= 16
            and all(isinstance(k, str) and isinstance(v, str) and len(k) <= 16 and len(v) <= 40
                    for k, v in desc.items())):
        raise P.BadPayload(f"malformed platform description {P._text(raw)[:60]!r}")
    desc["key"] = class_key(desc)
    return desc


def decode_or_none(raw):
    """``decode``, or None for no description or an unreadable one (then checked as the master's class)."""
    try:
        return decode(raw) if raw else None
    except P.BadPayload:
        return None


def field(worker: str) -> str:
    """The ``es:leases`` field where a worker announces its platform."""
    return f"platform:{worker}"


def label(desc: dict) -> str:
    """One class in words: ``x86_64, libm 1a2b3c4d, numpy 2.4.6, gymnasium 1.2.0, ...``."""
    return ", ".join(f"{f} {desc.get(f, '?')}" if f != "arch" else str(desc.get(f, "?")) for f in CLASS_FIELDS)


def differences(mine: dict, other: dict) -> str:
    """What differs between two descriptions' class fields, in words."""
    return "; ".join(f"{f} {other.get(f, '?')} here, {mine.get(f, '?')} at the master"
                     for f in CLASS_FIELDS if str(mine.get(f)) != str(other.get(f)))
