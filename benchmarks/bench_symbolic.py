"""Benchmark of generated (chetaev.discrete_lagrangian.symbolic) against hand-written systems.

Run:  python benchmarks/bench_symbolic.py [--quick] [MODEL]   (MODEL: part of a model's name)

For each model, the hand-written system (chetaev.*.testing) and its symbolic twin side by
side, in one run:

* build time of the symbolic system (sympy differentiation + code generation);
* µs per step of one trajectory and µs per trajectory-step of a batch of 10⁴ trajectories,
  same method, same initial data; the two systems' runs interleaved and the minimum of
  ``REPEATS`` (≥ 7) runs kept for each (CPU time, ``time.process_time``: the machine is
  shared, so only the ratios are meaningful there);
* the ratio generated / hand-written per model and per regime (single, batch).

Aims (issue 16): ratio ≤ 1.2 (single and batch); build under 2 s for the sleigh and under
10 s for the heavy top. Run on one core: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import sympy as sp
from chetaev.discrete_lagrangian import VPRK, LieVPRK
from chetaev.discrete_lagrangian import testing as dlt
from chetaev.discrete_lagrangian.symbolic import from_lagrangian, from_trivialized_lagrangian
from chetaev.liegroups import SE2, SO3
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
from chetaev.nh_integrators import testing as nht
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

BATCH = 10_000
REPEATS = 7


# ---------------------------------------------------------------- symbolic twins
def sleigh():
    x, y, th, vx, vy, w = sp.symbols("x y theta v_x v_y omega")
    return from_lagrangian((vx**2 + vy**2) / 2 + w**2 / 4, [x, y, th], [vx, vy, w],
                           nonholonomic=[-sp.sin(th) * vx + sp.cos(th) * vy - w / 2])


def chaotic(m=3):
    n = 2 * m + 1
    q, v = sp.symbols(f"q0:{n}"), sp.symbols(f"v0:{n}")
    V = (sum(x**2 for x in q) + q[m + 1] ** 2 * q[m + 2] ** 2
         + sum(q[k] ** 2 * q[m + k] ** 2 for k in range(1, m + 1))) / 2
    return from_lagrangian(sum(x**2 for x in v) / 2 - V, q, v,
                           nonholonomic=[v[0] + sum(q[i] * v[i] for i in range(m + 1, n))])


def cvt(eps=0.5):
    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    L = (vx**2 + vy**2 + vz**2) / 2 - (x**2 + z**2 - 2 * sp.cos(y) + eps * sp.sin(2 * y)) / 2
    return from_lagrangian(L, [x, y, z], [vx, vy, vz], nonholonomic=[vz + sp.sin(y) * vx])


def double_pendulum():
    t1, t2, w1, w2 = sp.symbols("t1 t2 w1 w2")
    L = w1**2 + sp.cos(t1 - t2) * w1 * w2 + w2**2 / 2 + 2 * sp.cos(t1) + sp.cos(t2)
    return from_lagrangian(L, [t1, t2], [w1, w2])


def heavy_top():
    R = sp.MatrixSymbol("R", 3, 3)
    eta = sp.symbols("eta0:3")
    T = (1.0 * eta[0] ** 2 + 1.5 * eta[1] ** 2 + 2.5 * eta[2] ** 2) / 2
    return from_trivialized_lagrangian(SO3, T - (0.1 * R[2, 0] + 0.2 * R[2, 1] + R[2, 2]), eta,
                                       g=R)


def vertical_disc():
    g = sp.MatrixSymbol("g", 3, 3)
    eta = sp.symbols("eta0:3")
    ell = (eta[0] ** 2 + eta[1] ** 2 + eta[2] ** 2 / 2) / 2 - (g[0, 2] ** 2 + g[1, 2] ** 2) / 2
    return from_trivialized_lagrangian(SE2, ell, eta, g=g, nonholonomic=[eta[1]])


# ---------------------------------------------------------------- initial data
def _sleigh_data(rng):
    q = nht.SLEIGH_Q0 + 0.1 * rng.standard_normal((BATCH, 3))
    v = nht.SLEIGH_V0 + 0.1 * rng.standard_normal((BATCH, 3))
    th = q[:, 2]
    v[:, 1] = (np.sin(th) * v[:, 0] + 0.5 * v[:, 2]) / np.cos(th)  # on the constraint
    return (nht.SLEIGH_Q0, nht.SLEIGH_V0), (q, v)


def _chaotic_data(rng):
    q, v = nht.chaotic_ensemble(BATCH - 1)
    return (q[3], v[3]), (q, v)


def _cvt_data(rng):
    q = nht.CVT_Q0 + 0.1 * rng.standard_normal((BATCH, 3))
    v = nht.CVT_V0_LOW + 0.1 * rng.standard_normal((BATCH, 3))
    v[:, 2] = -np.sin(q[:, 1]) * v[:, 0]  # on the constraint
    return (nht.CVT_Q0, nht.CVT_V0_LOW), (q, v)


def _pendulum_data(rng):
    q0, v0 = np.array([0.5, -0.3]), np.array([0.1, 0.4])
    return (q0, v0), (q0 + 0.1 * rng.standard_normal((BATCH, 2)),
                      v0 + 0.1 * rng.standard_normal((BATCH, 2)))


def _top_data(rng):
    g, eta = SO3.random(rng, (BATCH,)), rng.standard_normal((BATCH, 3))
    return (g[0], eta[0]), (g, eta)


def _disc_data(rng):
    g0, eta0 = nht.disc_initial()
    eta = eta0 + 0.1 * rng.standard_normal((BATCH, 3))
    eta[:, 1] = 0.0
    return (g0, eta0), (np.broadcast_to(g0, (BATCH, 3, 3)).copy(), eta)


MODELS = [
    # name, hand-written, symbolic builder, method, data, h
    ("sleigh", nht.sleigh_system, sleigh, NonholonomicPRK(lobatto_iiia_iiib(3)), _sleigh_data,
     0.05),
    ("chaotic n=7", nht.chaotic_system, chaotic, NonholonomicPRK(lobatto_iiia_iiib(3)),
     _chaotic_data, 0.05),
    ("CVT", nht.cvt_system, cvt, NonholonomicPRK(lobatto_iiia_iiib(3)), _cvt_data, 0.05),
    ("double pendulum", dlt.double_pendulum, double_pendulum, VPRK(gauss(2)), _pendulum_data,
     0.05),
    ("heavy top", dlt.heavy_top, heavy_top, LieVPRK(gauss(2)), _top_data, 0.05),
    ("vertical disc SE(2)", nht.vertical_disc, vertical_disc,
     LieNonholonomicPRK(lobatto_iiia_iiib(3)), _disc_data, 0.05),
]


def per_step_us(method, systems, q0, v0, h, n, repeats=REPEATS):
    """CPU µs per step of each system over ``n`` steps after three warm-up steps; the
    systems' runs are interleaved (so a change of the machine's load hits them alike) and
    the best of ``repeats`` is kept for each."""
    starts = []
    for system in systems:
        st = method.initial_state(system, q0, v0)
        for _ in range(3):
            st = method.step(system, st, h)
        starts.append(st)
    best = [np.inf] * len(systems)
    for _ in range(repeats):
        for k, (system, st) in enumerate(zip(systems, starts)):
            t0 = time.process_time()
            for _ in range(n):
                st = method.step(system, st, h)
            best[k] = min(best[k], (time.process_time() - t0) / n * 1e6)
    return best


def main(quick: bool = False, only: str | None = None) -> None:
    n_single, n_batch = (20, 1) if quick else (100, 2)
    print(f"{'model':<22}{'build s':>9}{'single µs/step':>26}{'ratio':>7}"
          f"{'batch µs/traj-step':>26}{'ratio':>7}")
    print(f"{'':<22}{'':>9}{'hand':>13}{'generated':>13}{'':>7}{'hand':>13}{'generated':>13}")
    for name, hand_f, sym_f, method, data_f, h in MODELS:
        if only is not None and only not in name:
            continue
        t0 = time.process_time()
        sym = sym_f()
        build = time.process_time() - t0
        hand = hand_f()
        (q0, v0), (qb, vb) = data_f(np.random.default_rng(0))
        single = per_step_us(method, (hand, sym), q0, v0, h, n_single)
        batch = [t / BATCH for t in per_step_us(method, (hand, sym), qb, vb, h, n_batch)]
        print(f"{name:<22}{build:>9.2f}{single[0]:>13.1f}{single[1]:>13.1f}"
              f"{single[1] / single[0]:>7.2f}{batch[0]:>13.3f}{batch[1]:>13.3f}"
              f"{batch[1] / batch[0]:>7.2f}", flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(quick="--quick" in sys.argv, only=args[0] if args else None)
