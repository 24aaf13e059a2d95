"""Plain data between the grader and a student's kernel: JSON with tagged arrays and bytes.

No pickle: what a kernel sends back is parsed as data, never executed. Arrays travel as
dtype + shape + raw bytes (base64), so the grader sees exactly what the student's function
returned.
"""
from __future__ import annotations

import base64
import json

import numpy as np

MAX_BYTES = 64 << 20
_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
           "float64", "complex64", "complex128"}


class RNG:
    """``np.random.default_rng(seed)``, built on whichever side runs the function."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def make(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


def _enc(v):
    if isinstance(v, RNG):
        return {"__rng__": v.seed}
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, np.ndarray):
        a = np.ascontiguousarray(v)
        if not a.dtype.isnative:          # a big-endian array: send its values, in the order the bytes are read
            a = a.astype(a.dtype.newbyteorder("="))
        if a.dtype.name not in _DTYPES:
            raise TypeError(f"cannot send an array of dtype {a.dtype}")
        return {"__nd__": a.dtype.name, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}
    if isinstance(v, (list, tuple)):
        return [_enc(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return {"__set__": [_enc(x) for x in v]}
    if isinstance(v, dict):
        return {"__dict__": [[_enc(k), _enc(x)] for k, x in v.items()]}
    raise TypeError(f"cannot send a {type(v).__name__} (numbers, strings, bytes, arrays, lists, sets and dicts only)")


def _dec(v, make_rng: bool):
    if isinstance(v, list):
        return [_dec(x, make_rng) for x in v]
    if not isinstance(v, dict):
        return v
    if "__nd__" in v:
        if v["__nd__"] not in _DTYPES:
            raise ValueError(f"unknown dtype {v['__nd__']!r}")
        raw = base64.b64decode(v["data"])
        shape = tuple(int(s) for s in v["shape"])
        return np.frombuffer(raw, dtype=v["__nd__"]).reshape(shape).copy()
    if "__bytes__" in v:
        return base64.b64decode(v["__bytes__"])
    if "__set__" in v:
        return {_hashable(_dec(x, make_rng)) for x in v["__set__"]}
    if "__dict__" in v:
        return {_hashable(_dec(k, make_rng)): _dec(x, make_rng) for k, x in v["__dict__"]}
    if "__rng__" in v:
        return RNG(v["__rng__"]).make() if make_rng else RNG(v["__rng__"])
    raise ValueError("unknown tagged value")


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def dumps(value) -> str:
    return base64.b64encode(json.dumps(_enc(value)).encode()).decode()


def loads(text: str, make_rng: bool = False):
    raw = base64.b64decode(text.encode() if isinstance(text, str) else text, validate=True)
    if len(raw) > MAX_BYTES:
        raise ValueError(f"message of {len(raw)} bytes exceeds {MAX_BYTES}")
    return _dec(json.loads(raw), make_rng)
