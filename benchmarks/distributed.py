"""Redis traffic per member and speed against joblib. Prints one JSON line.

* bytes: CartPole-v1, population 256, 2 worker processes, 6 generations. The server's INFO
  totals (total_net_input_bytes / total_net_output_bytes) minus what the master's and this
  script's own connections sent and received (counted at their sockets) is the workers'
  traffic: ``bytes_in_per_member_per_generation`` (worker -> Redis) and
  ``bytes_out_per_generation`` (Redis -> workers, chiefly the task record).
* speed: Pong (dense), population 32, 300-step episodes, 2 local workers with one ALE thread
  each, through Redis and through joblib, seconds per generation in the same run.

    python benchmarks/distributed.py
"""
import _common  # noqa: F401

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import redis  # noqa: E402
from redis.connection import Connection  # noqa: E402

import es  # noqa: E402
from es import noise  # noqa: E402
from es.distributed.master import RedisEvaluator  # noqa: E402
from es.distributed.server import EmbeddedRedis  # noqa: E402
from es.optimizers import SGD  # noqa: E402
from es.parallel import ParallelEvaluator  # noqa: E402
from es.strategy import OpenES  # noqa: E402

COUNTED = {"sent": 0, "received": 0}


class _CountingSocket:
    def __init__(self, sock):
        self._sock = sock

    def sendall(self, data, *a):
        COUNTED["sent"] += len(data)
        return self._sock.sendall(data, *a)

    def recv(self, n, *a):
        data = self._sock.recv(n, *a)
        COUNTED["received"] += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self._sock, name)


class CountingConnection(Connection):
    def _connect(self):
        return _CountingSocket(super()._connect())


def counted(client: redis.Redis) -> redis.Redis:
    pool = client.connection_pool
    pool.disconnect()
    pool.connection_class = CountingConnection
    return client


def workers(url, n):
    return [subprocess.Popen([sys.executable, "-m", "es", "worker"], env={**os.environ, "ES_REDIS_URL": url},
                             stderr=subprocess.DEVNULL) for _ in range(n)]


def run(problem, evaluator, population, sigma, generations, warmup=1):
    strategy = OpenES(problem.initial_params(0), SGD(problem.num_params, 0.3, momentum=0.0), population=population,
                      sigma=sigma, seed=0, shaping=es.z_score)
    times = []
    for g in range(warmup + generations):
        seeds = noise.episode_seeds(0, g, 1)
        t0 = time.perf_counter()
        strategy.tell(evaluator.evaluate(strategy.ask(), seeds, seeds).returns)
        if g >= warmup:
            times.append(time.perf_counter() - t0)
    return float(np.mean(times))


def main():
    out = {"benchmark": "distributed"}
    from es.envs import EnvProblem
    cart = EnvProblem("CartPole-v1", hidden=())
    generations, population = 6, 256
    with EmbeddedRedis() as server:
        procs = workers(server.url, 2)
        try:
            info = counted(redis.Redis.from_url(server.url))
            ev = RedisEvaluator(cart, server.url, chunks=8, log=lambda m: None)
            counted(ev.link.client)
            run(cart, ev, population, 0.3, 1, warmup=1)          # workers connected and warm
            before, c0 = info.info("stats"), dict(COUNTED)
            run(cart, ev, population, 0.3, generations, warmup=0)
            after, c1 = info.info("stats"), dict(COUNTED)
            ev.close()
        finally:
            for p in procs:
                p.kill()
    ours_sent = c1["sent"] - c0["sent"]
    ours_received = c1["received"] - c0["received"]
    worker_in = after["total_net_input_bytes"] - before["total_net_input_bytes"] - ours_sent
    worker_out = after["total_net_output_bytes"] - before["total_net_output_bytes"] - ours_received
    out.update(bytes_in_per_member_per_generation=worker_in / (population * generations),
               bytes_out_per_generation=worker_out / generations,
               cartpole_population=population, cartpole_generations=generations,
               center_bytes=4 * cart.num_params)

    from pong.problem import PongProblem
    spec = {"type": "pong_dense", "band": 6, "hidden": []}
    pong = PongProblem(spec, max_steps=300, threads=1)
    ev = ParallelEvaluator(pong, workers=2, adaptive=False)
    t_joblib = run(pong, ev, 32, 0.05, 3, warmup=3)   # warm: each worker has built its vector envs
    ev.close()
    with EmbeddedRedis() as server:
        procs = workers(server.url, 2)
        try:
            ev = RedisEvaluator(pong, server.url, chunks=2, log=lambda m: None)
            t_redis = run(pong, ev, 32, 0.05, 3, warmup=3)
            ev.close()
        finally:
            for p in procs:
                p.kill()
    out.update(pong_seconds_per_generation_joblib=t_joblib, pong_seconds_per_generation_redis=t_redis,
               speedup_vs_joblib=t_joblib / t_redis)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
