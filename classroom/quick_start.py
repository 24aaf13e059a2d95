"""The grader's processes start a second sooner.

nbformat imports jsonschema, and jsonschema, where the optional rfc3987-syntax package is
installed (jupyter-events pulls it in with every JupyterLab), builds a Lark grammar at import:
0.9 s of the 1.5 s a grading child took to start, once per notebook graded (a class of 100
students: 10 minutes of CPU). It only adds jsonschema's "iri" format check, which no schema we
validate (nbformat's) uses. So the grader's own processes do without it. Kernels, JupyterLab
and the rest of the user's Python never see this."""
import sys

SKIPPED = ("rfc3987_syntax",)


def skip_unused_imports() -> None:
    """Make ``import rfc3987_syntax`` fail at once (jsonschema catches the ImportError)."""
    for name in SKIPPED:
        sys.modules.setdefault(name, None)
