"""What travels through Redis: JSON and raw little-endian bytes, never pickles; every payload
the master or a worker reads is validated before use (``BadPayload`` says why).

=============  ======  ==============================================================
``es:task``    hash    the generation (``encode_task``), written in one MULTI/EXEC: ``run``
                       (new per master process), ``nonce`` (new per generation),
                       hyper-parameters, ``center`` (raw float32 bytes, with ``sha256``),
                       ``sigma`` (one number as text) or, for a strategy with a sigma per
                       parameter, ``sigma_vector`` (raw float32 bytes, the center's shape),
                       ``problem`` (JSON spec), episode ``seeds``, ``max_length``,
                       ``obs_norm`` (raw float64 mean and std, empty where the problem does
                       not normalize observations: es.obs_norm), ``platform`` (the
                       master's, JSON) and ``verify`` (1: results are checked), ...
``es:jobs``    list    JSON ``{"r": run, "n": nonce, "g": gen, "a": first, "b": end, "c": 0|1}``
                       (``c``: this chunk also plays the center; none does where the master
                       plays it), popped from the front, the largest chunk first
``es:leases``  hash    ``"g:a:b"`` -> JSON ``{"w": worker, "n": nonce, "t": redis TIME}``;
                       ``"ready:WORKER"``: a worker the master started has built the problem;
                       ``"platform:WORKER"``: the platform a worker announced (``platform``)
``es:results`` list    binary results (below), one per chunk
=============  ======  ==============================================================

Roles (Redis >= 7 ACLs, ``server.acl_lines``): a worker may read the task, pop jobs, push
results and set leases, nothing else. What a worker writes (leases, results) is decoded
defensively: sizes capped before parsing, JSON nesting refused before parsing, numbers
finite and bounded. Anything carrying another run id or nonce is stale and dropped.

Result (little-endian; 50 bytes of header + 12 per member): ``b"ESR2" | kind u8 (0 returns,
1 error) | run 8B | nonce 8B | task digest 8B | generation u32 | first u32 | count u32 |
has_center u8 | worker id 8B | returns f64[count] | lengths u32[count] | [center f64, u32] |
[sums f64[count, d] | squares f64[count, d]]``, the last part (the states each member visited,
``d`` observation variables) exactly where the task has ``obs_norm``; an error carries a UTF-8 message instead. ``task_digest`` names the task record evaluated,
so results computed from an altered record are dropped.
"""
from __future__ import annotations

import hashlib
import json
import math
import struct

import numpy as np

from .. import registry
from ..registry import int_in
from .keys import JOBS, LEASES, PREFIX, RESULTS, TASK, ready_field  # noqa: F401 -- the protocol's keys
MAGIC = b"ESR2"
HEADER = struct.Struct("<4sB8s8s8sIIIB8s")
MAX_RESULT_BYTES = 1 << 23     # 8 MiB: some 1,500 Humanoid members a chunk, each with its statistics (5.6 kB)
MAX_CENTER_BYTES = 1 << 30
MAX_POPULATION = 1 << 24
MAX_SEEDS = 10_000
MAX_MESSAGE = 4000
MAX_RETURN = 1e30      # |return| above this is a lie or a broken environment: the update would not stay finite
MAX_OBS_DIM = 4096     # observation variables of a normalized problem
MAX_LEASE = 256        # bytes of one lease's JSON


class BadPayload(ValueError):
    """A payload that failed validation; it is logged and dropped. ``header``: the result's
    parsed header when only its body was bad (the sender and chunk it claims)."""
    header: dict | None = None


def _number(text: str):
    """A JSON number from the network: at most 32 characters, within 1e20 (no NaN, no infinity)."""
    if len(text) > 32 or not abs(out := float(text)) <= 1e20:
        raise BadPayload(f"number {text[:40]!r} is out of range")
    return int(text) if text.lstrip("-").isdigit() else out


