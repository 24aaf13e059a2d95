"""Learning curves (matplotlib, headless)."""
from __future__ import annotations


def plot_curve(metrics: list[dict], path, title: str = "", goal: float | None = None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gens = [m["generation"] for m in metrics]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.fill_between(gens, [m["pop_min"] for m in metrics], [m["pop_max"] for m in metrics], alpha=0.2,
                    color="tab:blue", label="population min-max")
    ax.plot(gens, [m["pop_mean"] for m in metrics], color="tab:blue", label="population mean")
    ax.plot(gens, [m["center_return"] for m in metrics], color="tab:red", lw=2, label="center (unperturbed)")
    if goal is not None:
        ax.axhline(goal, color="gray", ls="--", lw=1, label=f"goal {goal:g}")
    ax.set_xlabel("generation")
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    top = ax.secondary_xaxis("top", functions=(lambda x: x, lambda x: x))
    top.set_xlabel(f"{metrics[-1]['env_steps']:,} env steps in {metrics[-1]['train_seconds']:.2f} s of training")
    top.set_xticks([])
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
