"""A feedback file per student (``--feedback DIR``: ``DIR/<student>.md``, or ``.html`` with
``--feedback-format html``): who they were graded as and why, their points per milestone,
every check with its points and message, for Pong what was replayed and how their agent
played against a random player, the notes, and the command that grades them again on the
same inputs."""
from __future__ import annotations

import html
import re
from pathlib import Path

from .records import MILESTONES, Student, Tally, extras_points, tallied


def _pong(p: dict) -> list[str]:
    """What the grader did with a Pong run, in sentences."""
    out = []
    if p.get("replay") == "replays":
        eps = p.get("episodes") or []
        out.append(f"Replay: your run replays. All {p.get('generations')} generation(s) were recomputed from the "
                   "recorded returns, from your seed, and lead exactly to your checkpoint"
                   + (f" (largest relative difference {p['chain_max_diff']:.2g})" if p.get("chain_max_diff") else "")
                   + f"; {len(eps)} sampled episode(s) were played again and gave the recorded scores"
                   + (f" ({p['seconds']:.0f} s)." if isinstance(p.get("seconds"), (int, float)) else "."))
        for e in eps[:8]:
            if isinstance(e, list) and len(e) == 4:
                out.append(f"  generation {e[0]}, member {e[1]}: recorded {e[2]:+.5f}, played again {e[3]:+.5f}")
    elif p.get("replay") == "rejected":
        out.append(f"Replay: not accepted: {p.get('reason', '')}")
    if isinstance(p.get("agent_mean"), (int, float)):
        a, r = p.get("agent_ci") or [0, 0], p.get("random_ci") or [0, 0]
        seeds = p.get("seeds") or ["?", "?"]
        out.append(f"Your agent: mean score {p['agent_mean']:+.2f}, 95% interval [{a[0]:+.2f}, {a[1]:+.2f}] over "
                   f"{p.get('games')} full games of ALE/Pong-v5 (seeds {seeds[0]}..{seeds[1]}, never seen in "
                   f"training). A random player on the same seeds: {p['random_mean']:+.2f} [{r[0]:+.2f}, {r[1]:+.2f}].")
        out.append("Verdict: beats random (the intervals do not overlap)." if p.get("beats_random") else
                   "Verdict: does not beat random yet (the agent's interval must lie entirely above the random "
                   "player's); train on: re-running the training cell resumes the run.")
    if p.get("identity"):
        out.append(f"Identity used for the run: {p['identity']}.")
    return out


# an answer cell as released: the prompt, then the placeholder the student replaces
PROMPT, PLACEHOLDER = "**Your answer:**", "*(write it here: your instructor reads it; it earns no points from the checks)*"


def _questions(answers: list) -> list:
    """The inline questions of one notebook: each question, the student's answer and the
    reference answer, for the instructor to read (the checks give them no points)."""
    out: list = [("h3", "Inline questions (no points from the checks: read by hand)")]
    for q in answers:
        if not isinstance(q, dict):
            continue
        answer = str(q.get("answer", "")).replace(PLACEHOLDER, "").strip().removeprefix(PROMPT).strip()
        if not answer:
            answer = "(no answer written)"
        out += [("p", str(q.get("question", "")).strip()), ("quote", f"Your answer: {answer}"),
                ("p", str(q.get("reference", "")).strip())]
    return out


