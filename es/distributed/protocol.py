"""What travels through Redis. Nothing is pickled; every payload is validated before use.

Keys (one run per Redis database; pick the database with ``/N`` in the URL):

=============  ======  ==============================================================
key            type    contents
=============  ======  ==============================================================
``es:task``    hash    the current generation: ``generation``, ``seed``, ``sigma``,
                       ``antithetic``, ``population``, ``center`` (raw float32 bytes),
                       ``shape`` and ``dtype`` (JSON), ``sha256`` of the center bytes,
                       ``problem`` (JSON spec), ``seeds``, ``center_seeds`` (JSON).
                       Written in one MULTI/EXEC, so a worker never reads half of it.
``es:jobs``    list    chunk jobs, JSON ``{"g": generation, "a": first, "b": end,
                       "c": 1 if the chunk also plays the center}``
``es:leases``  hash    ``"g:a:b"`` -> JSON ``{"w": worker, "t": redis TIME}``, renewed by
                       a heartbeat while the worker evaluates the chunk; removed in
                       the same MULTI/EXEC that pushes the result
``es:results`` list    binary results (below), one per chunk
=============  ======  ==============================================================

The master writes the task, then pushes the jobs. Workers never depend on a broadcast (the
OpenAI starter's pub/sub announcement can be missed, leaving a worker on a stale task): a
worker always reads the current task record for the job's generation. Jobs of an old
generation are dropped. A chunk whose lease is not renewed for ``lease_seconds`` (a dead or
stalled worker) and that is not waiting in the queue is queued again; duplicates are dropped
by (generation, member); results of an old generation are discarded.

Result payload (little-endian), worker -> Redis; 26 bytes of header + 12 bytes per member:

    b"ESR1" | kind u8 (0 = returns, 1 = error) | generation u32 | first member u32 |
    count u32 | has_center u8 | worker id 8 bytes |
    returns float64[count] | lengths uint32[count] | [center return float64, length uint32]

An error result carries a UTF-8 message instead of the arrays. Returns travel as float64
so that the master sees exactly what a single process would: the run stays bit-identical.
"""
from __future__ import annotations

import hashlib
import json
import struct

import numpy as np

PREFIX = "es"
TASK, JOBS, LEASES, RESULTS = f"{PREFIX}:task", f"{PREFIX}:jobs", f"{PREFIX}:leases", f"{PREFIX}:results"
MAGIC = b"ESR1"
HEADER = struct.Struct("<4sBIIIB8s")
MAX_RESULT_BYTES = 1 << 20
MAX_CENTER_BYTES = 1 << 30


class BadPayload(ValueError):
    """A payload that failed validation; it is logged and dropped."""


# ---- task record ----
def encode_task(task, problem_spec: dict, seeds, center_seeds) -> dict:
    center = np.ascontiguousarray(task.center, dtype=np.float32)
    raw = center.tobytes()
    return {"generation": str(task.generation), "seed": str(task.seed), "sigma": repr(float(task.sigma)),
            "antithetic": "1" if task.antithetic else "0", "population": str(task.population),
            "center": raw, "shape": json.dumps(list(center.shape)), "dtype": json.dumps("<f4"),
            "sha256": hashlib.sha256(raw).hexdigest(), "problem": json.dumps(problem_spec, sort_keys=True),
            "seeds": json.dumps([int(s) for s in seeds]),
            "center_seeds": json.dumps([int(s) for s in (center_seeds if center_seeds is not None else [])])}


