"""Ship a Pong run's center as pong/agent.npz (+ agent.json, agent-curve.png), or under
another name (``--name agent-pixels``: pong/agent-pixels.npz, .json, -curve.png).

    python scripts/ship_pong_agent.py RUN [--checkpoint RUN/checkpoint.npz] [--episodes 20]
        [--seed 700000] [--selected-on "seeds 600000..600039"] [--name agent]

agent.npz is an es-course checkpoint without optimizer state (parameters + JSON header);
agent.json records the command, seed, generation, wall time, env steps, how the checkpoint
was chosen and the result of ``python -m es eval pong/agent.npz --episodes N --seed S``
(agent and random policy) on seeds that must be held out: the script refuses seeds the run
trained on. The agent's row in docs/pong.md (the row of its policy) is rewritten from it.
"""
import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es.checkpoint import load_checkpoint, parameters_sha256, save_checkpoint  # noqa: E402
from es.errors import ESError  # noqa: E402
from es.play import evaluate_checkpoint  # noqa: E402
from es.plots import plot_curve  # noqa: E402
from es.seeding import episode_seeds  # noqa: E402

PONG = Path(__file__).resolve().parents[1] / "pong"
README = PONG.parent / "docs" / "pong.md"


BAR = 0.0     # the shipped agent's own bar: a mean of at least 0 over 20 held-out games


def readme_row(info: dict) -> str:
    e = info["eval"]
    verdict = ("met" if info["meets_bar"] else
               f"not yet: beats random, mean below {BAR:g}" if e["beats_random"] else "not yet")
    gens, steps, seconds = (info.get(f"total_{k}", info[k]) for k in ("generations", "env_steps", "wall_seconds"))
    return (f"| {info['policy']}, seed {info['seed']} | {gens} | {steps / 1e6:.1f}M "
            f"({seconds / 3600:.1f} h) | {e['agent_mean']:.2f} +- {e['agent_std']:.2f}, "
            f"CI [{e['agent_ci95'][0]:.2f}, {e['agent_ci95'][1]:.2f}] | {e['random_mean']:.2f} +- "
            f"{e['random_std']:.2f}, CI [{e['random_ci95'][0]:.2f}, {e['random_ci95'][1]:.2f}] | {verdict} |")


def train_command(cfg: dict, run: Path) -> str:
    """The ``python -m es train`` command that makes this run (same config, same bits)."""
    extra = cfg.get("extra", {})
    parts = ["python -m es train pong", f"--policy {extra.get('policy', 'dense')}",
             f"--keypoints {extra['keypoints']}" if "keypoints" in extra else "",
             *(f"--{flag} {extra[key]}" for flag, key in (("inputs", "inputs"), ("pull", "pull"),
                                                          ("head-inputs", "head_inputs"), ("mix", "mix")) if key in extra),
             f"--hidden {','.join(map(str, cfg['hidden']))}" if cfg["hidden"] else "--hidden ''",
             f"--seed {cfg['seed']} --population {cfg['population']} --sigma {cfg['sigma']:g}",
             f"--learning-rate {cfg['learning_rate']:g} --weight-decay {cfg['weight_decay']:g}",
             f"--max-steps {cfg['max_steps']}", f"--episodes-per-member {cfg['episodes_per_member']}",
             f"--tie-break {extra['tie_break']}" if extra.get("tie_break") else "",
             f"--init {cfg['init']}" if cfg.get("init") else "",
             f"--workers {cfg['workers']} --out {run}"]
    return " ".join(p for p in parts if p)


def ancestors(cfg: dict) -> list:
    """The runs this one started from (``--init``), nearest first, as ``(checkpoint, meta)``:
    their games count as trained on and their hours and env steps as spent. The file must
    still hold the parameters the run started from (``init_sha256``)."""
    out = []
    while cfg.get("init"):
        path = Path(cfg["init"])
        path = path if path.is_absolute() else PONG.parent / path
        try:
            center, meta, _ = load_checkpoint(path)
        except ESError as exc:
            sys.exit(f"{path}: not the checkpoint this run started from ({exc})")
        digest = parameters_sha256(center)
        if digest != cfg.get("init_sha256"):
            sys.exit(f"{path}: not the checkpoint this run started from (its parameters' sha256 {digest}, "
                     f"the run recorded {cfg.get('init_sha256')})")
        out.append((cfg["init"], meta))
        cfg = meta["config"]
    return out


