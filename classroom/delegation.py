"""No points for the answer key: graded code that uses the implementation it re-implements.

The grader reads the submission's code (never runs it for this) and follows each graded
name to its definition in the notebook (``def``, or an assignment), then to the notebook's
own helpers that it calls, resolving the notebook's imports: ``centered_ranks =
es.shaping.centered_ranks``, ``from es.shaping import centered_ranks as cr`` then ``cr(x)``,
or a ``train_cartpole`` that calls ``es.train`` are all found. Graded code that builds
imports or code at run time (``__import__``, ``importlib``, ``exec``, ``eval``, ``runpy``)
is refused outright, since it could reach anything. A notebook that executes or reads
``solutions/`` loses every check. Students keep what the notebooks hand them (e.g.
``es.envs.cartpole.run_cartpole_batch`` and ``es.policies.MLPPolicy`` in notebooks 01-02).

``solutions/`` is found in every string of the code that names it as a path component,
whole or as a piece: a literal path (``"/srv/course/solutions/01_cartpole.ipynb"``), the
pieces of ``os.path.join(root, "solutions", name)`` and of ``pathlib`` paths
(``Path(root) / "solutions"``), and the literal parts of f-strings (``f"{root}/solutions/{name}"``).

Not caught: copying the reference's source text into the notebook; a name whose letters are
built at run time (``"sol" + "utions"``, ``chr``, decoding, reading it from a file or the
environment), or reaching the reference through names built from strings inside objects the
scan cannot follow. Only the sandbox stops those: its kernel has no ``solutions/`` to find. The kernel's own report
of where a function was defined (``__module__``) is a second, weaker line (see
``classroom.grade``).
"""
from __future__ import annotations

import ast
import re

# check -> module paths (and package-level names) its graded code must not use: declared with
# each check (classroom.check._register)
from .check import FORBIDDEN  # noqa: F401
ALWAYS = ("classroom", "pong.replay")
DYNAMIC = {"__import__", "importlib", "exec", "eval", "compile", "runpy", "execfile"}
# a string that names solutions/ as a path component: "solutions", "/x/solutions/01.ipynb", the
# pieces of os.path.join(root, "solutions", ...), Path(root) / "solutions", f"{root}/solutions/..."
SOLUTIONS = re.compile(r"(^|[/\\])solutions($|[/\\])|solutions['\"]", re.IGNORECASE)


def _source(cell_source: str) -> str:
    """Python from a cell: IPython magics and shell lines become comments."""
    return "\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line for line in cell_source.splitlines())


class _Module:
    """What the notebook's top level defines and imports."""

    def __init__(self, sources: list[str]):
        self.defs: dict[str, list[ast.AST]] = {}
        self.aliases: dict[str, str] = {}        # local name -> dotted path it was imported as
        for src in sources:
            try:
                tree = ast.parse(_source(src))
            except SyntaxError:
                continue
            for node in tree.body:
                self._top(node)

    def _top(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defs.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name):
                        self.defs.setdefault(name.id, []).append(node.value)
        elif isinstance(node, ast.Import):
            for a in node.names:
                self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, (ast.If, ast.With, ast.Try, ast.For, ast.While)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    self._top(child)
                elif isinstance(child, (ast.ExceptHandler,)):
                    for c in child.body:
                        self._top(c)


def _dotted(node, aliases: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = aliases.get(node.id, node.id)
    return ".".join([head, *reversed(parts)])


def _uses(module: _Module, name: str) -> tuple[set[str], set[str]]:
    """Dotted names and dynamic-code builtins reachable from ``name``'s definitions."""
    seen, todo, dotted, dynamic = set(), [name], set(), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in module.aliases:
            dotted.add(module.aliases[n])
        for node in module.defs.get(n, []):
            local = set()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                local = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
                local |= {x.id for x in ast.walk(node) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import):
                    dotted.update(a.name for a in sub.names)
                    local.update(a.asname or a.name.split(".")[0] for a in sub.names)
                elif isinstance(sub, ast.ImportFrom) and sub.module:
                    dotted.update(f"{sub.module}.{a.name}" for a in sub.names)
                elif isinstance(sub, ast.Attribute):
                    d = _dotted(sub, module.aliases)
                    if d:
                        dotted.add(d)
                elif isinstance(sub, ast.Name):
                    if sub.id in DYNAMIC:
                        dynamic.add(sub.id)
                    if sub.id in module.aliases:
                        dotted.add(module.aliases[sub.id])
                    elif sub.id in module.defs and sub.id not in local:
                        todo.append(sub.id)
    return dotted, dynamic


def findings(sources: list[str], checks: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """check name -> why it scores 0, for the checks whose graded code delegates.
    ``checks``: check name -> the notebook names it grades."""
    out = {}
    for src in sources:
        code = _source(src)
        magics = [line for line in src.splitlines() if line.lstrip().startswith(("%", "!"))]
        strings = []
        try:
            strings = [n.value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        except SyntaxError:
            pass
        if any(SOLUTIONS.search(s) for s in strings + magics):
            return {c: f"{c}: 0 points: the notebook reads or runs solutions/ (the answer key)" for c in checks}
    module = _Module(sources)
    for check, names in checks.items():
        for name in names:
            dotted, dynamic = _uses(module, name)
            if dynamic:
                out[check] = (f"{check}: 0 points: {name} builds code or imports at run time "
                              f"({', '.join(sorted(dynamic))}); write it out")
                break
            banned = [d for d in sorted(dotted) for f in FORBIDDEN.get(check, ()) + ALWAYS
                      if d == f or d.startswith(f + ".")]
            if banned:
                out[check] = (f"{check}: 0 points: {name} uses {banned[0]}, the reference implementation this "
                              "exercise asks you to write yourself")
                break
    return out