def loads(raw, limit: int, depth: int = 1):
    """JSON from the network: at most ``limit`` bytes and ``depth`` brackets (counted before
    parsing: deep nesting never reaches the parser), numbers as ``_number``, else ``BadPayload``."""
    if not isinstance(raw, (bytes, bytearray, str)) or len(raw) > limit:
        raise BadPayload(f"JSON of {len(raw) if hasattr(raw, '__len__') else '?'} bytes exceeds {limit}")
    try:
        text = raw.decode() if isinstance(raw, (bytes, bytearray)) else raw
        if text.count("[") + text.count("{") > depth:
            raise BadPayload(f"JSON nested deeper than {depth}: {text[:40]!r}")
        return json.loads(text, parse_int=_number, parse_float=_number, parse_constant=_number)
    except BadPayload:
        raise
    except (ValueError, RecursionError) as exc:   # UnicodeDecodeError, JSONDecodeError are ValueErrors
        raise BadPayload(f"bad JSON {_text(raw)[:40]!r} ({exc.__class__.__name__})") from None


def decode_lease(raw) -> tuple[str, str, float]:
    """``(worker, nonce, time)`` of a lease a worker wrote, or ``BadPayload``."""
    lease = loads(raw, MAX_LEASE)
    if not (isinstance(lease, dict) and set(lease) == {"w", "n", "t"} and type(lease["t"]) in (int, float)
            and all(isinstance(lease[k], str) and len(lease[k]) <= 16 for k in "wn")):
        raise BadPayload(f"malformed lease {_text(raw)[:60]!r}")
    return lease["w"], lease["n"], float(lease["t"])


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _num(value, name: str, lo, hi, kind=int):
    try:
        out = kind(_text(value))
    except (TypeError, ValueError):
        raise BadPayload(f"{name} is not a number: {_text(value)[:40]!r}") from None
    if not (math.isfinite(out) and lo <= out <= hi):
        raise BadPayload(f"{name} {out} is outside [{lo}, {hi}]")
    return out


def _hex8(value, name: str) -> str:
    text = _text(value)
    if len(text) != 16 or any(c not in "0123456789abcdef" for c in text):
        raise BadPayload(f"{name} must be 16 hex digits, got {text[:40]!r}")
    return text


# ---- task record ----
def encode_task(task, problem_spec: dict, seeds, center_seeds, *, run: str, nonce: str, max_length: int,
                lease_seconds: float, platform: str = "", verify: bool = True) -> dict:
    """``platform``: the master's description (``platform.encode``); ``verify``: whether it
    checks results (a worker of another class is then told it cannot be verified)."""
    center = np.ascontiguousarray(task.center, dtype=np.float32)
    raw = center.tobytes()
    vector = np.ndim(task.sigma) > 0
    return {"run": run, "nonce": nonce, "generation": str(task.generation), "seed": str(task.seed),
            "sigma": "" if vector else repr(float(task.sigma)),
            "sigma_vector": np.ascontiguousarray(task.sigma, dtype="<f4").tobytes() if vector else b"",
            "antithetic": "1" if task.antithetic else "0",
            "population": str(task.population), "noise": task.noise, "center": raw, "shape": json.dumps(list(center.shape)),
            "dtype": json.dumps("<f4"), "sha256": hashlib.sha256(raw).hexdigest(),
            "problem": json.dumps(problem_spec, sort_keys=True), "seeds": json.dumps([int(s) for s in seeds]),
            "center_seeds": json.dumps([int(s) for s in (center_seeds if center_seeds is not None else [])]),
            "max_length": str(int(max_length)), "lease_seconds": repr(float(lease_seconds)),
            "obs_norm": b"" if task.obs_norm is None else np.ascontiguousarray(task.obs_norm, dtype="<f8").tobytes(),
            "platform": platform, "verify": "1" if verify else "0"}


DIGEST_FIELDS = ("run", "nonce", "generation", "seed", "sigma", "sigma_vector",
                 "antithetic", "population", "noise", "sha256", "shape", "dtype",
                 "problem", "seeds", "center_seeds", "max_length", "obs_norm")


