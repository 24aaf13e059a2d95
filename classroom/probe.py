"""Runs in the student's kernel while it is graded: calls one of the student's functions on
inputs the grader sent and prints what came back, as plain data (``classroom.wire``).

Nothing here awards points. A notebook may change any of it (or ``numpy``, ``builtins``, its
own stdout); all that changes is what its functions appear to return, and the grader, in its
own process, judges that on inputs it chose for this grading run. What ``observe`` reports
besides the value (processes a helper ran in, Python lines run) is what a notebook that
patches this module could fake; values it cannot, without computing them.
"""
MARKER = "@@ES-PROBE@@"


def observe(fn, args, namespace=None, global_seed=None, elsewhere=False, draw_after=False, spy=None,
            count_lines=False, reference=(), seeds_only=0, changed=False) -> dict:
    """``{"value": fn(*args)}`` plus what was asked for:

    - ``global_seed``: seed the global NumPy state first; ``draw_after``: its next
      ``np.random.random()`` after the call (``"after"``), to see whether ``fn`` used it;
    - ``elsewhere``: run it twice in other processes (joblib) instead, as a worker would;
    - ``spy={"name": ..., "args": [i, j], "delay": s}``: while ``fn`` runs, ``namespace[name]``
      records the process and its arguments ``i, j`` of each call, and waits ``delay`` s
      (``"spied"``: ``[[pid, arg_i, arg_j], ...]``), to see how work was split over processes;
    - ``count_lines``: Python lines run outside the installed packages (``"lines"``), to
      see whether ``fn`` loops in Python where one batched operation was asked for;
    - ``reference=[name, ...]``: while ``fn`` runs, ``namespace[name]`` is the course's own
      function of that name (``REFERENCE``), so ``fn`` is graded apart from the helpers it calls;
      ``reference={name: source}``: the same, defined from the source the grader sent (a
      graded kernel need not be able to import the reference).
    - ``changed``: the positions of the arguments ``fn`` changed in place (``"changed"``), to
      see whether it left its inputs as the contract asks;
    - ``seeds_only=N``: ``args`` are ``(center, seed, returns, sigma, lr)``, with ``returns`` a
      list per generation; run the update ``fn(center, seed, g, returns[g], sigma, lr)``
      generation after generation here (``"value"``: the centers, one row per generation) and
      in N worker processes that get the center once and then only each generation's returns
      (``"workers"``: each one's centers, or the error it raised).
    """
    import numpy as np
    if seeds_only:
        return _seeds_only(fn, args, int(seeds_only))
    if elsewhere:
        from joblib import Parallel, delayed
        return {"value": Parallel(n_jobs=2)(delayed(fn)(*args) for _ in range(2))}
    if global_seed is not None:
        np.random.seed(global_seed)
    reply: dict = {}
    if spy:
        import os
        import tempfile
        fd, log = tempfile.mkstemp(prefix="es-spy-")
        os.close(fd)
        real = namespace.get(spy["name"])
        namespace[spy["name"]] = _spy(real, log, tuple(spy.get("args", ())), float(spy.get("delay", 0)))
    before = [_snapshot(a) for a in args] if changed else None
    saved = {name: namespace.get(name, _ABSENT) for name in reference}
    for name in reference:
        namespace[name] = _reference(name, reference[name] if isinstance(reference, dict) else None)
    try:
        if count_lines:
            reply["value"], reply["lines"] = _count_lines(fn, args)
        else:
            reply["value"] = fn(*args)
    finally:
        for name, value in saved.items():
            if value is _ABSENT:
                namespace.pop(name, None)
            else:
                namespace[name] = value
        if spy:
            namespace[spy["name"]] = real
            with open(log) as f:
                reply["spied"] = [[int(w) for w in line.split()] for line in f if line.strip()]
            os.unlink(log)
    if draw_after:
        reply["after"] = float(np.random.random())
    if changed:
        reply["changed"] = [i for i, (a, b) in enumerate(zip(args, before)) if not _same(_snapshot(a), b)]
    return reply


def _snapshot(value):
    """A deep copy of an argument's contents (arrays, lists, tuples, dicts, numbers, strings);
    a random generator or any other object stands for itself."""
    import numpy as np
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_snapshot(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, _snapshot(v)) for k, v in value.items()])
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    return ("object", id(value))


def _same(a, b) -> bool:
    return a == b


def _seeds_only(fn, args, workers: int) -> dict:
    """The master's run of the update here, and ``workers`` forked processes that receive the
    generation-0 center once, then one message per generation holding its returns alone."""
    import multiprocessing as mp
    import numpy as np
    center, seed, returns, sigma, lr = args
    if "fork" not in mp.get_all_start_methods():      # Windows: each worker gets every generation's returns at once
        from joblib import Parallel, delayed
        runs = Parallel(n_jobs=2)(delayed(_generations)(fn, center, seed, returns, sigma, lr, i + 1)
                                  for i in range(workers))
        return {"value": _generations(fn, center, seed, returns, sigma, lr), "workers": runs}
    master = _generations(fn, center, seed, returns, sigma, lr)     # a stub raises here, before any process starts
    ctx = mp.get_context("fork")
    links, procs = [], []
    for i in range(workers):
        here, there = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(fn, there, i + 1), daemon=True)
        p.start()
        there.close()
        here.send((np.array(center, copy=True), seed, sigma, lr))
        links.append(here)
        procs.append(p)
    for chunks in [*returns, None]:        # after generation 0, only returns travel; None: the end
        for here in links:
            try:
                here.send(None if chunks is None else [np.array(c, copy=True) for c in chunks])
            except (BrokenPipeError, ConnectionResetError):
                pass                       # that worker stopped (its code raised): its reply says why
    runs = []
    for here in links:
        runs.append(here.recv() if here.poll(120) else "TimeoutError: no answer within 120 s")
        here.close()
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    return {"value": master, "workers": runs}