def trained_seeds(meta: dict) -> set:
    cfg = meta["config"]
    return {int(s) for g in range(meta["generation"]) for s in
            episode_seeds(cfg["seed"], g, max(cfg["episodes_per_member"], cfg["center_episodes"]))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--checkpoint", type=Path, default=None, help="a saved checkpoint of RUN [RUN/checkpoint.npz]")
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=700_000, help="first held-out seed [700000]")
    ap.add_argument("--selected-on", default="", help="how the checkpoint was chosen (recorded in agent.json)")
    ap.add_argument("--name", default="agent", help="the files' name under pong/ [agent]")
    args = ap.parse_args()
    center, meta, _ = load_checkpoint(args.checkpoint or args.run / "checkpoint.npz")
    cfg = meta["config"]
    parents = ancestors(cfg)
    trained = set().union(trained_seeds(meta), *(trained_seeds(m) for _, m in parents))
    if trained & set(range(args.seed, args.seed + args.episodes)):
        sys.exit(f"seeds {args.seed}..{args.seed + args.episodes - 1} include games the run "
                 f"{'or the runs it started from ' if parents else ''}trained on")
    policy = meta["problem"]["policy"]["type"].removeprefix("pong_")
    header = {k: meta[k] for k in ("generation", "num_params", "problem", "config", "env_steps", "train_seconds")}
    npz, record, curve = (PONG / f"{args.name}{suffix}" for suffix in (".npz", ".json", "-curve.png"))
    save_checkpoint(npz, center, header)
    metrics = [json.loads(line) for line in (args.run / "metrics.jsonl").read_text().splitlines()]
    metrics = [m for m in metrics if m["generation"] < meta["generation"]]
    plot_curve(metrics, curve, title=f"Pong, {policy} policy, seed {cfg['seed']} "
               f"(training score within {cfg['max_steps']} steps)")
    result = evaluate_checkpoint(npz, episodes=args.episodes, seed=args.seed)
    result.pop("checkpoint", None)
    # a run started from another (--init) spent that one's hours and steps too
    env_steps = meta["env_steps"] + sum(m["env_steps"] for _, m in parents)
    seconds = meta["train_seconds"] + sum(m["train_seconds"] for _, m in parents)
    info = {"command": train_command(cfg, args.run), "policy": policy, "seed": cfg["seed"],
            "generations": meta["generation"], "env_steps": meta["env_steps"],
            "frames": 4 * meta["env_steps"], "wall_seconds": round(meta["train_seconds"], 1),
            "started_from": [{"checkpoint": path, "command": train_command(m["config"], Path(path).parent),
                              "generations": m["generation"], "env_steps": m["env_steps"],
                              "wall_seconds": round(m["train_seconds"], 1), "config": m["config"]}
                             for path, m in parents],
            "total_generations": meta["generation"] + sum(m["generation"] for _, m in parents),
            "total_env_steps": env_steps, "total_wall_seconds": round(seconds, 1),
            "machine": "2 cores (shared VM)", "config": cfg,
            "selected_on": args.selected_on,
            "eval_command": f"python -m es eval pong/{npz.name} --episodes {args.episodes} --seed {args.seed}",
            "eval": result,
            "meets_bar": bool(result["episodes"] >= 20 and result["agent_mean"] >= BAR and result["beats_random"])}
    record.write_text(json.dumps(info, indent=2) + "\n")
    text = README.read_text()
    README.write_text(re.sub(rf"^\| {policy}, seed \d+ \|.*\|$", lambda _: readme_row(info), text, count=1, flags=re.M))
    print(json.dumps({k: info[k] for k in ("generations", "total_generations", "total_env_steps", "total_wall_seconds")} |
                     {k: result[k] for k in ("agent_mean", "agent_ci95", "random_mean", "random_ci95", "beats_random")} |
                     {"meets_bar": info["meets_bar"]}))


if __name__ == "__main__":
    main()