def task_digest(record: dict) -> str:
    """16 hex digits that change with any field an evaluation depends on (the center: its SHA-256)."""
    rec = {_text(k): v for k, v in record.items()}
    h = hashlib.sha256()
    for name in DIGEST_FIELDS:
        value = rec.get(name, b"")
        value = value if isinstance(value, (bytes, bytearray)) else str(value).encode()
        h.update(name.encode() + b"=" + len(value).to_bytes(8, "little") + bytes(value))
    return h.hexdigest()[:16]


def _seed_list(value, name: str) -> list[int]:
    seeds = loads(value, 21 * MAX_SEEDS)
    if not (isinstance(seeds, list) and len(seeds) <= MAX_SEEDS
            and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2 ** 63 for s in seeds)):
        raise BadPayload(f"{name} must be a list of at most {MAX_SEEDS} non-negative 64-bit integers")
    return seeds


def decode_task(record: dict):
    """``(GenerationTask, problem_spec, seeds, center_seeds, meta)``, every field checked
    (``meta``: ``run``, ``nonce``, ``digest``, ``max_length``, ``lease_seconds``, ``platform``:
    the master's description as sent (``platform.decode`` reads it) or None, ``verify``)."""
    from ..strategy import GenerationTask
    rec = {_text(k): v for k, v in record.items()}
    need = {*DIGEST_FIELDS, "center", "lease_seconds"}
    if not need <= set(rec):
        raise BadPayload(f"task record lacks {sorted(need - set(rec))}")
    meta = {"run": _hex8(rec["run"], "run"), "nonce": _hex8(rec["nonce"], "nonce"), "digest": task_digest(rec),
            "max_length": _num(rec["max_length"], "max_length", 0, 2 ** 32 - 1),
            "lease_seconds": _num(rec["lease_seconds"], "lease_seconds", 0.05, 3600.0, float),
            "verify": _text(rec.get("verify", "1")) != "0", "platform": rec.get("platform") or None}
    generation = _num(rec["generation"], "generation", 0, 2 ** 32 - 1)
    population = _num(rec["population"], "population", 2, MAX_POPULATION)
    seed = _num(rec["seed"], "seed", 0, 2 ** 63 - 1)
    if _text(rec["antithetic"]) not in ("0", "1"):
        raise BadPayload("antithetic must be 0 or 1")
    if _text(rec["noise"]) not in ("seeds", "table"):
        raise BadPayload(f"noise must be seeds or table, got {_text(rec['noise'])[:40]!r}")
    shape, dtype = loads(rec["shape"], 64), loads(rec["dtype"], 64)
    if dtype != "<f4" or not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int)):
        raise BadPayload(f"center must be a float32 vector, got dtype {dtype!r} shape {shape!r:.40}")
    raw = rec["center"]
    if not isinstance(raw, (bytes, bytearray)) or len(raw) != 4 * shape[0] or len(raw) > MAX_CENTER_BYTES:
        raise BadPayload(f"center has {len(raw)} bytes, shape {shape} needs {4 * shape[0]}")
    if hashlib.sha256(raw).hexdigest() != _text(rec["sha256"]):
        raise BadPayload("center checksum mismatch")
    center = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(center)):
        raise BadPayload("center has non-finite values")
    sigma = _sigma(rec["sigma"], rec["sigma_vector"], center.size)
    validate_spec(spec := loads(rec["problem"], 1 << 16, depth=64))
    task = GenerationTask(seed=seed, generation=generation, sigma=sigma, antithetic=_text(rec["antithetic"]) == "1",
                          population=population, center=center, noise=_text(rec["noise"]),
                          obs_norm=_obs_norm(rec["obs_norm"]))
    return task, spec, _seed_list(rec["seeds"], "seeds"), _seed_list(rec["center_seeds"], "center_seeds"), meta


