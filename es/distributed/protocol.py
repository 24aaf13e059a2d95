"""What travels through Redis. Nothing is pickled; every payload is validated before use.

Keys (one run per Redis database; pick the database with ``/N`` in the URL):

=============  ======  ==============================================================
key            type    contents
=============  ======  ==============================================================
``es:task``    hash    the current generation: ``run`` (random id of this master
                       process), ``nonce`` (random, new every generation),
                       ``generation``, ``seed``, ``sigma``, ``antithetic``,
                       ``population``, ``noise`` (seeds or table),
                       ``center`` (raw float32 bytes), ``shape`` and
                       ``dtype`` (JSON), ``sha256`` of the center bytes, ``problem``
                       (JSON spec), ``seeds``, ``center_seeds`` (JSON), ``max_length``
                       (most env steps one episode may take), ``lease_seconds``.
                       Written in one MULTI/EXEC, so a worker never reads half of it.
``es:jobs``    list    chunk jobs, JSON ``{"r": run, "n": nonce, "g": generation,
                       "a": first, "b": end, "c": 1 if the chunk also plays the center}``
``es:leases``  hash    ``"g:a:b"`` -> JSON ``{"w": worker, "n": nonce, "t": redis TIME}``,
                       renewed while the worker evaluates the chunk; removed in the
                       same MULTI/EXEC that pushes the result
``es:results`` list    binary results (below), one per chunk
=============  ======  ==============================================================

Who may write what (Redis >= 7 ACLs, set up by the embedded server, lines for an external
server in the README): the master user writes everything under ``es:``; the worker user
may read ``es:task``, pop ``es:jobs``, push ``es:results`` and set ``es:leases``, and
nothing else. So a worker cannot rewrite the task or forge jobs.

Freshness: the master writes a new random ``nonce`` with every generation and a new
``run`` id every time it starts; jobs, leases and results carry both, and anything that does
not match the generation in progress is dropped and counted. A result left over from an
earlier run on the same database, or a worker still busy with a generation the master has
left, can never enter an update.

Result payload (little-endian), worker -> Redis; 50 bytes of header + 12 bytes per member:

    b"ESR2" | kind u8 (0 = returns, 1 = error) | run 8 bytes | nonce 8 bytes |
    task digest 8 bytes | generation u32 | first member u32 | count u32 | has_center u8 |
    worker id 8 bytes | returns float64[count] | lengths uint32[count] |
    [center return float64, length uint32]

The task digest (``task_digest``: SHA-256 over every field the evaluation depends on) says
which task record the worker evaluated. On a server without roles, where anyone with the
password could rewrite the record mid-generation, results computed from an altered record
are dropped instead of entering the update.

An error result carries a UTF-8 message instead of the arrays. Returns travel as float64
so that the master sees exactly what a single process would: the run stays bit-identical.
"""
from __future__ import annotations

import hashlib
import json
import math
import struct

import numpy as np

from .keys import JOBS, LEASES, PREFIX, RESULTS, TASK  # noqa: F401 -- the protocol's keys
MAGIC = b"ESR2"
HEADER = struct.Struct("<4sB8s8s8sIIIB8s")
MAX_RESULT_BYTES = 1 << 20
MAX_CENTER_BYTES = 1 << 30
MAX_POPULATION = 1 << 24
MAX_SEEDS = 10_000
MAX_MESSAGE = 4000


class BadPayload(ValueError):
    """A payload that failed validation; it is logged and dropped."""


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _int(value, name: str, lo: int, hi: int) -> int:
    try:
        text = _text(value)
        out = int(text)
    except (TypeError, ValueError):
        raise BadPayload(f"{name} is not an integer: {_text(value)[:40]!r}") from None
    if not lo <= out <= hi:
        raise BadPayload(f"{name} {out} is outside [{lo}, {hi}]")
    return out


def _float(value, name: str, lo: float, hi: float) -> float:
    try:
        out = float(_text(value))
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
                lease_seconds: float) -> dict:
    center = np.ascontiguousarray(task.center, dtype=np.float32)
    raw = center.tobytes()
    return {"run": run, "nonce": nonce, "generation": str(task.generation), "seed": str(task.seed),
            "sigma": repr(float(task.sigma)), "antithetic": "1" if task.antithetic else "0",
            "population": str(task.population), "noise": task.noise, "center": raw, "shape": json.dumps(list(center.shape)),
            "dtype": json.dumps("<f4"), "sha256": hashlib.sha256(raw).hexdigest(),
            "problem": json.dumps(problem_spec, sort_keys=True), "seeds": json.dumps([int(s) for s in seeds]),
            "center_seeds": json.dumps([int(s) for s in (center_seeds if center_seeds is not None else [])]),
            "max_length": str(int(max_length)), "lease_seconds": repr(float(lease_seconds))}


