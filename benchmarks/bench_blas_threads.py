"""Batched steps with OpenBLAS's default threads against one thread (issue 17).

Run::

    python benchmarks/bench_blas_threads.py [--quick] [--rounds N] [--members B ...]

The chaotic ensemble of the high-order nonholonomic paper (§7.3), ``NonholonomicPRK``
Lobatto IIIA-IIIB s = 3, h = 0.1, through ``integrate`` (``n_steps`` steps after a short
warm-up run), for each batch size B. Each measurement runs in a fresh subprocess (the BLAS
thread count is read when the library loads) with ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` either removed from the environment ("default")
or set to 1; the two settings alternate round by round. Reported: min and median over rounds
of wall and CPU µs per trajectory-step (CPU time counts every thread), and the ratio
default / one thread. The column ``threads`` gives the BLAS thread counts ``threadpoolctl``
sees after the run (the setting in force outside ``integrate``; since issue 17 a batched
``integrate`` holds BLAS at one thread while it runs, whatever this setting).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["main", "run_worker"]

_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run_worker(B: int, n_steps: int) -> dict:
    """Wall and CPU µs per trajectory-step of one batched ``integrate`` run."""
    from chetaev.discrete_lagrangian import integrate
    from chetaev.nh_integrators import NonholonomicPRK
    from chetaev.nh_integrators import testing as nht
    from chetaev.rktableaux import lobatto_iiia_iiib

    system = nht.chaotic_system()
    q, v = nht.chaotic_ensemble(B - 1)
    method = NonholonomicPRK(lobatto_iiia_iiib(3))
    integrate(system, method, q, v, h=0.1, n_steps=2)  # warm-up: imports, checks, caches
    w0, c0 = time.perf_counter(), time.process_time()
    integrate(system, method, q, v, h=0.1, n_steps=n_steps)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    try:
        from threadpoolctl import threadpool_info

        threads = [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]
    except ImportError:
        threads = []
    scale = 1e6 / (B * n_steps)
    return {"wall": wall * scale, "cpu": cpu * scale, "blas_threads": threads}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps, rounds and members")
    ap.add_argument("--rounds", type=int, default=None, help="default 5 (2 with --quick)")
    ap.add_argument("--members", type=int, nargs="+", default=None,
                    help="batch sizes (default 64 10000; 64 1000 with --quick)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)
    members = args.members or ([64, 1000] if args.quick else [64, 10_000])
    src = os.pathsep.join(str(p) for p in
                          sorted((Path(__file__).resolve().parents[1] / "packages").glob("*/src")))
    settings = {"default": None, "one thread": "1"}
    res = {(B, k): [] for B in members for k in settings}
    for r in range(rounds):
        names = list(settings) if r % 2 == 0 else list(settings)[::-1]
        for B in members:
            n_steps = (10 if args.quick else 30) if B > 1000 else (20 if args.quick else 100)
            for k in names:
                env = {x: y for x, y in os.environ.items() if x not in _VARS}
                if settings[k] is not None:
                    env.update(dict.fromkeys(_VARS, settings[k]))
                env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
                proc = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--worker", str(B),
                     str(n_steps)], env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(proc.stderr)
                res[(B, k)].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; chaotic ensemble, "
          f"NonholonomicPRK s = 3, h = 0.1, through integrate; {rounds} rounds; "
          f"µs per trajectory-step (CPU counts every thread)")
    head = (f"{'B':>6s} {'BLAS':>10s} {'threads':>8s} {'wall min':>9s} {'wall med':>9s} "
            f"{'cpu min':>8s} {'cpu med':>8s}")
    print(head)
    out = {}
    for B in members:
        for k in settings:
            rows = res[(B, k)]
            w = [x["wall"] for x in rows]
            c = [x["cpu"] for x in rows]
            out[f"{B} {k}"] = {"wall": w, "cpu": c, "blas_threads": rows[0]["blas_threads"]}
            print(f"{B:6d} {k:>10s} {rows[0]['blas_threads']!s:>8s} {min(w):9.2f} "
                  f"{statistics.median(w):9.2f} {min(c):8.2f} {statistics.median(c):8.2f}")
        d, o = out[f"{B} default"], out[f"{B} one thread"]
        print(f"{B:6d} {'ratio':>10s} {'':8s} {min(d['wall']) / min(o['wall']):9.2f} "
              f"{statistics.median(d['wall']) / statistics.median(o['wall']):9.2f} "
              f"{min(d['cpu']) / min(o['cpu']):8.2f} "
              f"{statistics.median(d['cpu']) / statistics.median(o['cpu']):8.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(run_worker(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        main()