def _sigma(text, raw, dim: int):
    """One sigma (``text``) or a sigma per parameter (``raw`` float32 bytes): exactly one is given."""
    if not isinstance(raw, (bytes, bytearray)):
        raise BadPayload("sigma_vector must be raw bytes")
    if not raw:
        return _num(text, "sigma", 1e-12, 1e6, float)
    if _text(text):
        raise BadPayload("the task gives both one sigma and a sigma vector")
    if len(raw) != 4 * dim:
        raise BadPayload(f"sigma vector has {len(raw)} bytes, the center's {dim} parameters need {4 * dim}")
    sigma = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not (np.all(np.isfinite(sigma)) and np.all(sigma >= 1e-12) and np.all(sigma <= 1e6)):
        raise BadPayload("sigma vector must be finite, in [1e-12, 1e6]")
    return sigma


def _obs_norm(raw):
    """The task's frozen observation mean and std, ``(2, d)`` float64, or None (empty bytes)."""
    if not isinstance(raw, (bytes, bytearray)):
        raise BadPayload("obs_norm must be raw bytes")
    if not raw:
        return None
    if len(raw) % 16 or not 0 < len(raw) // 16 <= MAX_OBS_DIM:
        raise BadPayload(f"obs_norm has {len(raw)} bytes: not a mean and a std of at most {MAX_OBS_DIM} values")
    out = np.frombuffer(raw, dtype="<f8").astype(np.float64).reshape(2, -1)
    if not (np.all(np.isfinite(out)) and np.all(out[1] > 0)):
        raise BadPayload("obs_norm must be finite with a positive std")
    return out


def validate_spec(spec) -> None:
    """A problem spec from the network, checked by the registry's rules for its kind
    (``es.registry.validate_spec``); ``BadPayload`` says why it is refused."""
    from .. import envs  # noqa: F401 -- the core's env kind registers on import
    try:
        registry.validate_spec(spec)
    except ValueError as exc:
        raise BadPayload(str(exc)) from None


# ---- jobs ----
def encode_job(run: str, nonce: str, generation: int, first: int, end: int, center: bool) -> str:
    return json.dumps({"r": run, "n": nonce, "g": generation, "a": first, "b": end, "c": int(center)},
                      separators=(",", ":"))


def decode_job(raw) -> dict:
    job = loads(raw, 256)
    if not (isinstance(job, dict) and all(int_in(job.get(k), 0, 2 ** 32) for k in "gabc") and job["a"] < job["b"]
            <= MAX_POPULATION and job["c"] in (0, 1) and isinstance(job.get("r"), str) and isinstance(job.get("n"), str)):
        raise BadPayload(f"malformed job {_text(raw)[:60]!r}")
    return job


def job_id(job: dict) -> str:
    return f"{job['g']}:{job['a']}:{job['b']}"


# ---- results ----
def encode_result(worker: bytes, run: str, nonce: str, digest: str, generation: int, first: int, returns, lengths,
                  center=None, obs=None) -> bytes:
    """``obs``: the members' observation sums and squares (``(count, d)`` each) where the task normalizes."""
    returns = np.asarray(returns, dtype="<f8")
    lengths = np.asarray(lengths, dtype="<u4")
    out = HEADER.pack(MAGIC, 0, bytes.fromhex(run), bytes.fromhex(nonce), bytes.fromhex(digest), generation, first,
                      len(returns), center is not None, worker) + returns.tobytes() + lengths.tobytes()
    if center is not None:
        out += struct.pack("<dI", float(center[0]), int(center[1]))
    if obs is not None:
        out += b"".join(np.ascontiguousarray(x, dtype="<f8").tobytes() for x in obs)
    return out


def encode_error(worker: bytes, run: str, nonce: str, digest: str, generation: int, first: int, count: int,
                 message: str) -> bytes:
    return HEADER.pack(MAGIC, 1, bytes.fromhex(run), bytes.fromhex(nonce), bytes.fromhex(digest), generation, first,
                       count, 0, worker) + message.encode()[:MAX_MESSAGE]