DIGEST_FIELDS = ("run", "nonce", "generation", "seed", "sigma", "antithetic", "population", "noise", "sha256", "shape", "dtype",
                 "problem", "seeds", "center_seeds", "max_length")


def task_digest(record: dict) -> str:
    """16 hex digits that change if any field an evaluation depends on changes (the center
    through its SHA-256, which ``decode_task`` checks against the bytes)."""
    rec = {_text(k): v for k, v in record.items()}
    h = hashlib.sha256()
    for name in DIGEST_FIELDS:
        value = rec.get(name, b"")
        value = value if isinstance(value, (bytes, bytearray)) else str(value).encode()
        h.update(name.encode() + b"=" + len(value).to_bytes(8, "little") + bytes(value))
    return h.hexdigest()[:16]


def _seed_list(value, name: str) -> list[int]:
    try:
        seeds = json.loads(value)
    except (TypeError, ValueError):
        raise BadPayload(f"{name} is not JSON") from None
    if not (isinstance(seeds, list) and len(seeds) <= MAX_SEEDS
            and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2 ** 63 for s in seeds)):
        raise BadPayload(f"{name} must be a list of at most {MAX_SEEDS} non-negative 64-bit integers")
    return seeds


def decode_task(record: dict):
    """``(GenerationTask, problem_spec, seeds, center_seeds, meta)`` or ``BadPayload``; ``meta``
    holds ``run``, ``nonce``, ``digest``, ``max_length`` and ``lease_seconds``. Every field is checked:
    the problem spec against the allow-list of ``validate_spec``, sizes against bounds."""
    from ..strategy import GenerationTask
    rec = {_text(k): v for k, v in record.items()}
    need = {"run", "nonce", "generation", "seed", "sigma", "antithetic", "population", "noise", "center", "shape", "dtype",
            "sha256", "problem", "seeds", "center_seeds", "max_length", "lease_seconds"}
    if not need <= set(rec):
        raise BadPayload(f"task record lacks {sorted(need - set(rec))}")
    meta = {"run": _hex8(rec["run"], "run"), "nonce": _hex8(rec["nonce"], "nonce"), "digest": task_digest(rec),
            "max_length": _int(rec["max_length"], "max_length", 0, 2 ** 32 - 1),
            "lease_seconds": _float(rec["lease_seconds"], "lease_seconds", 0.05, 3600.0)}
    generation = _int(rec["generation"], "generation", 0, 2 ** 32 - 1)
    population = _int(rec["population"], "population", 2, MAX_POPULATION)
    seed = _int(rec["seed"], "seed", 0, 2 ** 63 - 1)
    sigma = _float(rec["sigma"], "sigma", 1e-12, 1e6)
    if _text(rec["antithetic"]) not in ("0", "1"):
        raise BadPayload("antithetic must be 0 or 1")
    if _text(rec["noise"]) not in ("seeds", "table"):
        raise BadPayload(f"noise must be seeds or table, got {_text(rec['noise'])[:40]!r}")
    try:
        shape, dtype = json.loads(rec["shape"]), json.loads(rec["dtype"])
    except (TypeError, ValueError):
        raise BadPayload("shape or dtype is not JSON") from None
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
    try:
        spec = json.loads(rec["problem"])
    except (TypeError, ValueError):
        raise BadPayload("problem spec is not JSON") from None
    validate_spec(spec)
    task = GenerationTask(seed=seed, generation=generation, sigma=sigma, antithetic=_text(rec["antithetic"]) == "1",
                          population=population, center=center, noise=_text(rec["noise"]))
    return task, spec, _seed_list(rec["seeds"], "seeds"), _seed_list(rec["center_seeds"], "center_seeds"), meta


# What a worker agrees to build from a task record: nothing is imported by name, sizes are bounded.
MAX_HIDDEN, MAX_LAYERS, MAX_STEPS = 4096, 8, 10 ** 6


def int_in(v, lo: int, hi: int) -> bool:
    """An integer (not a bool) in ``[lo, hi]``: for allow-lists, the core's and plug-ins'."""
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def layer_sizes_ok(hidden) -> bool:
    """At most ``MAX_LAYERS`` hidden layer sizes, each in ``[1, MAX_HIDDEN]``."""
    return isinstance(hidden, list) and len(hidden) <= MAX_LAYERS and all(int_in(h, 1, MAX_HIDDEN) for h in hidden)


