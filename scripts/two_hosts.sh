#!/usr/bin/env bash
# Milestone 3 on "several PCs": network namespaces joined by a bridge. Host 0 runs redis-server
# and the master; hosts 1..N run K workers each, every one of them `DELAY` ms away from the
# server in each direction (tc netem where the kernel has it, else scripts/delay_relay.py).
#
#   scripts/two_hosts.sh                       # 1 worker host, 2 workers: CartPole to solved, the
#                                              # result equal to one process (the test's check)
#   scripts/two_hosts.sh --hosts 4 --delay-ms 2
#   scripts/two_hosts.sh --bench --hosts 4 --workers-per-host 1 --delay-ms 2 [--rounds 2]
#       Pong (dense, population 128, 500-step cap): env steps/s of the steady generations with
#       the workers spread over the hosts, against the same processes on host 0 alone, in the
#       same run; one JSON line per round and a summary line ("efficiency").
#
# Needs root (ip netns); otherwise it says so and exits 77 (skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-$(command -v python3 || command -v python)}   # the caller's interpreter (tests pass sys.executable)

HOSTS=1; PER_HOST=2; DELAY_MS=0; BENCH=0; ROUNDS=2; POPULATION=128; MAX_STEPS=500; GENERATIONS=5; WARMUP=2
POLICY=dense
while [ $# -gt 0 ]; do
    case "$1" in
        --hosts) HOSTS=$2; shift 2;;
        --workers-per-host) PER_HOST=$2; shift 2;;
        --delay-ms) DELAY_MS=$2; shift 2;;
        --bench) BENCH=1; shift;;
        --rounds) ROUNDS=$2; shift 2;;
        --population) POPULATION=$2; shift 2;;
        --max-steps) MAX_STEPS=$2; shift 2;;
        --generations) GENERATIONS=$2; shift 2;;
        --policy) POLICY=$2; shift 2;;
        -h|--help) sed -n '2,16p' "$0"; exit 0;;
        *) echo "two_hosts: unknown argument $1" >&2; exit 2;;
    esac
done
if ! [ "$HOSTS" -ge 1 ] 2>/dev/null || [ "$HOSTS" -gt 200 ]; then echo "two_hosts: --hosts must be 1..200" >&2; exit 2; fi

if [ "$(id -u)" != "0" ] || ! command -v ip >/dev/null; then
    echo "two_hosts: SKIPPED: needs root and iproute2 to create network namespaces"
    exit 77
fi
TAG=$$
NS0="es-h0-$TAG"; BR="esbr$TAG"
IP0=10.231.0.1                         # host 0 (server, master), inside its namespace; host i is .(i+1)
WORK=$(mktemp -d)
PIDS=()
NAMESPACES=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "${NAMESPACES[@]:-}"; do [ -n "$ns" ] && ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
if ! ip netns add "$NS0" 2>/dev/null; then
    echo "two_hosts: SKIPPED: cannot create network namespaces here (no CAP_SYS_ADMIN/NET_ADMIN)"
    exit 77
fi
NAMESPACES+=("$NS0")
ip -n "$NS0" link set lo up
ip -n "$NS0" link add "$BR" type bridge
ip -n "$NS0" addr add "$IP0/16" dev "$BR"
ip -n "$NS0" link set "$BR" up
for i in $(seq 1 "$HOSTS"); do
    ns="es-h$i-$TAG"; ip netns add "$ns"; NAMESPACES+=("$ns")
    ip link add "esv$i-$TAG" type veth peer name "esb$i-$TAG"
    ip link set "esv$i-$TAG" netns "$ns"
    ip link set "esb$i-$TAG" netns "$NS0"
    ip -n "$NS0" link set "esb$i-$TAG" master "$BR"
    ip -n "$NS0" link set "esb$i-$TAG" up
    ip -n "$ns" addr add "10.231.$((i / 250)).$((i % 250 + 1))/16" dev "esv$i-$TAG"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "esv$i-$TAG" up
done

# The delay: netem on every host's interface (each way once), or a relay on host 0 where this
# kernel has no sch_netem (a request and its reply each wait DELAY_MS either way).
DELAY_BY=none; WORKER_PORT=6379
if [ "$DELAY_MS" != "0" ]; then
    if ip netns exec "$NS0" tc qdisc add dev "$BR" root netem delay "${DELAY_MS}ms" 2>/dev/null; then
        DELAY_BY=netem
        for i in $(seq 1 "$HOSTS"); do ip netns exec "es-h$i-$TAG" tc qdisc add dev "esv$i-$TAG" root netem delay "${DELAY_MS}ms"; done
    else
        DELAY_BY="relay (this kernel has no sch_netem)"; WORKER_PORT=6380
        ip netns exec "$NS0" "$PYTHON" scripts/delay_relay.py "$IP0" 6380 127.0.0.1 6379 "$DELAY_MS" > "$WORK/relay.log" 2>&1 &
        PIDS+=($!)
    fi
fi

# The server as docs/distributed.md sets one up: ACL users es-master and es-worker, passwords in
# files and environment variables, never on a command line.
MASTER_PW=$("$PYTHON" -c "import secrets; print(secrets.token_urlsafe(24))")
WORKER_PW=$("$PYTHON" -c "import secrets; print(secrets.token_urlsafe(24))")
SERVER=$(PYTHONPATH="$ROOT" "$PYTHON" -c "from es.distributed.server import redis_server_binary as b; print(b())")
PYTHONPATH="$ROOT" "$PYTHON" -c "from es.distributed.server import acl_lines; import sys; print('\n'.join(acl_lines(*sys.argv[1:])))" \
    "$MASTER_PW" "$WORKER_PW" > "$WORK/users.acl"