def blocks(s: Student, tally: Tally | None = None) -> list:
    """The feedback as blocks: ("h1"|"h2"|"h3"|"p"|"quote", text), ("table", header, rows), ("ul",
    items), ("code", text); ``tally``: ``s``'s rows and totals, when the class has them already."""
    tally = tally or tallied([s])[0]
    book, rows = tally.totals, tally.rows
    out: list = [("h1", f"Feedback for {s.name}"),
                 ("p", f"Graded as {s.name}: {s.how}.")]
    shown = lambda v: "ungraded" if v is None else v      # noqa: E731
    parts = ", ".join(f"{m} {shown(book[m])}/{sum(r['max'] for r in rows if r['milestone'] == m)}" for m in MILESTONES)
    line = f"Total: {shown(book['total'])} / {book['max']} ({parts})."
    if extras_points():
        line += f" Extras: {shown(book['extras'])} / {extras_points()} (a bonus, not in the total)."
    out.append(("p", line))
    if book["status"] != "graded":
        out.append(("p", "Not graded yet: the grader's own machinery failed on part of this submission (not your "
                    f"code), so that part has no points until it is graded again. {book['status']}"))
    by_notebook: dict[str, list] = {}
    for r in rows:
        by_notebook.setdefault(r["notebook"], []).append(r)
    results = {res.get("course_notebook"): res for res in s.results}
    for course, checks in by_notebook.items():
        res = results.get(course)
        got, mx = sum(r["points"] or 0 for r in checks), sum(r["max"] for r in checks)
        ungraded = any(r["points"] is None for r in checks)
        out.append(("h2", f"{course}: {'ungraded' if ungraded else got} / {mx}"))
        if res is None:
            out.append(("p", f"No notebook {course}.ipynb was found in {s.root.name}/."))
        else:
            where = Path(res["submission"])
            try:
                where = where.relative_to(s.root.parent)
            except ValueError:
                pass
            out.append(("p", f"Notebook: {where}" + (f" ({res['seconds']:.0f} s to grade)." if res.get("seconds") else ".")))
            if res.get("error"):
                out.append(("p", f"Error: {res['error']}"))
        out.append(("table", ["check", "milestone", "points", "message"],
                    [[r["name"], r["milestone"], f"{shown(r['points'])} / {r['max']}",
                      r["message"] + (f" ({r['detail']})" if r.get("detail") else "")] for r in checks]))
        for r in checks:
            if isinstance(r.get("pong"), dict):
                out.append(("h3", "Your Pong run"))
                out.append(("ul", _pong(r["pong"])))
        if res is not None and res.get("answers"):
            out += _questions(res["answers"])
        if res is not None and res.get("notes"):
            out.append(("ul", [f"note: {n}" for n in res["notes"]]))
    if s.notes:
        out += [("h2", "Notes"), ("ul", list(s.notes))]
    seeds = sorted({res.get("input_seed") for res in s.results if res.get("input_seed") is not None})
    if seeds:
        out.append(("h2", "Grading again on the same inputs"))
        seed = seeds[0] if len(seeds) == 1 else "SEED"
        out.append(("p", "Every check drew its inputs from seed " + ", ".join(map(str, seeds))
                    + ". This grades the same submission again on exactly those inputs:"))
        out.append(("code", f"python -m classroom grade {s.root} --student {s.name} --input-seed {seed}"))
    isolation = {res.get("isolation") for res in s.results} - {None}
    if "none" in isolation:
        out.append(("p", "Warning: graded without the sandbox ("
                    + next((res.get("isolation_note", "") for res in s.results if res.get("isolation_note")), "")
                    + ")."))
    return out


def markdown(bl: list) -> str:
    md = []
    cell = lambda t: str(t).replace("|", "\\|").replace("\n", " ")       # noqa: E731
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            md += ["#" * int(kind[1]) + " " + b[1], ""]
        elif kind == "p":
            md += [b[1], ""]
        elif kind == "quote":
            md += ["> " + line for line in str(b[1]).splitlines()] + [""]
        elif kind == "ul":
            md += [f"- {x}" for x in b[1]] + [""]
        elif kind == "code":
            md += ["```", b[1], "```", ""]
        elif kind == "table":
            md += ["| " + " | ".join(b[1]) + " |", "|" + "---|" * len(b[1])]
            md += ["| " + " | ".join(cell(c) for c in row) + " |" for row in b[2]] + [""]
    return "\n".join(md)


def to_html(bl: list, title: str) -> str:
    e = html.escape
    body = []
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3", "p"):
            body.append(f"<{kind}>{e(b[1])}</{kind}>")
        elif kind == "quote":
            body.append(f"<blockquote>{e(b[1])}</blockquote>")
        elif kind == "ul":
            body.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in b[1]) + "</ul>")
        elif kind == "code":
            body.append(f"<pre><code>{e(b[1])}</code></pre>")
        elif kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in b[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:.3em .5em;text-align:left;vertical-align:top}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{e(title)}</title><style>{style}</style>"
            f"</head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_feedback(s: Student, folder, fmt: str = "md", tally: Tally | None = None) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", s.name) or "student"
    bl = blocks(s, tally)
    target = folder / f"{name}.{'html' if fmt == 'html' else 'md'}"
    target.write_text(to_html(bl, f"Feedback for {s.name}") if fmt == "html" else markdown(bl))
    return target