def validate_spec(spec) -> None:
    """Allow-list for problem specs from the network: an ``env`` problem must name one of the
    known environments or a registered gymnasium id (never ``module:Env``, which would make
    gymnasium import a module); layer sizes and episode caps are bounded. Any other kind must
    be a plug-in's (``es.registry``), whose ``validate_spec`` bounds its own settings."""
    if not isinstance(spec, dict):
        raise BadPayload("problem spec must be a JSON object")
    kind = spec.get("kind")

    def bounded_int(name, lo, hi, default=None, allow_none=False):
        v = spec.get(name, default)
        if v is None and allow_none:
            return
        if not int_in(v, lo, hi):
            raise BadPayload(f"problem spec: {name} must be an integer in [{lo}, {hi}], got {v!r:.40}")

    if kind == "env":
        env_id = spec.get("env_id")
        from ..envs import allowed_env_id
        if not allowed_env_id(env_id):
            raise BadPayload(f"problem spec: env_id {env_id!r:.60} is neither a known environment nor a registered "
                             "gymnasium id (module:Env imports are never allowed)")
        if not layer_sizes_ok(spec.get("hidden", [])):
            raise BadPayload(f"problem spec: hidden must be at most {MAX_LAYERS} sizes in [1, {MAX_HIDDEN}]")
        bounded_int("max_steps", 1, MAX_STEPS, allow_none=True)
    else:
        from .. import registry
        plugin = registry.problem_kind(kind)
        if plugin is None:
            raise BadPayload(f"problem spec: kind {kind!r:.40} is not env or a plug-in's problem kind")
        try:
            plugin.validate_spec(spec)
        except (ValueError, TypeError, KeyError) as exc:
            raise BadPayload(f"problem spec: {exc}") from None


# ---- jobs ----
def encode_job(run: str, nonce: str, generation: int, first: int, end: int, center: bool) -> str:
    return json.dumps({"r": run, "n": nonce, "g": generation, "a": first, "b": end, "c": int(center)},
                      separators=(",", ":"))


def decode_job(raw) -> dict:
    try:
        job = json.loads(raw)
    except (TypeError, ValueError):
        raise BadPayload(f"malformed job {_text(raw)[:60]!r}") from None
    ok = (isinstance(job, dict) and all(isinstance(job.get(k), int) and not isinstance(job.get(k), bool)
                                        for k in "gabc")
          and isinstance(job.get("r"), str) and isinstance(job.get("n"), str)
          and 0 <= job["a"] < job["b"] <= MAX_POPULATION and job["c"] in (0, 1))
    if not ok:
        raise BadPayload(f"malformed job {_text(raw)[:60]!r}")
    return job


def job_id(job: dict) -> str:
    return f"{job['g']}:{job['a']}:{job['b']}"


# ---- results ----
def encode_result(worker: bytes, run: str, nonce: str, digest: str, generation: int, first: int, returns, lengths,
                  center=None) -> bytes:
    returns = np.asarray(returns, dtype="<f8")
    lengths = np.asarray(lengths, dtype="<u4")
    out = HEADER.pack(MAGIC, 0, bytes.fromhex(run), bytes.fromhex(nonce), bytes.fromhex(digest), generation, first,
                      len(returns), center is not None, worker) + returns.tobytes() + lengths.tobytes()
    if center is not None:
        out += struct.pack("<dI", float(center[0]), int(center[1]))
    return out


def encode_error(worker: bytes, run: str, nonce: str, digest: str, generation: int, first: int, count: int,
                 message: str) -> bytes:
    return HEADER.pack(MAGIC, 1, bytes.fromhex(run), bytes.fromhex(nonce), bytes.fromhex(digest), generation, first,
                       count, 0, worker) + message.encode()[:MAX_MESSAGE]


def decode_result(raw, max_length: int | None = None, max_center_length: int | None = None) -> dict:
    """Parse and check a result payload; ``BadPayload`` says what is wrong. ``max_length``
    bounds each member's env steps, ``max_center_length`` the center's."""
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
    need = 12 * count + (12 if has_center else 0)
    if len(body) != need:
        raise BadPayload(f"result for {count} members has {len(body)} bytes of data, expected {need}")
    returns = np.frombuffer(body, dtype="<f8", count=count).astype(np.float64)
    lengths = np.frombuffer(body, dtype="<u4", count=count, offset=8 * count).astype(np.int64)
    if not np.all(np.isfinite(returns)):
        raise BadPayload(f"non-finite returns from worker {worker.hex()}")
    if max_length is not None and count and lengths.max() > max_length:
        raise BadPayload(f"episode length {lengths.max()} from worker {worker.hex()} exceeds the cap {max_length}")
    out.update(returns=returns, lengths=lengths, center=None)
    if has_center:
        cr, cl = struct.unpack_from("<dI", body, 12 * count)
        if not np.isfinite(cr):
            raise BadPayload(f"non-finite center return from worker {worker.hex()}")
        if max_center_length is not None and cl > max_center_length:
            raise BadPayload(f"center length {cl} from worker {worker.hex()} exceeds the cap {max_center_length}")
        out["center"] = (float(cr), int(cl))
    return out
