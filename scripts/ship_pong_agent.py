"""Ship a Pong run's current center as pong/agent.npz (+ agent.json, agent-curve.png).

    python scripts/ship_pong_agent.py runs/pong-dense-s0 [--episodes 20] [--seed 0]

agent.npz is an es-course checkpoint without optimizer state (parameters + JSON header);
agent.json records the command, seed, generation, wall time, env steps and the result of
``python -m es eval pong/agent.npz --episodes N --seed S`` (agent and random policy); the
shipped agent's row in docs/pong.md is rewritten from it.
"""
import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from es.play import evaluate_checkpoint  # noqa: E402
from es.plots import plot_curve  # noqa: E402

PONG = Path(__file__).resolve().parents[1] / "pong"
README = PONG.parent / "docs" / "pong.md"


def readme_row(info: dict) -> str:
    e = info["eval"]
    verdict = ("met" if info["meets_bar"] else
               "not yet: beats random, mean below -15" if e["beats_random"] else "not yet")
    return (f"| dense, seed {info['seed']} | {info['generations']} | {info['env_steps'] / 1e6:.1f}M "
            f"({info['wall_seconds'] / 3600:.1f} h) | {e['agent_mean']:.2f} +- {e['agent_std']:.2f}, "
            f"CI [{e['agent_ci95'][0]:.2f}, {e['agent_ci95'][1]:.2f}] | {e['random_mean']:.2f} +- "
            f"{e['random_std']:.2f}, CI [{e['random_ci95'][0]:.2f}, {e['random_ci95'][1]:.2f}] | {verdict} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    center, meta, _ = load_checkpoint(args.run / "checkpoint.npz")
    cfg = meta["config"]
    header = {k: meta[k] for k in ("generation", "num_params", "problem", "config", "env_steps", "train_seconds")}
    save_checkpoint(PONG / "agent.npz", center, header)
    metrics = [json.loads(line) for line in (args.run / "metrics.jsonl").read_text().splitlines()]
    plot_curve(metrics, PONG / "agent-curve.png", title=f"Pong, dense policy, seed {cfg['seed']} "
               "(training score within 1000 steps)")
    result = evaluate_checkpoint(PONG / "agent.npz", episodes=args.episodes, seed=args.seed)
    result.pop("checkpoint", None)
    info = {"command": f"python -m es train pong --seed {cfg['seed']} --out {args.run} (continued with --resume)",
            "seed": cfg["seed"], "generations": meta["generation"], "env_steps": meta["env_steps"],
            "frames": 4 * meta["env_steps"], "wall_seconds": round(meta["train_seconds"], 1),
            "machine": "2 cores (shared VM)", "config": cfg,
            "eval_command": f"python -m es eval pong/agent.npz --episodes {args.episodes} --seed {args.seed}",
            "eval": result,
            # the course's bar: mean >= -15 over 20 games, 95% intervals of agent and random disjoint
            "meets_bar": bool(result["episodes"] >= 20 and result["agent_mean"] >= -15 and result["beats_random"])}
    (PONG / "agent.json").write_text(json.dumps(info, indent=2) + "\n")
    text = README.read_text()
    README.write_text(re.sub(r"^\| dense, seed \d+ \|.*\|$", lambda _: readme_row(info), text, count=1, flags=re.M))
    print(json.dumps({k: info[k] for k in ("generations", "env_steps", "wall_seconds")} |
                     {k: result[k] for k in ("agent_mean", "agent_ci95", "random_mean", "random_ci95", "beats_random")} |
                     {"meets_bar": info["meets_bar"]}))


if __name__ == "__main__":
    main()
