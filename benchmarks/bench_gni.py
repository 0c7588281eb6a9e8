"""Benchmark of the Geometric Nonholonomic Integrator (chetaev.gni, issue 8).

Run:  python benchmarks/bench_gni.py [--quick]

* Vector space: the project's nonlinear nonholonomic particle (linear
  and affine constraint), GNI Euler A / B / RATTLE / midpoint and the A∘B composition, h = 0.05:
  ms per step through ``integrate``, µs per trajectory-step for a batch of 64 initial conditions
  (one vectorized computation), the error at T against DOP853 at rtol = 1e-13, and the cost of
  scipy DOP853 on the continuous equations at the loosest rtol = 10^-k reaching that error.
* Reduced: the ball on the rotating table (paper §7.4, experiment 2), ReducedGNI with Cayley and
  exp, h = 0.05: CPU µs per step (and before the liegroups fast paths), error at T, and DOP853
  on the reduced equations at equal error.  ``--reduced``: only this part.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from chetaev.discrete_lagrangian import integrate
from chetaev.gni import BALL_EXPERIMENT_2, GNI, Composition, ReducedGNI, rolling_ball
from chetaev.gni.testing import nonholonomic_particle


def _batch(problem, rng, k):
    """k consistent initial conditions near the problem's (velocity projected on the constraint)."""
    q = problem.q0 + 0.2 * rng.standard_normal((k, 3))
    v = problem.v0 + 0.2 * rng.standard_normal((k, 3))
    con = problem.system.constraint
    A, a = con.matrix(q), con.affine(q)
    Minv = np.linalg.inv(problem.mass)
    C = A @ Minv @ np.swapaxes(A, -1, -2)
    corr = np.linalg.solve(C, (np.einsum("...ij,...j->...i", A, v) + a)[..., None])
    return q, v - (Minv @ np.swapaxes(A, -1, -2) @ corr)[..., 0]


def _dop853_at(problem_ref, target):
    for k in range(3, 14):
        tol = 10.0 ** (-k)
        t0 = time.perf_counter()
        err = problem_ref(tol)
        dt = time.perf_counter() - t0
        if err <= target:
            return tol, dt
    return float("nan"), float("nan")


def vector_space(quick: bool) -> None:
    h, T = 0.05, (2.0 if quick else 10.0)
    n = round(T / h)
    rng = np.random.default_rng(0)
    print(f"Nonholonomic particle, h = {h}, T = {T} ({n} steps)\n")
    head = (f"{'constraint':10s} {'method':14s} {'ms/step':>8s} {'us/traj-step (x64)':>19s} "
            f"{'error':>9s} {'DOP853 rtol':>11s} {'DOP853 ms':>9s} {'GNI ms':>8s}")
    print(head)
    print("-" * len(head))
    for affine in (False, True):
        problem = nonholonomic_particle(affine=affine)
        q_ref = problem.reference([T])[0][-1]
        qb, vb = _batch(problem, rng, 64)
        methods = {
            "euler_a": GNI("euler_a"),
            "euler_b": GNI("euler_b"),
            "rattle": GNI("rattle"),
            "midpoint": GNI("midpoint"),
            "A∘B (h/2)": Composition((GNI("euler_b"), GNI("euler_a"))),
        }
        for name, m in methods.items():
            t0 = time.perf_counter()
            traj = integrate(problem.system, m, problem.q0, problem.v0, h=h, n_steps=n)
            single = time.perf_counter() - t0
            t0 = time.perf_counter()
            integrate(problem.system, m, qb, vb, h=h, n_steps=n)
            batched = time.perf_counter() - t0
            err = float(np.linalg.norm(traj.q[-1] - q_ref))

            def ref_err(tol, problem=problem, q_ref=q_ref):
                return float(np.linalg.norm(problem.reference([T], rtol=tol, atol=tol)[0][-1]
                                            - q_ref))

            tol, dt = _dop853_at(ref_err, err)
            print(f"{'affine' if affine else 'linear':10s} {name:14s} {1e3 * single / n:8.3f} "
                  f"{1e6 * batched / (n * 64):19.1f} {err:9.2e} {tol:11.0e} {1e3 * dt:9.2f} "
                  f"{1e3 * single:8.1f}")
    print()


#: ReducedGNI µs per step before the liegroups fast paths (commit 8266184, this script's problem)
REDUCED_BEFORE_US = {"cayley": 403.5, "exp": 1335.6}


def reduced(quick: bool) -> None:
    e2 = BALL_EXPERIMENT_2
    sysb = rolling_ball(e2["inertia"], e2["mass"], e2["radius"], e2["table_rate"])
    h, T = 0.05, (3.0 if quick else 15.0)
    n = round(T / h)
    x0, v0 = np.array(e2["x0"]), np.array(e2["v0"])
    x_ref = sysb.reference(x0, v0, [T])[0][-1]
    print(f"Ball on a rotating table (paper §7.4, experiment 2), h = {h}, T = {T} ({n} steps)\n")
    head = (f"{'retraction':10s} {'us/step':>8s} {'before':>8s} {'newton/step':>11s} "
            f"{'error':>9s} {'DOP853 rtol':>11s} {'DOP853 ms':>9s} {'GNI ms':>8s}")
    print("CPU time (process_time, best of 3); 'before' = µs/step at commit 8266184 "
          "(liegroups re-validating every internal call), same machine, 2026-11-22")
    print(head)
    print("-" * len(head))
    for kind in ("cayley", "exp"):
        m = ReducedGNI(retraction=kind)
        integrate(sysb, m, x0, v0, h=h, n_steps=2)  # warm-up
        dt_gni = np.inf
        for _ in range(3):
            t0 = time.process_time()
            traj = integrate(sysb, m, x0, v0, h=h, n_steps=n)
            dt_gni = min(dt_gni, time.process_time() - t0)
        err = float(np.linalg.norm(traj.q[-1] - x_ref))

        def ref_err(tol):
            return float(np.linalg.norm(sysb.reference(x0, v0, [T], rtol=tol, atol=tol)[0][-1]
                                        - x_ref))

        tol, dt = _dop853_at(ref_err, err)
        iters = traj.stats["newton_iterations"] / n
        print(f"{kind:10s} {1e6 * dt_gni / n:8.1f} {REDUCED_BEFORE_US[kind]:8.1f} {iters:11.2f} "
              f"{err:9.2e} {tol:11.0e} {1e3 * dt:9.2f} {1e3 * dt_gni:8.1f}")


def main(quick: bool = False, only_reduced: bool = False) -> None:
    if not only_reduced:
        vector_space(quick)
    reduced(quick)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv, only_reduced="--reduced" in sys.argv)
