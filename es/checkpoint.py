"""Checkpoints: one ``.npz`` with the parameters, the optimizer state and a JSON header. No
pickle (a stranger's checkpoint cannot run code); what every array inflates to is checked before
any is read; writes are atomic (temporary file, fsync, rename), so a crash keeps the last one."""
from __future__ import annotations

import hashlib
import json
import math
import os
import zipfile
from pathlib import Path

import numpy as np

from .errors import ESError

FORMAT = "es-course-checkpoint"
VERSION = 1


def parameters_sha256(center: np.ndarray) -> str:
    """The digest a run started with ``--init`` records of the parameters it started from
    (``init_sha256``), so that whoever reads the run can check the file still holds them."""
    return hashlib.sha256(np.asarray(center).tobytes()).hexdigest()


def save_checkpoint(path, center: np.ndarray, meta: dict, optimizer_state: dict | None = None,
                    extra: dict | None = None) -> None:
    """``extra``: more arrays (``load_extra``), e.g. the states a rollback may return to."""
    path = Path(path)
    arrays = {"center": np.asarray(center, dtype=np.float32),
              "meta": np.array(json.dumps({"format": FORMAT, "version": VERSION, **meta}))}
    for k, v in (optimizer_state or {}).items():
        arrays[f"opt_{k}"] = np.asarray(v)
    for k, v in (extra or {}).items():
        arrays[f"x_{k}"] = np.asarray(v)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _check_sizes(path: Path, max_bytes: int) -> None:
    with zipfile.ZipFile(path) as z:
        if sum(i.file_size for i in z.infolist()) > max_bytes:
            raise ESError(f"checkpoint {path} inflates to more than {max_bytes >> 20} MB")
        for i in z.infolist():
            with z.open(i) as f:
                version = np.lib.format.read_magic(f)
                read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                shape, _, dtype = read[version](f) if version in read else (None, None, None)
            if shape is None or math.prod(shape) * dtype.itemsize > i.file_size:
                raise ESError(f"checkpoint {path}: {i.filename} is not an array of the size it holds")


def load_checkpoint(path, max_bytes: int = 1 << 30) -> tuple[np.ndarray, dict, dict]:
    """``(center, meta, optimizer_state)``; any problem -> ``ESError`` naming the file. The
    arrays may inflate to ``max_bytes`` in all."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.npz"
    if not path.exists():
        raise ESError(f"checkpoint not found: {path}")
    try:
        _check_sizes(path, max_bytes)
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ESError(f"checkpoint {path} is corrupt or not an .npz file ({exc.__class__.__name__}: {exc})") from None
    if "center" not in arrays or "meta" not in arrays:
        raise ESError(f"checkpoint {path} is not an es-course checkpoint (missing 'center' or 'meta')")
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError as exc:
        raise ESError(f"checkpoint {path} has a corrupt header: {exc}") from None
    if meta.get("format") != FORMAT:
        raise ESError(f"checkpoint {path} is not an es-course checkpoint (format {meta.get('format')!r})")
    center = arrays["center"]
    if center.dtype != np.float32 or center.ndim != 1 or not np.all(np.isfinite(center)):
        raise ESError(f"checkpoint {path} has invalid parameters (need finite float32 vector, got {center.dtype} {center.shape})")
    expected = meta.get("num_params")
    if expected is not None and center.size != expected:
        raise ESError(f"checkpoint {path} has {center.size} parameters but its header says {expected}")
    opt = {k[4:]: v for k, v in arrays.items() if k.startswith("opt_")}
    return center, meta, opt


def load_extra(path, max_bytes: int = 1 << 30) -> dict:
    """The ``extra`` arrays a checkpoint was saved with (``{}`` for one without)."""
    path = Path(path)
    try:
        _check_sizes(path, max_bytes)
        with np.load(path, allow_pickle=False) as z:
            return {k[2:]: z[k] for k in z.files if k.startswith("x_")}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ESError(f"checkpoint {path} is corrupt or not an .npz file ({exc.__class__.__name__}: {exc})") from None
