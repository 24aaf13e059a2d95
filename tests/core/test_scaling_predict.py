"""benchmarks/scaling.py --predict: the model's arithmetic on made-up part costs (no games)."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scaling():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("scaling_bench", ROOT / "benchmarks" / "scaling.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def parts(per_chunk_ms=0.0, fixed_ms=0.0, tell_ms=0.0, us_per_step=250.0):
    """Part rows as --parts prints them: equal CPU per step for every chunk size."""
    rows = [{"kind": "part", "part": "step_cost", "policy": "dense",
             "us_per_step_by_chunk": {str(k): us_per_step for k in (1, 2, 4, 8, 16, 32)}},
            {"kind": "part", "part": "master", "policy": "dense", "population": 128, "ask_ms": 0.0,
             "tell_ms": tell_ms, "checkpoint_ms": 0.0, "metrics_ms": 0.0},
            {"kind": "part", "part": "dispatch", "evaluator": "in-process", "workers": 1, "generation_ms": 0.0}]
    rows += [{"kind": "part", "part": "dispatch", "evaluator": "joblib", "workers": 2, "chunks": c,
              "generation_ms": fixed_ms + c * per_chunk_ms / 2} for c in (8, 32, 128)]
    return rows


def predicted(scaling, rows, n=16):
    scaling.ROWS.clear()
    scaling.predict(rows, (n,), trials=20)
    out = [r for r in scaling.ROWS if r["kind"] == "prediction"]
    assert out and all(r["predicted"] is True for r in out)
    return out[0]


def test_no_overhead_and_equal_cores_predict_the_ideal(scaling):
    row = predicted(scaling, parts())
    # 128 members in guided chunks of 4, 2, 2 per worker, the center played by the master on the
    # 17th share of the cores: nothing is lost.
    assert row["efficiency_spread_0.0"] == pytest.approx(1.0, abs=0.01)
    assert row["inputs"]["chunks"] == 48 and row["inputs"]["per_chunk_ms"] == 0.0
    assert row["efficiency_spread_0.1"] < row["efficiency_spread_0.0"]          # uneven cores cost
    assert row["efficiency_spread_0.0_master_on_one_core"] < row["efficiency_spread_0.0"]


def test_each_cost_lowers_the_prediction_by_what_it_adds(scaling):
    one_gen = 500 * 129 * 250e-6                       # seconds in one process
    ideal_16 = one_gen / 16
    row = predicted(scaling, parts(per_chunk_ms=50.0))                # 3 chunks per worker, 50 ms each
    assert row["inputs"]["per_chunk_ms"] == pytest.approx(50.0, rel=1e-3)
    assert row["efficiency_spread_0.0"] == pytest.approx(ideal_16 / (ideal_16 + 0.15), rel=0.02)
    row = predicted(scaling, parts(fixed_ms=200.0, tell_ms=100.0))
    assert row["efficiency_spread_0.0"] == pytest.approx((one_gen + 0.1) / 16 / (ideal_16 + 0.3), rel=0.02)
