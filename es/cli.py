"""``python -m es``: train, evaluate, run Redis workers, build the notebooks, grade submissions.

Bad input exits with status 2 and one line on stderr that says what is wrong.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import version as es_version
from . import envs, registry  # noqa: F401 -- importing es.envs registers the core's environments
from .config import config_for
from .errors import ESError
from .options import OPTIONS
from .play import evaluate_checkpoint
from .training import load_run_config, make_problem_for, train


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own status for usage errors)
        broken = "".join(f"; {e}" for e in registry.load_errors())   # e.g. a pong.py in the folder shadows pong/
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help){broken}\n")


def _hidden(text: str) -> list[int]:
    try:
        return [int(h) for h in text.split(",") if h.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--hidden takes comma-separated layer sizes like 16,16 (or '' for linear), got {text!r}")


def _flag_options():
    """The options table's rows that are plain ``--flags`` of ``train``."""
    return [o for o in OPTIONS.values() if o.flag_type is not None]


def _env_flags() -> dict:
    """``{flag: (environments, EnvFlag)}``: the train flags environments add (Pong: --policy, ...).
    A flag that several environments add (``--policy``: Pong's and locomotion's) is one argument
    that takes any of their choices, its help naming each; each environment's ``check_config``
    judges the value (before, the environment registered last took the flag over, and which one
    that was depended on the order the plug-ins were found in)."""
    rows: dict[str, list] = {}
    for name, entry in registry.envs().items():
        for f in entry.flags:
            rows.setdefault(f.flag, []).append((name, f))
    out = {}
    for flag, pairs in rows.items():
        first = pairs[0][1]
        if any((f.key, f.type) != (first.key, first.type) for _, f in pairs):
            raise ESError(f"{flag} means different settings to {', '.join(n for n, _ in pairs)}")
        helps: dict[str, list] = {}              # one help text, the environments that give it
        for name, f in pairs:
            helps.setdefault(f.help, []).append(name)
        text = "; ".join(f"{', '.join(names)}: {h}" for h, names in helps.items())
        choices = () if any(not f.choices for _, f in pairs) else tuple(dict.fromkeys(c for _, f in pairs
                                                                                     for c in f.choices))
        out[flag] = (tuple(n for n, _ in pairs), registry.EnvFlag(flag, first.key, text, first.type, choices))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m es", description="OpenAI-style Evolution Strategies in pure NumPy.",
                epilog="course commands (plug-ins): " + ", ".join(
                    f"{c.name} ({c.help})" for c in registry.commands().values()) if registry.commands() else None)
    p.add_argument("--version", action="version", version=f"es-course {es_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    listing = "\n".join(f"  {name:<10} {entry.title}: " + ", ".join(f"{k} {v}" for k, v in entry.defaults.items())
                        for name, entry in registry.envs().items())
    t = sub.add_parser("train", help="train a policy with ES", formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Train a policy with OpenAI-ES. Each known environment comes with defaults that "
                                   "train well (listed below); any flag overrides them. Defaults shown in [brackets] "
                                   "are the options table's (es/options.py), for environments that set none.",
                       epilog=f"environments and the settings they change:\n{listing}\n  any registered gymnasium id "
                              "also works (e.g. MountainCar-v0)\n\nexamples:\n  python -m es train cartpole\n"
                              "  python -m es train cartpole --seed 3 --out runs/c3\n"
                              "  python -m es train --resume runs/c3 --generations 200")
    t.add_argument("env", nargs="?", help="environment name or gymnasium id (optional with --resume)")
    for o in _flag_options():
        default = f" [{o.default}]" if o.default is not None else ""
        t.add_argument(o.flag, type=o.flag_type, default=None, choices=o.choices or None, help=o.help + default,
                       metavar=None if o.choices else {int: "N", float: "X"}.get(o.flag_type, "VALUE"))
    t.add_argument("--hidden", type=_hidden, default=None, help="hidden layer sizes, e.g. 16,16; '' = linear policy [16]")
    t.add_argument("--no-antithetic", action="store_true", help="plain instead of mirrored sampling")
    for envs, f in _env_flags().values():
        t.add_argument(f.flag, dest=f"extra_{f.key}", type=f.type, choices=f.choices or None, default=None,
                       help=f.help, metavar=None if f.choices else {int: "N", float: "X"}.get(f.type, "VALUE"))
    t.add_argument("--out", type=Path, default=None, help="run directory (default runs/<env>-seed<S>-<time>)")
    t.add_argument("--resume", type=Path, default=None, metavar="DIR", help="continue the run in DIR")
    t.add_argument("--init", type=Path, default=None, metavar="CHECKPOINT",
                   help="start from these parameters (checkpoint, run directory or agent) with a fresh optimizer")
    t.add_argument("--redis", nargs="?", const="embedded", default=None, metavar="URL",
                   help="distribute over Redis: alone, an embedded loopback server and --workers local workers; "
                        "redis://es-master@HOST:PORT/DB: that server, workers anywhere (docs/distributed.md)")
    t.add_argument("--redis-password-file", type=Path, default=None, metavar="FILE",
                   help="redis: read the password from FILE (default: $ES_REDIS_PASSWORD, else the URL)")
    t.add_argument("--lease-seconds", type=float, default=10.0,
                   help="redis: a chunk whose worker is silent this long is handed out again [10]")
    t.add_argument("--chunk-deadline", type=float, default=None,
                   help="redis: hand a chunk out again this long after queueing it [max(60 s, 5x slowest)]")
    t.add_argument("--spot-checks", type=int, default=None,
                   help="redis: about this many members the master replays per generation to catch lying workers "
                        "[set by --catch-within]; 0: none, and new workers are not verified")
    t.add_argument("--catch-within", type=int, default=None, metavar="N",
                   help="redis: replay each member of a worker the master did not start with the probability that "
                        "catches a liar by its N-th lie with probability >= 0.999 [442: 1 member in 64.5; "
                        "docs/distributed.md]")
    t.add_argument("--probation", type=int, default=1, metavar="N",
                   help="redis: results of a new worker id that must equal a trusted evaluation (the master's or a "
                        "trusted worker's) before the id's results are used [1]")
    t.add_argument("--chunks", type=int, default=None,
                   help="redis/dask: chunks per generation [chunks that shrink towards a generation's end, cut "
                        "for the workers known]")
    t.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="evaluate on Dask: 'local' (a LocalCluster of --workers processes) or tcp://HOST:8786")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--json", action="store_true", help="print the summary as one JSON line at the end")

    w = sub.add_parser("worker", help="evaluate chunks for a master through Redis")
    w.add_argument("--redis", default=None, metavar="URL",
                   help="redis://es-worker@HOST:PORT/DB (default: $ES_REDIS_URL)")
    w.add_argument("--redis-password-file", type=Path, default=None, metavar="FILE",
                   help="read the password from FILE (default: $ES_REDIS_PASSWORD, else the URL)")
    w.add_argument("--processes", type=int, default=1, help="worker processes on this machine")

    e = sub.add_parser("eval", help="play a checkpoint on the real environment")
    e.add_argument("checkpoint", type=Path, help="checkpoint.npz, a run directory, or a shipped agent .npz")
    e.add_argument("--episodes", type=int, default=20, help="episodes to play [20]")
    e.add_argument("--seed", type=int, default=None, help="first episode seed (default: the run's eval seed)")
    e.add_argument("--gif", type=Path, default=None, help="write a GIF of the first episode")
    e.add_argument("--no-random", action="store_true", help="skip the random-policy baseline")
    return p


