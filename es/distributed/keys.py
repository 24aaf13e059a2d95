"""The Redis keys of a run (one run per database): what the protocol writes and what the
server's ACL roles allow (the course repository's ``es.distributed.protocol`` documents each)."""
PREFIX = "es"
TASK, JOBS, LEASES, RESULTS = f"{PREFIX}:task", f"{PREFIX}:jobs", f"{PREFIX}:leases", f"{PREFIX}:results"


def ready_field(worker: str) -> str:
    """The ``es:leases`` field where a worker the master started says it is ready (``worker.READY``)."""
    return f"ready:{worker}"