def decode_result(raw, max_length: int | None = None, max_center_length: int | None = None, obs_dim: int = 0) -> dict:
    """Parse and check a result payload; ``BadPayload`` says what is wrong. ``max_length``
    bounds each member's env steps, ``max_center_length`` the center's; ``obs_dim``: the task's
    observation variables where it normalizes them (each member then reports their statistics)."""
    if not isinstance(raw, (bytes, bytearray)):
        raise BadPayload(f"result is {type(raw).__name__}, not bytes")
    if len(raw) > MAX_RESULT_BYTES:
        raise BadPayload(f"result of {len(raw)} bytes exceeds {MAX_RESULT_BYTES}")
    if len(raw) < HEADER.size:
        raise BadPayload(f"result of {len(raw)} bytes is shorter than its header")
    magic, kind, run, nonce, digest, g, first, count, has_center, worker = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise BadPayload(f"bad magic {magic!r}")
    body = raw[HEADER.size:]
    out = {"kind": kind, "run": run.hex(), "nonce": nonce.hex(), "digest": digest.hex(), "generation": g,
           "first": first, "count": count, "worker": worker.hex()}
    if has_center not in (0, 1):
        raise BadPayload(f"center flag {has_center} is not 0 or 1")
    if kind == 1:
        if len(body) > MAX_MESSAGE:
            raise BadPayload(f"error message of {len(body)} bytes exceeds {MAX_MESSAGE}")
        out["message"] = bytes(body).decode(errors="replace")
        return out
    if kind != 0:
        raise BadPayload(f"unknown result kind {kind}")
    try:
        return _body(out, body, count, has_center, max_length, max_center_length, obs_dim)
    except BadPayload as exc:
        exc.header = out
        raise


def _body(out, body, count, has_center, max_length, max_center_length, obs_dim=0) -> dict:
    scalars = 12 * count + (12 if has_center else 0)
    need, who = scalars + 16 * count * obs_dim, f"from worker {out['worker']}"
    if len(body) != need:
        raise BadPayload(f"result for {count} members has {len(body)} bytes of data, expected {need}")
    returns = np.frombuffer(body, dtype="<f8", count=count).astype(np.float64)
    lengths = np.frombuffer(body, dtype="<u4", count=count, offset=8 * count).astype(np.int64)
    cr, cl = struct.unpack_from("<dI", body, 12 * count) if has_center else (0.0, 0)
    if not (np.all(np.isfinite(returns)) and math.isfinite(cr)):
        raise BadPayload(f"non-finite {'returns' if not np.all(np.isfinite(returns)) else 'center return'} {who}")
    if count and np.abs(returns).max() > MAX_RETURN or abs(cr) > MAX_RETURN:
        raise BadPayload(f"a return over {MAX_RETURN:g} in magnitude {who}")
    if max_length is not None and count and lengths.max() > max_length:
        raise BadPayload(f"episode length {lengths.max()} {who} exceeds the cap {max_length}")
    if has_center and max_center_length is not None and cl > max_center_length:
        raise BadPayload(f"center length {cl} {who} exceeds the cap {max_center_length}")
    out.update(returns=returns, lengths=lengths, center=(float(cr), int(cl)) if has_center else None, obs=None)
    if obs_dim:
        sums, squares = np.frombuffer(body, dtype="<f8", offset=scalars).astype(np.float64).reshape(2, count, obs_dim)
        if not (np.all(np.isfinite(sums)) and np.all(np.isfinite(squares)) and np.all(squares >= 0)
                and np.abs(sums).max(initial=0) <= MAX_RETURN and squares.max(initial=0) <= MAX_RETURN):
            raise BadPayload(f"observation statistics {who} are non-finite, negative squares or over {MAX_RETURN:g}")
        out["obs"] = (sums, squares)
    return out
