"""scripts/two_hosts.sh: Redis and master on one network namespace, workers on another.
Runs where network namespaces can be made (root, as in CI); skips cleanly elsewhere."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2 (ip netns)")
def test_two_hosts_train_cartpole_to_the_single_process_result():
    out = subprocess.run(["bash", str(ROOT / "scripts" / "two_hosts.sh")], capture_output=True, text=True,
                         timeout=600, env=subprocess_env())
    if out.returncode == 77:
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "two_hosts: OK" in out.stdout
    assert "same_as_single_process=True" in out.stdout
