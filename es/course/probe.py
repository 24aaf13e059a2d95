"""Runs in the student's kernel while it is graded: calls one of the student's functions on
inputs the grader sent and prints what came back, as plain data (``es.course.wire``).

Nothing here awards points. A notebook may change any of it (or ``numpy``, ``builtins``, its
own stdout); all that changes is what its functions appear to return, and the grader, in its
own process, judges that on inputs it chose for this grading run.
"""
MARKER = "@@ES-PROBE@@"


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
            fn, args = namespace[name], req["args"]
            if req.get("elsewhere"):     # in other processes (joblib), as a worker would
                from joblib import Parallel, delayed
                reply = {"value": Parallel(n_jobs=2)(delayed(fn)(*args) for _ in range(2))}
            else:
                import numpy as np
                if req.get("global_seed") is not None:
                    np.random.seed(req["global_seed"])
                reply = {"value": fn(*args)}
                if req.get("draw_after"):
                    reply["after"] = float(np.random.random())
    except BaseException as exc:   # the student's code may raise anything, even SystemExit
        reply = {"error": exc.__class__.__name__, "message": str(exc)[:300]}
    try:
        text = wire.dumps(reply)
    except Exception as exc:
        text = wire.dumps({"error": "TypeError", "message": f"returned something the grader cannot read ({exc})"})
    print(MARKER + text, flush=True)
