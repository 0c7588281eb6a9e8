"""Benchmarks of chetaev.dsocs (paper §4: Figs 3 and 6).

Run:  python benchmarks/bench_dsocs.py [--quick]

1. Full convergence studies on the paper's horizons (particle [0, 500], inertia wheel
   [0, 2000], h down to 0.001 / 0.002 = 10⁶ steps), both starting procedures, fitted slopes.
2. Root selection on the inertia wheel at h = 0.1 over [0, 2000]: spurious roots picked by
   the paper's closest-to-θ1 rule vs the R-branch.
3. Cost per step: R-branch fast loop, DSOCS.step through ``integrate`` (R-branch solver and
   generic Newton + safeguard), vs scipy DOP853 on the closed-loop ODE at the accuracy of the
   second-order-start DSOCS at h = 0.01.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from chetaev.discrete_lagrangian import integrate
from chetaev.discrete_lagrangian.testing import fit_order
from chetaev.dsocs import (
    DSOCSIntegrator,
    InertiaWheelParameters,
    convergence_study,
    inertia_wheel_dsocs,
    inertia_wheel_step_options,
    iwp_closed_loop_rhs,
    iwp_reference,
    iwp_trajectory,
)
from scipy.integrate import solve_ivp


def main(quick: bool = False) -> None:
    P = InertiaWheelParameters()
    q0, v0 = np.array([0.5, 0.0]), np.array([0.0, 0.5])
    T_p = 100.0 if quick else 500.0
    T_w = 250.0 if quick else 2000.0

    print("== 1. convergence studies ==")
    for start in ("paper", "second_order"):
        t = time.perf_counter()
        s = convergence_study("particle", start=start, t_final=T_p)
        print(s.table(), f"   [{time.perf_counter() - t:.1f} s]\n")
    t = time.perf_counter()
    ref = iwp_reference(T_w, P)
    print(f"inertia-wheel reference: DOP853 rtol=atol=1e-12 on [0, {T_w:g}] "
          f"[{time.perf_counter() - t:.1f} s]")
    for start in ("paper", "second_order"):
        t = time.perf_counter()
        s = convergence_study("inertia_wheel", start=start, t_final=T_w, reference=ref)
        print(s.table(), f"   [{time.perf_counter() - t:.1f} s]")
        tail = fit_order(s.h[1:], s.error[1:], floor=0.0)
        print(f"  slope over h <= 0.05: {tail:.3f}\n")

    print("== 2. root selection, inertia wheel, h = 0.1, paper start ==")
    h = 0.1
    n = round(T_w / h)
    good, n_good = iwp_trajectory(q0, q0 + h * v0, h, n, P)
    bad, n_bad = iwp_trajectory(q0, q0 + h * v0, h, n, P, rule="paper")
    tt = h * np.arange(n + 1)
    th = ref(tt)[0]
    print(f"R-branch:   spurious roots {n_good} of {n - 1} steps, "
          f"max θ-error {np.max(np.abs(good[:, 0] - th)):.3g}")
    print(f"paper rule: spurious roots {n_bad} of {n - 1} steps "
          f"({100 * n_bad / (n - 1):.1f} %), max θ-error {np.max(np.abs(bad[:, 0] - th)):.3g}\n")

    print("== 3. cost per step (inertia wheel) ==")
    h, n = 0.01, 20_000
    t = time.perf_counter()
    iwp_trajectory(q0, q0 + h * v0, h, n, P)
    fast = (time.perf_counter() - t) / n
    ds = inertia_wheel_dsocs(h, P, solver="newton-unsafe")  # the system; the step: the method
    t = time.perf_counter()
    sol = integrate(ds, DSOCSIntegrator(start="second_order",
                                        **inertia_wheel_step_options(P, "R-branch")),
                    q0, v0, h, n_steps=2000)
    drv = (time.perf_counter() - t) / 2000
    t = time.perf_counter()
    integrate(ds, DSOCSIntegrator(start="second_order", **inertia_wheel_step_options(P, "newton")),
              q0, v0, h, n_steps=200)
    gen = (time.perf_counter() - t) / 200
    err = np.max(np.abs(sol.q[:, 0] - ref(sol.t)[0]))
    t = time.perf_counter()
    sc = solve_ivp(iwp_closed_loop_rhs(P), (0, sol.t[-1]), [*q0, *v0], method="DOP853",
                   rtol=1e-6, atol=1e-6, dense_output=True)
    scipy_t = time.perf_counter() - t
    err_sc = np.max(np.abs(sc.sol(sol.t)[0] - ref(sol.t)[0]))
    print(f"R-branch fast loop:               {1e6 * fast:8.1f} µs/step")
    print(f"DSOCS.step (R-branch) + integrate: {1e6 * drv:8.1f} µs/step "
          f"(θ-error {err:.2e} on [0, 20] at h = 0.01)")
    print(f"generic Newton + safeguard:       {1e6 * gen:8.1f} µs/step")
    print(f"scipy DOP853 rtol=1e-6 on [0, 20]: {1e3 * scipy_t:8.1f} ms total, {sc.nfev} RHS "
          f"evaluations, θ-error {err_sc:.2e} (DSOCS total {1e3 * drv * 2000:.1f} ms)")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
