"""The sandbox for an ordinary user: bubblewrap (``bwrap``) builds it from ``classroom.sandbox``'s
configuration, in a user namespace, with no capabilities outside it.

Same view as the root sandbox: a new root holding the system directories, Python's
installation and the support code read-only (the answer key hidden), the grader's probe
package, a writable copy of the submission's folder, and a private ``/tmp``, ``/dev``,
``/dev/shm`` and ``/proc`` mounted before any bind (bubblewrap mounts in the order it is told).
The kernel runs as uid 1000 of a new user namespace (the grader's own uid outside it), in its
own PID, IPC and UTS namespaces, in a new session, with ``no_new_privs``, no further user
namespaces (``--disable-userns``) and ``--die-with-parent``: when the process Jupyter launched
dies, the namespace's init dies and the Linux kernel kills everything left in it.

Why bubblewrap: it is the sandbox Flatpak and GNOME ship (Debian's ``bubblewrap``, in most
distributions' base installs), it is small and audited, and it is allowed to create user
namespaces where a distribution restricts them (Ubuntu 24.04's AppArmor profile). The root
sandbox stays hand-written because bubblewrap run by root cannot give each kernel a uid of its
own outside the namespace, which is what lets the grader find and kill anything a submission
left behind (``sandbox.survivors``).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

KERNEL_UID = 1000              # inside the user namespace
OPTIONS = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--new-session", "--cap-drop", "ALL"]


def binary() -> str | None:
    return shutil.which("bwrap")


_HARDENING: list[str] | None = None


def _hardening(bwrap: str) -> list[str]:
    """``--disable-userns`` where this bubblewrap has it (0.8 and later)."""
    global _HARDENING
    if _HARDENING is None:
        try:
            text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
        _HARDENING = ["--disable-userns"] if "--disable-userns" in text else []
    return _HARDENING


def _command(bwrap: str) -> list[str]:
    """bubblewrap with the namespaces, hardening and uid every kernel gets (and the probe too)."""
    return [bwrap, *OPTIONS, *_hardening(bwrap), "--uid", str(KERNEL_UID), "--gid", str(KERNEL_UID)]


def unavailable() -> str:
    """Why bubblewrap cannot build the sandbox here ("" where it can): tried on a throwaway one."""
    bwrap = binary()
    if bwrap is None:
        return ("bubblewrap is not installed (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install "
                "bubblewrap), so kernels cannot get a sandbox of their own")
    argv = [*_command(bwrap), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--perms", "1777",
            "--tmpfs", "/tmp", "true"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not run ({exc})"
    if out.returncode != 0:
        return (f"bubblewrap cannot create user namespaces here ({out.stderr.strip()[:200] or out.returncode}); "
                "allow them (sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces > 0) or grade as root")
    return ""


def argv(config: dict, connection_file: str, extra=(), *, connection: str, system=()) -> list[str]:
    """bubblewrap's command line for the kernel described by ``config`` (``sandbox.kernel_spec``):
    Jupyter's ``connection_file`` appears at ``connection``; ``system`` folders that are links
    (``/bin -> usr/bin``) stay links."""
    a = [*_command(binary()), "--hostname", "es-grade",
         # the kernel's own folders first, so that no bind made after them is covered
         "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777",
         "--tmpfs", "/dev/shm"]
    for src, dst, how in config["binds"]:
        if src in system and os.path.islink(src):          # /bin -> usr/bin on merged-/usr systems
            a += ["--symlink", os.readlink(src), dst]
        else:
            a += ["--ro-bind" if how == "ro" else "--bind", src, dst]
    for path in config["hide"]:                            # an empty, read-only folder in its place
        if os.path.isdir(path):
            a += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path):
            a += ["--ro-bind", "/dev/null", path]
    a += ["--ro-bind", connection_file, connection,
          "--bind", config["home"], "/tmp/home", "--bind", config["mpl"], "/tmp/mpl",
          "--chdir", config["workdir"], "--",
          config["python"], "-m", "ipykernel_launcher", "-f", connection, *extra]
    return a


def exec_kernel(config: dict, connection_file: str, extra=(), *, env: dict, connection: str,
                system=()) -> None:   # pragma: no cover - replaces the launcher
    """Become bubblewrap running the kernel with the environment ``env`` (the process Jupyter
    launched, so that killing it kills the sandbox)."""
    import resource
    for d in (config["home"], config["mpl"]):
        Path(d).mkdir(parents=True, exist_ok=True)
    for dst, src in config.get("seed_files", {}).items():      # matplotlib's font cache: /tmp/mpl/...
        try:
            shutil.copyfile(src, Path(config["mpl"]) / Path(dst).name)
        except OSError:
            pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    a = argv(config, connection_file, extra, connection=connection, system=system)
    try:
        os.execve(a[0], a, env)
    except OSError as exc:
        os.write(2, f"the sandbox could not start bubblewrap ({a[0]}): {exc}\n".encode())
        os._exit(72)
