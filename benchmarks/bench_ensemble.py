"""Benchmark of ``integrate_ensemble`` (chetaev.discrete_lagrangian, issue 18).

Run:  python benchmarks/bench_ensemble.py [--members N] [--chunk-size C] [--t-final T]
      [--skip-cluster]

The chaotic ensemble of the high-order paper (§7.3, n = 7, the ensemble of
``chetaev.nh_integrators.testing.chaotic_ensemble`` with J = N - 1), Lobatto s = 3
(``NonholonomicPRK``, paper rule ``multiplier_rule="carry"``), h = 0.1 to T = 10 (default
N = 10^5 members), three ways:

* one batched ``integrate`` of the whole ensemble;
* ``integrate_ensemble`` with the embedded engine (chunks one after the other here);
* ``integrate_ensemble`` on ``LocalCluster(n_workers=2, threads_per_worker=1)`` (loopback).

All keep only the initial and final nodes (``save_every = n_steps``: 10^5 full trajectories
of 101 nodes would need ~2 GB). Reported: wall time, µs per trajectory-step
(wall / (N · n_steps)), and the peak memory: of this process (``tracemalloc``, numpy's
allocations included) and, for the cluster, the largest worker's peak RSS
(``resource.getrusage``, which includes the interpreter and the libraries, ~100 MB). The
three final states are compared bitwise. Wall times are only meaningful on an idle machine;
run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 for one core per process.
"""

from __future__ import annotations

import argparse
import logging
import resource
import time
import tracemalloc

import numpy as np
from chetaev.discrete_lagrangian import integrate, integrate_ensemble
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.nh_integrators.testing import chaotic_ensemble, chaotic_system
from chetaev.rktableaux import lobatto_iiia_iiib

H = 0.1


def _measure(label: str, fn, n_members: int, n_steps: int) -> tuple[np.ndarray, dict]:
    tracemalloc.start()
    t0 = time.perf_counter()
    final_q = fn()
    wall = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    row = {"label": label, "wall_s": wall, "us_per_traj_step": wall / (n_members * n_steps) * 1e6,
           "peak_MB": peak / 2**20}
    print(f"{label:<38} {wall:9.2f} s {row['us_per_traj_step']:9.3f} µs/traj-step "
          f"{row['peak_MB']:9.1f} MB peak (this process)", flush=True)
    return final_q, row


def _worker_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=100_000)
    ap.add_argument("--chunk-size", type=int, default=None,
                    help="members per chunk (default: N / 8, at least 1)")
    ap.add_argument("--t-final", type=float, default=10.0)
    ap.add_argument("--skip-cluster", action="store_true")
    args = ap.parse_args()
    n = args.members
    n_steps = round(args.t_final / H)
    chunk = args.chunk_size or max(1, n // 8)
    system = chaotic_system()
    q0, v0 = chaotic_ensemble(n - 1)
    method = NonholonomicPRK(lobatto_iiia_iiib(3), multiplier_rule="carry")
    print(f"chaotic ensemble, Lobatto s = 3, h = {H}, T = {args.t_final}: N = {n} members, "
          f"{n_steps} steps, chunks of {chunk}")

    def batched():
        tr = integrate(system, method, q0, v0, h=H, n_steps=n_steps, save_every=n_steps)
        assert tr.success, tr.message
        return tr.q[-1]

    def embedded():
        res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=n_steps,
                                 chunk_size=chunk, save_every=n_steps)
        assert res.all_success
        return res.q[-1]

    ref, _ = _measure("one batched integrate", batched, n, n_steps)
    out, _ = _measure("integrate_ensemble, embedded", embedded, n, n_steps)
    assert np.array_equal(out, ref), "embedded engine differs from the batched call"
    if args.skip_cluster:
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        client.run(lambda: None)  # workers up before the clock starts

        def on_cluster():
            res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=n_steps,
                                     chunk_size=chunk, save_every=n_steps, client=client)
            assert res.all_success
            return res.q[-1]

        out, _ = _measure("integrate_ensemble, LocalCluster(2x1)", on_cluster, n, n_steps)
        rss = max(client.run(_worker_peak_rss_mb).values())
        print(f"{'':<38} largest worker peak RSS {rss:.1f} MB")
    assert np.array_equal(out, ref), "cluster engine differs from the batched call"
    print("final states: bitwise equal across the three runs")


if __name__ == "__main__":
    main()
