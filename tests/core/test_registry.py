"""The core never imports Pong: environments, problem kinds and policies plug in (es.registry)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import es
from es.distributed import protocol as P
from es.envs import entry_for, make_problem

ROOT = Path(__file__).resolve().parents[2]


def _python(code, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_the_core_trains_with_pong_absent_and_names_the_missing_plugin():
    out = _python("""
        import sys
        sys.modules["pong"] = None          # as if the package were not there
        import es
        r = es.train(es.config_for("cartpole", seed=0, generations=2, reward_goal=1e9), final_eval=False)
        print("trained", r.summary["generations"])
        try:
            es.config_for("pong")
        except es.ESError as exc:
            print("error:", exc)
        assert not any(m == "pong" or m.startswith("pong.") for m in sys.modules if sys.modules[m] is not None)
    """)
    assert out.returncode == 0, out.stderr
    assert "trained 2" in out.stdout
    assert "unknown environment 'pong'" in out.stdout and "plug-in pong (pong.plugin:register) failed to load" in out.stdout


def test_pong_registers_itself_by_entry_point():
    assert entry_for("ALE/Pong-v5").name == entry_for("Pong").name == "pong"
    problem = make_problem({"kind": "pong", "policy": {"type": "pong_dense", "band": 6, "hidden": []},
                            "max_steps": 10, "num_envs": 2, "threads": 0})
    assert problem.num_params == es.policies.make_policy({"type": "pong_dense", "band": 6, "hidden": []}).num_params
    with pytest.raises(P.BadPayload, match="num_envs must be an integer in"):
        P.validate_spec({"kind": "pong", "policy": {"type": "pong_dense"}, "num_envs": 10 ** 6})
    with pytest.raises(P.BadPayload, match="not env or a plug-in's problem kind"):
        P.validate_spec({"kind": "nope"})
    with pytest.raises(es.ESError, match="--num-envs must be"):
        es.config_for("pong", extra={"policy": "dense", "num_envs": 0})


PLUGIN = '''
import numpy as np
from es import registry
from es.interfaces import Problem

class Sphere(Problem):
    """f(x) = -|x - 1|^2 plus seeded noise: a problem any process rebuilds from its spec."""
    def __init__(self, dim): self.dim = dim
    @classmethod
    def from_spec(cls, spec): return cls(spec["dim"])
    num_params = property(lambda self: self.dim)
    def spec(self): return {"kind": "sphere", "dim": self.dim}
    def initial_params(self, seed): return np.zeros(self.dim, np.float32)
    def run_episodes(self, params, rows, seeds):
        noise = np.array([np.random.default_rng(int(s)).normal() * 0.01 for s in seeds])
        return -((params[rows] - 1.0) ** 2).sum(axis=1) + noise, np.ones(len(rows), np.int64)
    def play(self, params, seeds):
        return self.run_episodes(np.asarray(params)[None], np.zeros(len(seeds), np.int64), seeds)

def check(spec):
    if not (isinstance(spec.get("dim"), int) and 1 <= spec["dim"] <= 1000):
        raise ValueError("dim must be an integer in [1, 1000]")

def register():
    registry.register_problem("sphere", from_spec=Sphere.from_spec, validate_spec=check)
    registry.register_env("sphere", make_problem=lambda config, one_thread: Sphere(8), title="a test plug-in",
                          defaults={"hidden": [], "train": {"population": 32, "sigma": 0.1, "learning_rate": 0.1,
                                                            "generations": 30}})
'''


@pytest.mark.slow
def test_a_third_party_plugin_trains_in_process_and_on_workers(tmp_path):
    (tmp_path / "sphere_plugin.py").write_text(PLUGIN)
    env = {"ES_PLUGINS": "sphere_plugin:register", "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    out = _python("""
        import json, numpy as np, es
        from es.distributed import protocol as P
        one = es.train(es.config_for("sphere", seed=3), final_eval=False)
        two = es.train(es.config_for("sphere", seed=3, workers=2), final_eval=False)   # loky workers load it too
        P.validate_spec({"kind": "sphere", "dim": 8})
        try:
            P.validate_spec({"kind": "sphere", "dim": 10 ** 9})
        except P.BadPayload as exc:
            print("refused:", exc)
        print(json.dumps({"same": bool(np.array_equal(one.center, two.center)),
                          "gain": float(one.metrics[-1]["center_return"] - one.metrics[0]["center_return"])}))
    """, **env)
    assert out.returncode == 0, out.stderr
    assert "refused: problem spec: dim must be an integer in [1, 1000]" in out.stdout
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["same"] and facts["gain"] > 1.0, facts
    help_text = subprocess.run([sys.executable, "-m", "es", "train", "--help"], capture_output=True, text=True,
                               env={**os.environ, **env}).stdout
    assert "sphere     a test plug-in" in help_text


def test_a_broken_plugin_does_not_take_the_core_down(tmp_path):
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('boom')\n")
    out = _python("""
        import es
        es.train(es.config_for("cartpole", seed=0, generations=1, reward_goal=1e9), final_eval=False)
        try:
            es.config_for("nosuchenv-v0")
        except es.ESError as exc:
            print(exc)
    """, ES_PLUGINS="broken_plugin:register", PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    assert out.returncode == 0, out.stderr
    assert "plug-in broken_plugin:register (broken_plugin:register) failed to load: RuntimeError: boom" in out.stdout


@pytest.mark.parametrize("spec", [
    [], {"kind": "nope"}, {"env_id": "CartPole-v1"},
    {"kind": "env", "env_id": "os:system"}, {"kind": "env", "env_id": "NoSuchEnv-v0"},
    {"kind": "env", "env_id": "CartPole-v1", "hidden": [4097]}, {"kind": "env", "env_id": "CartPole-v1", "hidden": [1] * 9},
    {"kind": "env", "env_id": "CartPole-v1", "hidden": [True]}, {"kind": "env", "env_id": "CartPole-v1", "max_steps": 0},
    {"kind": "env", "env_id": "CartPole-v1", "max_steps": 10 ** 7},
    {"kind": "pong", "policy": {"type": "pong_dense"}, "num_envs": 10 ** 6},
])
def test_the_network_path_refuses_what_the_registry_refuses_with_its_words(spec):
    """One set of rules for a spec from elsewhere: the registry's (each kind's own check);
    the task record's decoder only turns the refusal into a BadPayload."""
    from es import registry
    with pytest.raises(ValueError) as by_registry:
        registry.validate_spec(spec)
    with pytest.raises(P.BadPayload) as by_network:
        P.validate_spec(spec)
    assert str(by_network.value) == str(by_registry.value)
    registry.validate_spec({"kind": "env", "env_id": "CartPole-v1", "hidden": [4096] * 8, "max_steps": 10 ** 6})
