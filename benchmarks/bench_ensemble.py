"""Benchmark of ``integrate_ensemble`` (chetaev.discrete_lagrangian, issue 18).

Run:  python benchmarks/bench_ensemble.py [--members N] [--chunk-size C] [--t-final T]
      [--skip-cluster] [--json PATH]

The chaotic ensemble of the high-order paper (§7.3, n = 7, the ensemble of
``chetaev.nh_integrators.testing.chaotic_ensemble`` with J = N - 1), Lobatto s = 3
(``NonholonomicPRK``, paper rule ``multiplier_rule="carry"``), h = 0.1 to T = 10 (default
N = 10^5 members), three ways (the comparators):

* one batched ``integrate`` of the whole ensemble (the reference);
* ``integrate_ensemble`` with the embedded engine (chunks one after the other in one process);
* ``integrate_ensemble`` on ``LocalCluster(n_workers=2, threads_per_worker=1)`` (loopback).

All keep only the initial and final nodes (``save_every = n_steps``: 10^5 full trajectories
of 101 nodes would need ~2 GB). Each way runs in a fresh Python process, so that its peak
resident memory (``resource.getrusage``: ``ru_maxrss``, the interpreter and libraries
included) is its own; the baseline after the imports is printed next to it. For the cluster,
the driver's peak and the largest worker's peak are both given. Reported per way: wall time,
µs per trajectory-step (wall / (N · n_steps)), the ratio to the batched call, peak memory.
The three final states are compared bitwise. The output starts with the machine (CPU, cores
usable, memory, load average, Python / numpy / BLAS / dask versions, BLAS thread variables).
Wall times are only meaningful on an idle machine; run with OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1 for one core per process.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

H = 0.1
MODES = ("batched", "embedded", "cluster")
LABELS = {"batched": "one batched integrate",
          "embedded": "integrate_ensemble, embedded",
          "cluster": "integrate_ensemble, LocalCluster(2x1)"}


def _peak_rss_mb() -> float:
    """This process's peak resident set size (Linux: ru_maxrss in kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _machine() -> list[str]:
    """One line per fact about the machine the figures come from."""
    cpu = platform.processor() or platform.machine()
    mem = "?"
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        if names:
            cpu = names[0]
        with open("/proc/meminfo") as f:
            total = next(ln for ln in f if ln.startswith("MemTotal"))
        mem = f"{int(total.split()[1]) / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    usable = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count())
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    blas = "?"
    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)"
                         for i in threadpool_info() if i["user_api"] == "blas") or "none found"
    except ImportError:
        blas = "threadpoolctl not installed"
    try:
        import dask
        import distributed

        dask_v = f"dask {dask.__version__}, distributed {distributed.__version__}"
    except ImportError:
        dask_v = "dask/distributed not installed"
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                     "MKL_NUM_THREADS") if k in os.environ)
    return [f"machine: {platform.node()} | {platform.platform()}",
            f"cpu: {cpu} | {os.cpu_count()} logical cores, {usable} usable | memory {mem}",
            f"load average (1, 5, 15 min): {load}",
            f"python {platform.python_version()}, numpy {np.__version__}, {dask_v}",
            f"BLAS: {blas} | {env or 'no BLAS thread variables set'}"]


def _setup(n: int):
    from chetaev.nh_integrators import NonholonomicPRK
    from chetaev.nh_integrators.testing import chaotic_ensemble, chaotic_system
    from chetaev.rktableaux import lobatto_iiia_iiib

    q0, v0 = chaotic_ensemble(n - 1)
    return (chaotic_system(), NonholonomicPRK(lobatto_iiia_iiib(3), multiplier_rule="carry"),
            q0, v0)


def _child(mode: str, n: int, n_steps: int, chunk: int, out: str) -> None:
    """Run one way in this (fresh) process; print one JSON line; save the final states."""
    from chetaev.discrete_lagrangian import integrate, integrate_ensemble

    system, method, q0, v0 = _setup(n)
    row = {"mode": mode}
    if mode == "cluster":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None,
                          silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            client.run(lambda: None)  # workers up before the clock starts
            row["baseline_MB"] = _peak_rss_mb()
            t0 = time.perf_counter()
            res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=n_steps,
                                     chunk_size=chunk, save_every=n_steps, client=client)
            row["wall_s"] = time.perf_counter() - t0
            row["worker_peak_MB"] = max(client.run(_peak_rss_mb).values())
        ok, final = res.all_success, res.q[-1]
    else:
        row["baseline_MB"] = _peak_rss_mb()
        t0 = time.perf_counter()
        if mode == "batched":
            tr = integrate(system, method, q0, v0, h=H, n_steps=n_steps, save_every=n_steps)
            ok, final = tr.success, tr.q[-1]
        else:
            res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=n_steps,
                                     chunk_size=chunk, save_every=n_steps)
            ok, final = res.all_success, res.q[-1]
        row["wall_s"] = time.perf_counter() - t0
    row["peak_MB"] = _peak_rss_mb()
    row["success"] = bool(ok)
    np.save(out, final)
    print(json.dumps(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=100_000)
    ap.add_argument("--chunk-size", type=int, default=None,
                    help="members per chunk (default: N / 8, at least 1)")
    ap.add_argument("--t-final", type=float, default=10.0)
    ap.add_argument("--skip-cluster", action="store_true")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    ap.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # child process
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = args.members
    if n < 1:
        ap.error("--members must be at least 1")
    n_steps = round(args.t_final / H)
    chunk = args.chunk_size or max(1, n // 8)
    if args.mode:
        _child(args.mode, n, n_steps, chunk, args.out)
        return

    for line in _machine():
        print(line)
    print(f"chaotic ensemble (§7.3, n = 7), NonholonomicPRK Lobatto s = 3, h = {H}, "
          f"T = {args.t_final}: N = {n} members, {n_steps} steps, chunks of {chunk}; "
          f"each way in a fresh process")
    print(f"{'way':<38} {'wall':>9} {'µs/traj-step':>13} {'/ batched':>9} "
          f"{'peak RSS':>10} {'(baseline)':>11} {'worker peak':>12}")
    modes = [m for m in MODES if not (args.skip_cluster and m == "cluster")]
    rows, finals = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            out = str(Path(tmp) / f"{mode}.npy")
            cmd = [sys.executable, __file__, "--mode", mode, "--members", str(n),
                   "--chunk-size", str(chunk), "--t-final", str(args.t_final), "--out", out]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr)
                raise SystemExit(f"{LABELS[mode]} failed (exit {proc.returncode})")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            assert row["success"], f"{LABELS[mode]}: a member failed"
            row["us_per_traj_step"] = row["wall_s"] / (n * max(n_steps, 1)) * 1e6
            row["ratio_to_batched"] = row["wall_s"] / rows[0]["wall_s"] if rows else 1.0
            rows.append(row)
            finals[mode] = np.load(out)
            worker = f"{row['worker_peak_MB']:9.1f} MB" if "worker_peak_MB" in row else ""
            print(f"{LABELS[mode]:<38} {row['wall_s']:7.2f} s {row['us_per_traj_step']:13.3f} "
                  f"{row['ratio_to_batched']:8.2f}x {row['peak_MB']:7.1f} MB "
                  f"({row['baseline_MB']:6.1f} MB) {worker:>12}", flush=True)
    for mode in modes[1:]:
        assert np.array_equal(finals[mode], finals["batched"]), \
            f"{LABELS[mode]} differs from the batched call"
    print(f"final states: bitwise equal across the {len(modes)} ways")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": _machine(), "members": n,
                                               "n_steps": n_steps, "chunk_size": chunk,
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