def decode_task(record: dict):
    """``(GenerationTask, problem_spec, seeds, center_seeds)`` or ``BadPayload``."""
    from ..strategy import GenerationTask
    rec = {k.decode() if isinstance(k, bytes) else k: v for k, v in record.items()}
    need = {"generation", "seed", "sigma", "antithetic", "population", "center", "shape", "dtype", "sha256",
            "problem", "seeds", "center_seeds"}
    if not need <= set(rec):
        raise BadPayload(f"task record lacks {sorted(need - set(rec))}")
    try:
        raw = rec["center"]
        shape = json.loads(rec["shape"])
        if json.loads(rec["dtype"]) != "<f4" or not isinstance(shape, list) or len(shape) != 1:
            raise BadPayload(f"center must be a float32 vector, got dtype {rec['dtype']!r} shape {shape}")
        if len(raw) != 4 * shape[0] or len(raw) > MAX_CENTER_BYTES:
            raise BadPayload(f"center has {len(raw)} bytes, shape {shape} needs {4 * shape[0]}")
        if hashlib.sha256(raw).hexdigest() != (rec["sha256"].decode() if isinstance(rec["sha256"], bytes) else rec["sha256"]):
            raise BadPayload("center checksum mismatch")
        center = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if not np.all(np.isfinite(center)):
            raise BadPayload("center has non-finite values")
        task = GenerationTask(seed=int(rec["seed"]), generation=int(rec["generation"]), sigma=float(rec["sigma"]),
                              antithetic=rec["antithetic"] in (b"1", "1"), population=int(rec["population"]),
                              center=center)
        return task, json.loads(rec["problem"]), json.loads(rec["seeds"]), json.loads(rec["center_seeds"])
    except (ValueError, TypeError, KeyError, json.JSONDecodeError) as exc:
        if isinstance(exc, BadPayload):
            raise
        raise BadPayload(f"malformed task record: {exc}") from None


# ---- jobs ----
def encode_job(generation: int, first: int, end: int, center: bool) -> str:
    return json.dumps({"g": generation, "a": first, "b": end, "c": int(center)}, separators=(",", ":"))


def decode_job(raw) -> dict:
    try:
        job = json.loads(raw)
        if not (isinstance(job, dict) and all(isinstance(job.get(k), int) for k in "gabc") and 0 <= job["a"] < job["b"]):
            raise ValueError(job)
        return job
    except (ValueError, TypeError) as exc:
        raise BadPayload(f"malformed job {raw!r:.80}: {exc}") from None


def job_id(job: dict) -> str:
    return f"{job['g']}:{job['a']}:{job['b']}"


# ---- results ----
def encode_result(worker: bytes, generation: int, first: int, returns, lengths, center=None) -> bytes:
    returns = np.asarray(returns, dtype="<f8")
    lengths = np.asarray(lengths, dtype="<u4")
    out = HEADER.pack(MAGIC, 0, generation, first, len(returns), center is not None, worker) \
        + returns.tobytes() + lengths.tobytes()
    if center is not None:
        out += struct.pack("<dI", float(center[0]), int(center[1]))
    return out


def encode_error(worker: bytes, generation: int, first: int, count: int, message: str) -> bytes:
    return HEADER.pack(MAGIC, 1, generation, first, count, 0, worker) + message.encode()[:4000]


def decode_result(raw) -> dict:
    """Parse and check a result payload; ``BadPayload`` says what is wrong."""
    if not isinstance(raw, (bytes, bytearray)):
        raise BadPayload(f"result is {type(raw).__name__}, not bytes")
    if len(raw) > MAX_RESULT_BYTES:
        raise BadPayload(f"result of {len(raw)} bytes exceeds {MAX_RESULT_BYTES}")
    if len(raw) < HEADER.size:
        raise BadPayload(f"result of {len(raw)} bytes is shorter than its header")
    magic, kind, g, first, count, has_center, worker = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise BadPayload(f"bad magic {magic!r}")
    body = raw[HEADER.size:]
    out = {"kind": kind, "generation": g, "first": first, "count": count, "worker": worker.hex()}
    if kind == 1:
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
    out.update(returns=returns, lengths=lengths, center=None)
    if has_center:
        cr, cl = struct.unpack_from("<dI", body, 12 * count)
        if not np.isfinite(cr):
            raise BadPayload(f"non-finite center return from worker {worker.hex()}")
        out["center"] = (float(cr), int(cl))
    return out