def cmd_train(args) -> int:
    given = {o.name: getattr(args, o.name) for o in _flag_options()}
    given["hidden"] = args.hidden
    if args.no_antithetic:
        given["antithetic"] = False
    chosen = {f.key: (flag, env, getattr(args, f"extra_{f.key}")) for flag, (env, f) in _env_flags().items()
              if getattr(args, f"extra_{f.key}") is not None}           # an environment's own flags: config.extra
    if args.resume is not None:
        if args.init is not None:
            raise ESError("--init starts a new run from a checkpoint; --resume continues one (pick one)")
        if args.out is not None and args.out != args.resume:
            raise ESError("--out and --resume name different directories; --resume continues the run where it is")
        config = load_run_config(args.resume)
        if args.env is not None and args.env != config.env:
            raise ESError(f"{args.resume} is a {config.env} run, not {args.env}")
        changed = [flag for key, (flag, _, value) in chosen.items() if config.extra.get(key) != value]
        if changed:
            raise ESError(f"cannot change {', '.join(changed)} when resuming (the run uses {config.extra})")
        for k, v in given.items():
            resumable = sorted(o.flag for o in OPTIONS.values() if o.resumable)
            if v is not None and not OPTIONS[k].resumable and v != getattr(config, k):
                raise ESError(f"cannot change {k} when resuming (the run uses {getattr(config, k)!r}); "
                              f"only {', '.join(resumable)} may change")
            if v is not None and OPTIONS[k].resumable:
                setattr(config, k, v)
        config.validate()
        run_dir = args.resume
    else:
        if args.env is None:
            raise ESError("name an environment (e.g. python -m es train cartpole) or --resume a run directory")
        extra = {key: value for key, (_, _, value) in chosen.items()}
        config = config_for(args.env, **given, extra=extra, init=str(args.init) if args.init is not None else None)
        for flag, envs, _ in chosen.values():
            if not any(registry.env(config.env) is registry.env(env) for env in envs):
                names = envs[0] if len(envs) == 1 else f"{', '.join(envs[:-1])} and {envs[-1]}"
                raise ESError(f"{flag} is a {names} setting; {config.env} has no such setting")
        run_dir = args.out or Path("runs") / f"{config.env}-seed{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"run directory: {run_dir}", file=sys.stderr)
    if args.redis is not None and args.dask is not None:
        raise ESError("--redis and --dask are two ways to distribute the same run: pick one")
    if args.redis is not None:
        result = _train_with_redis(args, config, run_dir)
    elif args.dask is not None:
        result = _train_with_dask(args, config, run_dir)
    else:
        result = train(config, run_dir=run_dir, resume=args.resume is not None, progress=not args.no_progress)
    s = result.summary
    verdict = "SOLVED" if s.get("solved") else "not solved"
    print(f"{verdict}: center scored {s['eval_mean']:.1f} +- {s['eval_std']:.1f} over {s['eval_episodes']} episodes "
          f"(seeds {s['eval_seeds'][0]}..{s['eval_seeds'][1]}); solved means >= {s['solve_threshold']}")
    print(f"trained {s['generations']} generations in {s['train_seconds']:.2f} s ({s['env_steps']:,} env steps), "
          f"stopped on {s['stopped']}" + (f", after {s['restarts']} restart(s)" if s.get("restarts") else ""))
    print(f"wrote {run_dir}/{{config.json, metrics.jsonl, checkpoint.npz, curve.png, summary.json}}")
    if args.json:
        print(json.dumps(s))
    return 0


