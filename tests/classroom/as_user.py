"""Run a command as an ordinary user (``nobody``), from a root test run, with this Python and
this checkout reachable: what an instructor without root has.

The Python that runs the tests may live where an ordinary user cannot go (``/root/.pyenv``
behind a ``/root`` of mode 0700). In a private mount namespace (``unshare --mount``, so
nothing changes for the rest of the machine), every folder on the way to the paths the
command needs that "other" users cannot enter is replaced by a tmpfs of mode 0755 holding
just the next folder on the way, bound back from the original. Then the command runs with
the uid and gid of ``nobody``, no supplementary groups, and a home folder of its own.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NOBODY = 65534

SETUP = r'''
import json, os, stat, sys, ctypes
libc = ctypes.CDLL(None, use_errno=True)
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else str(s).encode()
    if libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {src} on {dst}")
spec = json.loads(sys.argv[1])
mount(None, "/", None, MS_REC | MS_PRIVATE)
hold = spec["hold"]
children = {}                      # closed folder -> the children on the way to what is needed
for need in spec["paths"]:
    parts = [p for p in need.split("/") if p]
    for i in range(len(parts) - 1):
        folder = "/" + "/".join(parts[:i + 1])
        st = os.stat(folder)
        if not (st.st_mode & stat.S_IXOTH and st.st_mode & stat.S_IROTH):
            children.setdefault(folder, set()).add(parts[i + 1])
for k, folder in enumerate(sorted(children, key=lambda f: f.count("/"))):   # parents first
    keep = os.path.join(hold, str(k))
    os.makedirs(keep, exist_ok=True)
    mount(folder, keep, None, MS_BIND | MS_REC)
    mount("tmpfs", folder, "tmpfs", 0, "mode=755")
    for child in children[folder]:
        target = os.path.join(folder, child)
        (os.makedirs(target) if os.path.isdir(os.path.join(keep, child)) else open(target, "w").close())
        mount(os.path.join(keep, child), target, None, MS_BIND | MS_REC)
home = spec["home"]
os.setgroups([])
os.setgid(spec["uid"])
os.setuid(spec["uid"])
env = {**spec["env"], "HOME": home, "TMPDIR": spec["tmp"], "USER": "nobody", "LOGNAME": "nobody"}
os.chdir(spec["cwd"])
os.execvpe(spec["argv"][0], spec["argv"], env)
'''


def available() -> str:
    """Why a command cannot be run as an ordinary user here ("" when it can)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "needs root on Linux to switch to an ordinary user"
    if shutil.which("unshare") is None:
        return "needs util-linux's unshare"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"mount namespaces refused: {probe.stderr.strip()[:200]}"
    return ""


def run(argv, *, cwd, base: Path, paths=(), env=None, timeout=1800) -> subprocess.CompletedProcess:
    """``argv`` as ``nobody`` in ``cwd``, with ``base`` (created, owned by nobody) as its home and
    temporary folder, and Python's installation, ``cwd`` and ``paths`` reachable."""
    base.mkdir(parents=True, exist_ok=True)
    for sub in ("home", "tmp"):
        (base / sub).mkdir(exist_ok=True)
    for p in [base, *base.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "ES_COURSE_FAST")}
    needs = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, sys.executable, cwd, base, *paths)}
    # where the originals are held while tmpfs covers them: outside every folder it covers
    hold = Path(tempfile.mkdtemp(prefix=".es-as-user-", dir="/tmp"))
    spec = {"paths": sorted(needs), "hold": str(hold), "uid": NOBODY, "home": str(base / "home"),
            "tmp": str(base / "tmp"), "cwd": str(cwd), "env": {**keep, **(env or {})}, "argv": list(map(str, argv))}
    try:
        return subprocess.run(["unshare", "--mount", sys.executable, "-I", "-c", SETUP, json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(hold, ignore_errors=True)
