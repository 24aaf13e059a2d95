"""The grader's side of a call into the student's kernel.

A check gets a ``Remote`` where it expects the student's function. Calling it runs the function
in the kernel (``classroom.probe``) on the arguments the check chose, and gives back what the
function returned, decoded as plain data. The check, the reference, the comparison and the
points stay in the grader's process.
"""
from __future__ import annotations

from . import wire
from .probe import MARKER, REFERENCE

PACKAGE = "_es_grade"     # the grader's copy of probe.py and wire.py, on the graded kernel's import path


class KernelError(Exception):
    """The student's code raised, or its kernel answered with something unreadable."""


class KernelGone(Exception):
    """The call did not finish in time (``reason == "timeout"``) or the kernel died."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def ask(execute, name: str, op: str, **fields) -> dict:
    """One request to the kernel; ``execute(source) -> printed text`` runs a cell there."""
    text = execute(f"from {PACKAGE}.probe import call as _es_probe\n"
                   f"_es_probe(globals(), {wire.dumps({'name': name, 'op': op, **fields})!r})")
    lines = [line[line.rindex(MARKER):] for line in text.splitlines() if MARKER in line]
    if not lines:
        raise KernelError("the kernel printed no answer (was print or sys.stdout replaced?)")
    try:
        reply = wire.loads(lines[-1][len(MARKER):].strip())
    except Exception as exc:
        raise KernelError(f"the kernel's answer is unreadable ({exc.__class__.__name__})") from None
    if not isinstance(reply, dict):
        raise KernelError("the kernel's answer is unreadable")
    if "error" in reply:
        if reply["error"] == "NotImplementedError":
            raise NotImplementedError(str(reply.get("message", "")))
        raise KernelError(f"{reply['error']}: {reply.get('message', '')}{_where(reply.get('where'))}")
    return reply


def _where(frames) -> str:
    """Where in the student's code it raised: `` (in f, line 3: `x[5]`; ...)``, innermost last."""
    if not isinstance(frames, list):
        return ""
    parts = []
    for f in frames[-3:]:
        if isinstance(f, list) and len(f) == 3 and isinstance(f[0], str) and isinstance(f[1], int):
            parts.append(f"in {f[0][:60]}, line {f[1]}" + (f": `{str(f[2])[:120]}`" if f[2] else ""))
    return f" ({'; '.join(parts)})" if parts else ""


def _reference_sources(names) -> dict:
    """The grader's own reference functions named in ``probe.REFERENCE``, as source text."""
    import importlib
    import inspect
    out = {}
    for name in names:
        module, attr = REFERENCE[name].split(":")
        out[name] = inspect.getsource(getattr(importlib.import_module(module), attr))
    return out


class Remote:
    """A student's function that lives in the kernel."""

    def __init__(self, execute, name: str):
        self._execute, self.name = execute, name

    def observe(self, *args, **opts) -> dict:
        """``classroom.probe.observe`` in the kernel: the value and what ``opts`` asked for."""
        if isinstance(opts.get("reference"), (list, tuple)):
            opts = {**opts, "reference": _reference_sources(opts["reference"])}
        return ask(self._execute, self.name, "call", args=list(args), observe=opts)

    def __call__(self, *args):
        return self.observe(*args).get("value")
