"""The picture of ``benchmarks/scaling.py`` (``docs/scaling.png``): speed-up and efficiency
against workers, measured and, from ``--predict`` lines, predicted."""
import numpy as np


def _key(r) -> tuple:
    return r.get("code", "new"), r["policy"], r["population"], r["evaluator"], r["workers"]


def points_from_rounds(rows) -> list[dict]:
    """Points for the round lines that have none (a run cut short before its summary): the
    median over its rounds, as the summary would have it, marked ``"from_rounds": true``."""
    have = {_key(r) for r in rows if r.get("kind") == "point"}
    groups: dict = {}
    for r in rows:
        if r.get("kind") == "round" and _key(r) not in have:
            groups.setdefault(_key(r), []).append(r)
    out = []
    for (code, policy, population, way, n), rs in groups.items():
        med = lambda k: round(float(np.median([r[k] for r in rs])), 3)   # noqa: E731
        out.append({"kind": "point", "code": code, "policy": policy, "population": population, "evaluator": way,
                    "workers": n, "rounds": len(rs), "bare_speedup": med("bare_speedup"), "speedup": med("speedup"),
                    "efficiency": med("efficiency"), "efficiency_range": [min(r["efficiency"] for r in rs),
                                                                         max(r["efficiency"] for r in rs)],
                    "worst_generation": med("worst_generation"), "startup_seconds": med("startup_seconds"),
                    "from_rounds": True})
    return out


def plot(rows, path) -> None:
    """Per policy and population: the speed-up against workers (measured, with the ideal line and
    the bare games' ceiling) and the efficiency (measured: filled; ``--predict`` rows given to
    ``--replot``: hollow, labelled predicted)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    points = [r for r in rows if r.get("kind") == "point"] + points_from_rounds(rows)
    predicted = [r for r in rows if r.get("kind") == "prediction" and not r.get("round_trip_added_ms")]
    panels = sorted({(r["policy"], r["population"]) for r in points})
    if not panels:
        return
    fig, axes = plt.subplots(len(panels), 2, figsize=(10.4, 4.4 * len(panels)), squeeze=False)
    styles = {"joblib": ("tab:blue", "o"), "redis": ("tab:red", "s"), "dask": ("tab:green", "^")}
    nudge = {"joblib": 0.93, "redis": 1.0, "dask": 1.075}      # side by side on the efficiency panel
    for (ax, ax_eff), (policy, population) in zip(axes, panels):
        mine = [r for r in points if (r["policy"], r["population"]) == (policy, population)]
        guess = [r for r in predicted if (r["policy"], r["population"]) == (policy, population)]
        ns = sorted({r["workers"] for r in mine})
        ax.plot(ns, ns, color="gray", ls=":", lw=1.5, label="ideal")
        bare = {r["workers"]: r["bare_speedup"] for r in mine}
        ax.plot(sorted(bare), [bare[n] for n in sorted(bare)], color="black", lw=1, label="bare games (ceiling)")
        for way, (color, marker) in styles.items():
            for code, ls in (("new", "-"), ("before", "--")):
                pts = sorted((r["workers"], r["speedup"]) for r in mine
                             if r["evaluator"] == "in-process" or (r["evaluator"] == way and r.get("code", "new") == code))
                if len(pts) > 1:
                    ax.plot(*zip(*pts), color=color, marker=marker, ls=ls, alpha=1.0 if code == "new" else 0.5,
                            label=f"ES {way}" + (" (--compare-root)" if code == "before" else ""))
                eff = sorted((r["workers"], r["efficiency"]) for r in mine
                             if r["evaluator"] == way and r.get("code", "new") == code)
                eff = [(n * nudge[way], e) for n, e in eff]
                if eff:
                    ax_eff.plot(*zip(*eff), color=color, marker=marker, ls="none", ms=8, alpha=1.0 if code == "new" else 0.5,
                                label=f"{way}, measured" + (" (--compare-root)" if code == "before" else ""))
            g = sorted((r["workers"], r["efficiency_spread_0.0"], r["efficiency_spread_0.1"]) for r in guess
                       if r["evaluator"] == way)
            if g:
                n_, e0, e1 = zip(*g)
                n_ = [n * nudge[way] for n in n_]
                ax_eff.vlines(n_, e1, e0, color=color, lw=2)
                ax_eff.plot(n_, e0, color=color, marker=marker, ls="none", ms=8, mfc="white",
                            label=f"{way}, PREDICTED from --parts (equal / +-10% cores)")
                ax_eff.plot(n_, e1, color=color, marker=marker, ls="none", ms=5, mfc="white")
        if max(ns) > 4:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("worker processes")
        ax.set_ylabel("speed-up over one process")
        cores = mine[0].get("cores")
        ax.set_title(f"Pong {policy}, population {population}, {mine[0]['max_steps']}-step cap: measured ({cores} cores)",
                     fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=0.3, which="both")
        n_all = sorted(set(ns) | {r["workers"] for r in guess})
        ax_eff.axhline(0.9, color="gray", ls="--", lw=1, label="goal at 16 workers (0.9)")
        ax_eff.set_xscale("log", base=2)
        ax_eff.set_xticks(n_all, [str(n) for n in n_all])
        ax_eff.set_xlim(min(n_all) / 1.4, max(n_all) * 1.4)
        lowest = min([r["efficiency"] for r in mine if r["evaluator"] != "in-process"]
                     + [v for r in guess for k, v in r.items() if k.startswith("efficiency_spread_") and "one_core" not in k])
        highest = max(r["efficiency"] for r in mine if r["evaluator"] != "in-process")   # above 1: the ceiling's noise
        ax_eff.set_ylim(min(0.5, lowest - 0.05), max(1.05, highest + 0.05))
        ax_eff.set_xlabel("worker processes")
        ax_eff.set_ylabel("efficiency (ES speed-up / bare speed-up)")
        ax_eff.set_title("efficiency: measured (filled), predicted (hollow)", fontsize=9)
        ax_eff.legend(fontsize=7, loc="lower left")
        ax_eff.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
