"""Compiled ConstrainedPRK (issue 17) against its numpy path: µs per step, one trajectory.

Run::

    python benchmarks/bench_compiled_constrained.py [--steps N] [--repeats R]

The spherical pendulum (Cartesian, |q| = 1, unit mass and g) from
``symbolic.from_lagrangian(..., holonomic=...)``, and the same sphere with a q-dependent mass
and a magnetic term (no numpy fast path); Lobatto IIIA–IIIB(s), s = 2 (RATTLE) and 3,
h = 0.1, N steps through ``integrate`` (initial state included), ``backend="numpy"`` and
``"numba"`` timed alternately (CPU time, best of R, after one warm-up run that compiles), and
the max difference of the two trajectories.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import sympy as sp
from chetaev.discrete_lagrangian import ConstrainedPRK, integrate
from chetaev.discrete_lagrangian.symbolic import from_lagrangian
from chetaev.rktableaux import lobatto_iiia_iiib

__all__ = ["main"]


def _systems():
    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    sphere = [(x**2 + y**2 + z**2 - 1) / 2]
    plain = (vx**2 + vy**2 + vz**2) / 2 - z
    gyro = (((1 + x**2 / 2) * vx**2 + (1 + y**2 / 2) * vy**2 + vz**2) / 2
            + (x * vy - y * vx) / 2 - z)
    return {"spherical pendulum": from_lagrangian(plain, [x, y, z], [vx, vy, vz],
                                                  holonomic=sphere),
            "gyroscopic sphere": from_lagrangian(gyro, [x, y, z], [vx, vy, vz],
                                                 holonomic=sphere)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    q0 = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
    v0 = np.array([0.0, 0.8, 0.0])
    print(f"# OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, "
          f"h = 0.1, {args.steps} steps, best of {args.repeats} (CPU time)")
    print("| system | s | numpy µs/step | numba µs/step | speed-up | max diff q, v |")
    print("|---|---|---|---|---|---|")
    for name, system in _systems().items():
        for s in (2, 3):
            methods = {b: ConstrainedPRK(lobatto_iiia_iiib(s), backend=b)
                       for b in ("numpy", "numba")}
            best = dict.fromkeys(methods, np.inf)
            out = {}
            for m in methods.values():  # warm-up (compiles)
                integrate(system, m, q0, v0, h=0.1, n_steps=3)
            for _ in range(args.repeats):
                for b, m in methods.items():
                    t0 = time.process_time()
                    out[b] = integrate(system, m, q0, v0, h=0.1, n_steps=args.steps)
                    best[b] = min(best[b], time.process_time() - t0)
            assert out["numba"].stats["backend"] == "numba"
            diff = max(np.max(np.abs(out["numpy"].q - out["numba"].q)),
                       np.max(np.abs(out["numpy"].v - out["numba"].v)))
            us = {b: 1e6 * t / args.steps for b, t in best.items()}
            print(f"| {name} | {s} | {us['numpy']:.1f} | {us['numba']:.2f} | "
                  f"{us['numpy'] / us['numba']:.0f}x | {diff:.1e} |")


if __name__ == "__main__":
    main()