def _train_with_redis(args, config, run_dir):
    from .distributed.connection import read_password   # optional: redis
    from .distributed.master import RedisEvaluator
    if not (0 < args.lease_seconds <= 3600) or (args.chunks is not None and args.chunks < 1):
        raise ESError("--lease-seconds must be in (0, 3600] and --chunks >= 1")
    if args.spot_checks is not None and args.spot_checks < 0:
        raise ESError(f"--spot-checks must be >= 0, got {args.spot_checks}")
    if args.catch_within is not None and args.catch_within < 1:
        raise ESError(f"--catch-within must be >= 1, got {args.catch_within}")
    if args.probation < 0:
        raise ESError(f"--probation must be >= 0, got {args.probation}")
    if args.chunk_deadline is not None and not args.chunk_deadline > 0:
        raise ESError(f"--chunk-deadline must be > 0, got {args.chunk_deadline}")
    embedded = args.redis == "embedded"
    local_workers = config.workers if (embedded or config.workers > 1) else 0
    if embedded and local_workers < 2 and args.workers is None:
        local_workers = config.workers = 2
    server = None
    procs = []
    try:
        password = None
        if embedded:
            from .distributed.server import EmbeddedRedis
            server = EmbeddedRedis().start()
            url, worker_url = server.master_url, server.worker_url
            print(f"redis: embedded server on 127.0.0.1:{server.port} (users es-master and es-worker, random "
                  "passwords)", file=sys.stderr)
        else:
            url = worker_url = args.redis
            password = read_password(args.redis_password_file)
        problem = make_problem_for(config)
        # The local workers' ids are issued here and handed to them privately (their environment):
        # they are this master's own processes, trusted from their first result (no probation).
        ids = [os.urandom(8).hex() for _ in range(local_workers)]
        evaluator = RedisEvaluator(problem, url, chunks=args.chunks, lease_seconds=args.lease_seconds,
                                   spot_checks=args.spot_checks, chunk_deadline=args.chunk_deadline,
                                   probation=args.probation, password=password, workers=local_workers, trusted=ids,
                                   catch_within=args.catch_within)
        env = {**os.environ, "ES_REDIS_URL": worker_url}
        if password:
            env["ES_REDIS_PASSWORD"] = password
        largest = max(b - a for a, b in evaluator.bounds(config.population))
        warm = json.dumps({"spec": problem.spec(),
                           "episodes": largest * config.episodes_per_member + config.center_episodes})
        procs = [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**env, "ES_WORKER_ID": wid, "ES_WARM": warm},
                                  stderr=subprocess.DEVNULL) for wid in ids]
        if local_workers:
            seconds = evaluator.wait_for_workers(ids)
            print(f"redis: started {local_workers} local workers (ready in {seconds:.1f} s)", file=sys.stderr)
        return train(config, problem, run_dir=run_dir, resume=args.resume is not None, evaluator=evaluator,
                     progress=not args.no_progress)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if server is not None:
            server.stop()