def _generations(fn, center, seed, returns, sigma, lr, worker: int = 0):
    """``fn`` generation after generation from ``center``: the centers, one row per generation.
    A worker process (``worker`` > 0) starts from a global NumPy state of its own, as a process
    on another machine would."""
    import numpy as np
    if worker:
        np.random.seed(worker)
    center, out = np.array(center, copy=True), []     # the caller's center stays as it was: the workers start from it
    for g, chunks in enumerate(returns):
        center = fn(center, seed, g, [np.array(c, copy=True) for c in chunks], sigma, lr)
        out.append(np.array(center, copy=True))
    return np.stack(out) if out and all(np.shape(o) == np.shape(out[0]) for o in out) else out


def _worker(fn, link, worker: int):
    """One worker: the center of generation 0, then one message of returns per generation."""
    import numpy as np
    try:
        np.random.seed(worker)
        center, seed, sigma, lr = link.recv()
        out, g = [], 0
        while True:
            chunks = link.recv()
            if chunks is None:
                break
            center = fn(center, seed, g, chunks, sigma, lr)
            out.append(np.array(center, copy=True))
            g += 1
        link.send(np.stack(out) if out and all(np.shape(o) == np.shape(out[0]) for o in out) else out)
    except BaseException as exc:       # the student's code raised: say what, as text
        link.send(f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        link.close()


_ABSENT = object()
REFERENCE = {"decode_result": "classroom.references:decode_payload",
             "chunks_to_requeue": "es.distributed.master:chunks_to_requeue"}


def _reference(name, source=None):
    import importlib
    if source is not None:
        import json
        import struct
        import time
        import numpy as np
        scope = {"np": np, "json": json, "struct": struct, "time": time}
        exec(compile(source, f"<reference {name}>", "exec"), scope)
        return scope[REFERENCE[name].split(":")[1]]
    module, attr = REFERENCE[name].split(":")
    return getattr(importlib.import_module(module), attr)


def _spy(real, log, picks, delay):
    def spied(*args, **kwargs):
        import os
        import time
        with open(log, "a") as f:
            f.write(" ".join(str(int(v)) for v in (os.getpid(), *(args[i] for i in picks))) + "\n")
        time.sleep(delay)
        return real(*args, **kwargs)
    return spied


def _count_lines(fn, args):
    import os
    import sys
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))       # the folder of this package
    support = [d for d in os.environ.get("ES_GRADE_INSTALLED", "").split(os.pathsep) if d]   # set by the grader
    installed = tuple({os.path.join(d, "") for d in (sys.prefix, sys.base_prefix, sys.exec_prefix, package, *support)})
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return None if frame.f_code.co_filename.startswith(installed) else local

    old = sys.gettrace()
    sys.settrace(calls)
    try:
        value = fn(*args)
    finally:
        sys.settrace(old)
    return value, count


def call(namespace: dict, request: str) -> None:
    from . import wire
    try:
        req = wire.loads(request, make_rng=True)
        name = req["name"]
        if name not in namespace:
            reply = {"missing": True}
        elif req["op"] == "kind":
            obj = namespace[name]
            reply = {"callable": callable(obj), "module": str(getattr(obj, "__module__", "") or "")}
        elif req["op"] == "get":
            reply = {"value": namespace[name]}
        else:
            reply = observe(namespace[name], req["args"], namespace, **req.get("observe", {}))
    except BaseException as exc:   # the student's code may raise anything, even SystemExit
        reply = {"error": exc.__class__.__name__, "message": str(exc)[:300], "where": _where(exc)}
    try:
        text = wire.dumps(reply)
    except Exception as exc:
        text = wire.dumps({"error": "TypeError", "message": f"returned something the grader cannot read ({exc})"})
    print(MARKER + text, flush=True)


def _where(exc) -> list:
    """The student's own frames of a traceback (the notebook's cells and files, not this module,
    Python's or the installed packages'): ``[[function, line, text], ...]``, innermost last."""
    import linecache
    import os
    import sys
    skip = tuple({os.path.join(d, "") for d in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.abspath(__file__)),
                  *[d for d in os.environ.get("ES_GRADE_INSTALLED", "").split(os.pathsep) if d])})
    frames, tb = [], exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(skip):
            text = linecache.getline(code.co_filename, tb.tb_lineno).strip()
            frames.append([code.co_name, tb.tb_lineno, text[:160]])
        tb = tb.tb_next
    return frames[-3:]
