#!/usr/bin/env bash
# Milestone 3 on "two PCs": two network namespaces joined by a veth pair. Host A runs
# redis-server and the master, host B runs two workers; CartPole trains to solved over the
# link, and the final parameters must equal a single-process run with the same seed.
# Needs root (ip netns); otherwise it says so and exits 77 (skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-$(command -v python3 || command -v python)}   # the caller's interpreter (tests pass sys.executable)

if [ "$(id -u)" != "0" ] || ! command -v ip >/dev/null; then
    echo "two_hosts: SKIPPED: needs root and iproute2 to create network namespaces"
    exit 77
fi
A="es-a-$$"; B="es-b-$$"; VA="esa$$"; VB="esb$$"
IP_A=10.231.0.1; IP_B=10.231.0.2      # addresses of our own test hosts, inside the namespaces
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
if ! ip netns add "$A" 2>/dev/null; then
    echo "two_hosts: SKIPPED: cannot create network namespaces here (no CAP_SYS_ADMIN/NET_ADMIN)"
    exit 77
fi
ip netns add "$B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add "$IP_A/24" dev "$VA"
ip -n "$B" addr add "$IP_B/24" dev "$VB"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up

# The server as docs/distributed.md sets one up: ACL users es-master and es-worker, passwords in
# files and environment variables, never on a command line.
MASTER_PW=$("$PYTHON" -c "import secrets; print(secrets.token_urlsafe(24))")
WORKER_PW=$("$PYTHON" -c "import secrets; print(secrets.token_urlsafe(24))")
SERVER=$("$PYTHON" -c "from es.distributed.server import redis_server_binary as b; print(b())")
"$PYTHON" -c "from es.distributed.server import acl_lines; import sys; print('\n'.join(acl_lines(*sys.argv[1:])))" \
    "$MASTER_PW" "$WORKER_PW" > "$WORK/users.acl"
printf 'bind %s\nport 6379\nsave ""\nappendonly no\nprotected-mode yes\ndir %s\nloglevel warning\naclfile %s\n' \
    "$IP_A" "$WORK" "$WORK/users.acl" > "$WORK/server.conf"
ip netns exec "$A" "$SERVER" "$WORK/server.conf" > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
printf '%s\n' "$MASTER_PW" > "$WORK/master.pw"; chmod 600 "$WORK/master.pw"

# Host B: the workers start first and wait for the master.
ip netns exec "$B" env ES_REDIS_URL="redis://es-worker@$IP_A:6379/0" ES_REDIS_PASSWORD="$WORKER_PW" \
    PYTHONPATH="$ROOT" "$PYTHON" -m es worker --processes 2 > "$WORK/workers.log" 2>&1 &
PIDS+=($!)

# Host B cannot reach anything but host A: check the link is the only way.
ip netns exec "$B" "$PYTHON" - "$IP_A" <<'PY'
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection((sys.argv[1], 6379), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("two_hosts: host B cannot reach Redis on host A")
PY

ip netns exec "$A" env PYTHONPATH="$ROOT" "$PYTHON" -m es train cartpole --seed 0 \
    --redis "redis://es-master@$IP_A:6379/0" --redis-password-file "$WORK/master.pw" --out "$WORK/run" --no-progress --json > "$WORK/master.out" 2> "$WORK/master.err" || {
    echo "two_hosts: FAILED: the master exited with an error"; cat "$WORK/master.err"; exit 1; }
cat "$WORK/master.out"

PYTHONPATH="$ROOT" "$PYTHON" - "$WORK/run" <<'PY'
import json, sys
import numpy as np
import es
from es.checkpoint import load_checkpoint
run = sys.argv[1]
summary = json.load(open(f"{run}/summary.json"))
reference = es.train(es.config_for("cartpole", seed=0), final_eval=False)
same = np.array_equal(load_checkpoint(run)[0], reference.center)
workers = {json.loads(l).get("workers") for l in open(f"{run}/metrics.jsonl")}
print(f"two_hosts: solved={summary['solved']} eval_mean={summary['eval_mean']} "
      f"same_as_single_process={same} workers_per_generation={sorted(workers)}")
if not (summary["solved"] and same):
    sys.exit("two_hosts: FAILED")
print("two_hosts: OK")
PY
