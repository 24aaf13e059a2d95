"""docs/pong.md's ablation table is what the runs' own metrics say (scripts/pong_ablations.py)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_ablation_table_in_the_docs_is_the_scripts_output():
    spec = importlib.util.spec_from_file_location("pong_ablations", ROOT / "scripts" / "pong_ablations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.table()
    assert table.count("\n") >= 4                          # a header, a rule and a row per run
    assert table in (ROOT / "docs" / "pong.md").read_text()
