"""scripts/two_hosts.sh: Redis and master on one network namespace, workers on others, each
``--delay-ms`` away (tc netem, or scripts/delay_relay.py where the kernel has no netem).
Runs where network namespaces can be made (root, as in CI); skips cleanly elsewhere."""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from child_env import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="needs root and iproute2 (ip netns)")


def _hosts(*args, timeout=600):
    out = subprocess.run(["bash", str(ROOT / "scripts" / "two_hosts.sh"), *args], capture_output=True, text=True,
                         timeout=timeout, env=subprocess_env())
    if out.returncode == 77:
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.slow
@needs_root
def test_two_hosts_train_cartpole_to_the_single_process_result():
    out = _hosts()
    assert "two_hosts: OK" in out
    assert "same_as_single_process=True" in out


@pytest.mark.slow
@needs_root
def test_three_worker_hosts_two_milliseconds_away_give_the_single_process_result():
    out = _hosts("--hosts", "3", "--workers-per-host", "1", "--delay-ms", "2")
    assert "two_hosts: OK" in out and "hosts=3" in out and "delay=none" not in out, out
    assert "same_as_single_process=True" in out


@pytest.mark.slow
@needs_root
def test_the_host_benchmark_prints_an_efficiency_per_round():
    out = _hosts("--bench", "--hosts", "2", "--workers-per-host", "1", "--delay-ms", "2", "--rounds", "1",
                 "--population", "16", "--max-steps", "20", "--generations", "4")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert rows[-1]["benchmark"] == "hosts" and rows[-1]["hosts"] == 2 and rows[-1]["efficiency"] > 0, rows
    assert rows[0]["one_host_steps_per_s"] > 0 and rows[0]["hosts_steps_per_s"] > 0


def _echo_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve():
        conn, _ = srv.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def test_the_delay_relay_delays_each_way_and_keeps_the_bytes_in_order():
    target = _echo_server()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    relay = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "delay_relay.py"), "127.0.0.1", str(port),
                              "127.0.0.1", str(target), "20"], stdout=subprocess.PIPE, text=True)
    try:
        assert "delay_relay:" in relay.stdout.readline()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times, got = [], b""
            for i in range(5):
                msg = f"ping {i};".encode() * 100
                t0 = time.perf_counter()
                s.sendall(msg)
                while len(got) < (i + 1) * len(msg):
                    got += s.recv(65536)
                times.append(time.perf_counter() - t0)
        assert got == b"".join(f"ping {i};".encode() * 100 for i in range(5))
        assert min(times) >= 0.040, times          # 20 ms there, 20 ms back
    finally:
        relay.terminate()
        relay.wait(10)