def _train_with_dask(args, config, run_dir):
    from .distributed.dask_evaluator import DaskEvaluator   # optional: dask
    if args.chunks is not None and args.chunks < 1:
        raise ESError(f"--chunks must be >= 1, got {args.chunks}")
    problem = make_problem_for(config, one_thread=True)   # a Dask worker process per core
    workers = config.workers if args.workers is not None else None
    evaluator = DaskEvaluator(problem, args.dask, workers=workers, chunks=args.chunks)
    try:
        return train(config, problem, run_dir=run_dir, resume=args.resume is not None, evaluator=evaluator,
                     progress=not args.no_progress)
    finally:
        evaluator.close()


def cmd_worker(args) -> int:
    from .distributed.connection import read_password   # optional: redis
    from .distributed.worker import run_workers
    url = args.redis or os.environ.get("ES_REDIS_URL")
    if not url:
        raise ESError("name the Redis server: python -m es worker --redis redis://es-worker@HOST:PORT/0 "
                      "(or set ES_REDIS_URL), with the password in ES_REDIS_PASSWORD or --redis-password-file")
    if args.processes < 1:
        raise ESError(f"--processes must be >= 1, got {args.processes}")
    try:
        return run_workers(url, args.processes, read_password(args.redis_password_file))
    except KeyboardInterrupt:
        return 0


def cmd_eval(args) -> int:
    out = evaluate_checkpoint(args.checkpoint, episodes=args.episodes, seed=args.seed, gif=args.gif,
                              random_baseline=not args.no_random)
    out.pop("agent_returns", None)
    print(json.dumps(out))
    return 0


COMMANDS = {"train": cmd_train, "eval": cmd_eval, "worker": cmd_worker}


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that every ``finally`` runs (servers, workers and
    temporary folders are cleaned up as on Ctrl-C)."""


def _on_sigterm(*_):
    raise Terminated()


def setup_logging() -> None:
    """What the library logs (es.*, pong.*, classroom.*) goes to stderr, one plain line each."""
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")


def main(argv=None) -> int:
    setup_logging()
    argv = sys.argv[1:] if argv is None else list(argv)
    plugin = registry.commands().get(argv[0]) if argv else None
    if plugin is not None:       # a plug-in's command (the course's notebooks, release, grade)
        return plugin.run(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command in ("train", "eval"):
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return COMMANDS[args.command](args)
    except ESError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the last checkpoint is intact (continue with --resume)", file=sys.stderr)
        return 130
    except Terminated:
        print("terminated; the last checkpoint is intact (continue with --resume)", file=sys.stderr)
        return 143
