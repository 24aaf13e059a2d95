"""The layers (docs/design.md): es imports no other package of this project; pong and
locomotion plug into es and know nothing of the course or each other; classroom sits on them. No import cycle anywhere,
function-local imports included."""
import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("es", "pong", "locomotion", "classroom")
ALLOWED = {"es": set(), "pong": {"es"}, "locomotion": {"es"}, "classroom": {"es", "pong", "locomotion"}}


def module_graph() -> dict:
    """module -> the project modules it imports (every import statement, at any depth)."""
    mods = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            rel = p.relative_to(ROOT).with_suffix("")
            mods[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = p

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = defaultdict(set)
    for name, path in mods.items():
        base = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    b = base
                    for _ in range(node.level - 1):
                        b = b.rpartition(".")[0]
                    mod = f"{b}.{mod}" if mod else b
                targets = [f"{mod}.{a.name}" for a in node.names] + [mod]
            else:
                continue
            for t in targets:
                r = resolve(t)
                if r and r != name and not name.startswith(r + "."):
                    graph[name].add(r)
    return graph


def cycles(graph) -> list:
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(module_graph()) == []


def test_each_package_imports_only_the_layers_below_it():
    wrong = sorted(f"{a} -> {b}" for a, bs in module_graph().items() for b in bs
                   if b.split(".")[0] != a.split(".")[0] and b.split(".")[0] not in ALLOWED[a.split(".")[0]])
    assert wrong == []


def test_policies_problems_and_evaluators_declare_their_role():
    """Interfaces are declared (es.interfaces), not probed: each policy, problem and evaluator
    class subclasses its role, and an instance passes the runtime check."""
    from es.envs.problems import EnvProblem, FunctionProblem
    from es.evaluators import LocalEvaluator
    from es.interfaces import Evaluator, Policy, Problem
    from es.parallel import ParallelEvaluator
    from es.policies import MLPPolicy
    from pong.policy import PongConvPolicy, PongDensePolicy
    declared = {Policy: (MLPPolicy, PongDensePolicy, PongConvPolicy), Problem: (EnvProblem, FunctionProblem),
                Evaluator: (LocalEvaluator, ParallelEvaluator)}
    for role, classes in declared.items():
        assert all(role in c.__mro__ for c in classes), role
    problem = EnvProblem("CartPole-v1", [4], None)
    assert isinstance(problem, Problem) and isinstance(problem.policy, Policy)
    assert isinstance(LocalEvaluator(problem), Evaluator)