printf 'bind %s 127.0.0.1\nport 6379\nsave ""\nappendonly no\nprotected-mode yes\ndir %s\nloglevel warning\naclfile %s\n' \
    "$IP0" "$WORK" "$WORK/users.acl" > "$WORK/server.conf"
ip netns exec "$NS0" "$SERVER" "$WORK/server.conf" > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
printf '%s\n' "$MASTER_PW" > "$WORK/master.pw"; chmod 600 "$WORK/master.pw"

reach() {   # reach NAMESPACE PORT: wait until that host reaches the server
    ip netns exec "$1" "$PYTHON" - "$IP0" "$2" <<'PY'
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(f"two_hosts: cannot reach Redis at {sys.argv[1]}:{sys.argv[2]}")
PY
}

WORKER_PIDS=()
start_workers() {   # start_workers NAMESPACE PORT K
    ip netns exec "$1" env ES_REDIS_URL="redis://es-worker@$IP0:$2/0" ES_REDIS_PASSWORD="$WORKER_PW" \
        PYTHONPATH="$ROOT" "$PYTHON" -m es worker --processes "$3" >> "$WORK/workers.log" 2>&1 &
    WORKER_PIDS+=($!); PIDS+=($!)
}
stop_workers() {
    for p in "${WORKER_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    for p in "${WORKER_PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
    WORKER_PIDS=()
}
spread_workers() {   # K workers on each of hosts 1..N, DELAY_MS away
    for i in $(seq 1 "$HOSTS"); do reach "es-h$i-$TAG" "$WORKER_PORT"; start_workers "es-h$i-$TAG" "$WORKER_PORT" "$PER_HOST"; done
}
master() {   # master OUT ARGS...: the master on host 0
    local out=$1; shift
    ip netns exec "$NS0" env PYTHONPATH="$ROOT" "$PYTHON" -m es train "$@" \
        --redis "redis://es-master@$IP0:6379/0" --redis-password-file "$WORK/master.pw" --out "$out" --no-progress \
        --json > "$out.out" 2> "$out.err" || { echo "two_hosts: FAILED: the master exited with an error"; cat "$out.err"; exit 1; }
}

if [ "$BENCH" = "0" ]; then
    spread_workers        # the workers start first and wait for the master
    master "$WORK/run" cartpole --seed 0
    cat "$WORK/run.out"
    PYTHONPATH="$ROOT" "$PYTHON" - "$WORK/run" "$HOSTS" "$DELAY_BY" <<'PY'
import json, sys
import numpy as np
import es
from es.checkpoint import load_checkpoint
run, hosts, delay = sys.argv[1], int(sys.argv[2]), sys.argv[3]
summary = json.load(open(f"{run}/summary.json"))
reference = es.train(es.config_for("cartpole", seed=0), final_eval=False)
same = np.array_equal(load_checkpoint(run)[0], reference.center)
workers = {json.loads(l).get("workers") for l in open(f"{run}/metrics.jsonl")}
print(f"two_hosts: hosts={hosts} delay={delay} solved={summary['solved']} eval_mean={summary['eval_mean']} "
      f"same_as_single_process={same} workers_per_generation={sorted(workers)}")
if not (summary["solved"] and same):
    sys.exit("two_hosts: FAILED")
print("two_hosts: OK")
PY
    exit 0
fi

# --bench: the same master and processes, on one host and spread over the hosts, round by round.
ARGS=(pong --policy "$POLICY" --population "$POPULATION" --max-steps "$MAX_STEPS" --generations "$GENERATIONS"
      --eval-episodes 1 --seed 0)
for r in $(seq 1 "$ROUNDS"); do
    reach "$NS0" 6379
    start_workers "$NS0" 6379 $((HOSTS * PER_HOST))
    master "$WORK/one-$r" "${ARGS[@]}"
    stop_workers
    spread_workers
    master "$WORK/spread-$r" "${ARGS[@]}"
    stop_workers
done
PYTHONPATH="$ROOT" "$PYTHON" - "$WORK" "$ROUNDS" "$HOSTS" "$PER_HOST" "$DELAY_MS" "$DELAY_BY" "$WARMUP" \
    "$POPULATION" "$MAX_STEPS" "$POLICY" <<'PY'
import json, sys
import numpy as np
work, rounds, hosts, per_host, delay_ms, delay_by, warmup = sys.argv[1:8]
population, max_steps, policy = int(sys.argv[8]), int(sys.argv[9]), sys.argv[10]
rounds, hosts, per_host, warmup = int(rounds), int(hosts), int(per_host), int(warmup)

def steady(run):
    rows = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
    timed = [r for r in rows if r["generation"] >= warmup and not r.get("probation_checks")]
    return sum(r["gen_env_steps"] for r in timed) / sum(r["seconds"] for r in timed), rows

effs = []
for r in range(1, rounds + 1):
    one, _ = steady(f"{work}/one-{r}")
    spread, rows = steady(f"{work}/spread-{r}")
    effs.append(spread / one)
    print(json.dumps({"benchmark": "hosts", "round": r, "hosts": hosts, "workers_per_host": per_host,
                      "delay_ms": float(delay_ms), "delay_by": delay_by, "policy": policy, "population": population,
                      "max_steps": max_steps, "one_host_steps_per_s": round(one), "hosts_steps_per_s": round(spread),
                      "efficiency": round(spread / one, 3),
                      "generation_seconds": [round(x["seconds"], 2) for x in rows],
                      "workers_seen": sorted({x.get("workers") for x in rows})}))
print(json.dumps({"benchmark": "hosts", "hosts": hosts, "workers_per_host": per_host, "delay_ms": float(delay_ms),
                  "delay_by": delay_by, "rounds": rounds, "efficiency": round(float(np.median(effs)), 3),
                  "efficiency_range": [round(min(effs), 3), round(max(effs), 3)]}))
PY
