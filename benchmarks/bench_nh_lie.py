"""Benchmark of the Lie-group nonholonomic PRK (chetaev.nh_integrators, issue 7).

Run:  python benchmarks/bench_nh_lie.py [--quick]

For the homogeneous ball on a turntable (SO(3)×R², paper §7.5) and the spherical pendulum
(S² lifted to SO(3), homogeneous-spaces paper §5.1), Lobatto s = 2, 3, 4 with τ = cay, h = 0.1:

* ms per step through ``integrate`` and Newton iterations per step;
* µs per trajectory-step for a batch of 16 initial conditions (one vectorized computation);
* the global error at T against a DOP853 reference at rtol = 1e-13, and the cost of scipy
  DOP853 at the loosest rtol in 10^-k that reaches the same error: for the ball on the
  hand-written, vectorised right-hand side ``bench_dop853.ball_rhs`` (checked there against
  ``system.acceleration``), and, in the column labelled ``(acc)``, on the generic continuous
  equations (``reference_solution``: Euler–Poincaré with reconstruction and λ eliminated,
  through ``system.acceleration``); the spherical pendulum has only the generic column.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from bench_dop853 import ball_rhs
from chetaev.discrete_lagrangian import integrate, reference_solution
from chetaev.nh_integrators import LieNonholonomicPRK, spherical_pendulum, tait_bryan
from chetaev.nh_integrators.testing import ball_initial, turntable_ball
from scipy.integrate import solve_ivp


def _problems():
    ball = turntable_ball()
    gb, eb = ball_initial()
    pend = spherical_pendulum()
    gp, ep = tait_bryan(0.0, np.pi / 3, 0.0), np.array([1.0 / 3.0, 0.0, 0.0])
    return {"ball SO(3)xR2": (ball, gb, eb), "spherical pendulum S2": (pend, gp, ep)}


def _error(sysc, g, eta, ref_g, ref_eta):
    return max(np.max(np.abs(g - ref_g)), np.max(np.abs(eta - ref_eta)))


def _dop853_at_accuracy(sysc, g0, eta0, T, target, ref):
    """Loosest rtol = atol = 10^-k reaching ``target``; returns (rtol, seconds, error)."""
    for k in range(3, 14):
        tol = 10.0 ** (-k)
        t = time.process_time()
        sol = reference_solution(sysc, g0, eta0, np.array([0.0, T]), rtol=tol, atol=tol)
        dt = time.process_time() - t
        err = _error(sysc, sol.q[-1], sol.v[-1], ref.q[-1], ref.v[-1])
        if err <= target:
            return tol, dt, err
    return float("nan"), float("nan"), float("nan")


def _dop853_hand_ball(g0, eta0, T, target, ref):
    """As :func:`_dop853_at_accuracy` for the ball, on the hand-written RHS: state
    (R, x, y, ω_s, v); returns (rtol, seconds)."""
    R0 = g0[:3, :3]
    y0 = np.r_[R0.ravel(), g0[3:5, 5], R0 @ eta0[:3], eta0[3:]]
    for k in range(3, 14):
        tol = 10.0 ** (-k)
        t = time.process_time()
        sol = solve_ivp(lambda _t, y: ball_rhs(y), (0.0, T), y0, method="DOP853", rtol=tol,
                        atol=tol)
        dt = time.process_time() - t
        y = sol.y[:, -1]
        R = y[:9].reshape(3, 3)
        g = np.eye(6)
        g[:3, :3], g[3:5, 5] = R, y[9:11]
        err = _error(None, g, np.r_[R.T @ y[11:14], y[14:16]], ref.q[-1], ref.v[-1])
        if err <= target:
            return tol, dt
    return float("nan"), float("nan")


def main(quick: bool = False) -> None:
    h = 0.1
    T = 5.0 if quick else 20.0
    n = round(T / h)
    rng = np.random.default_rng(0)
    print(f"h = {h}, T = {T} ({n} steps), tau = cayley, multiplier rule = carry\n")
    head = (f"{'problem':24s} {'s':>2s} {'ms/step':>8s} {'cpu ms':>6s} {'newton':>6s} "
            f"{'us/traj-step (x16)':>19s} "
            f"{'error':>9s} {'DOP853 rtol':>11s} {'DOP853 ms':>9s} {'(acc) rtol':>10s} "
            f"{'(acc) ms':>8s} {'NH-PRK ms':>9s}")
    print(head)
    print("-" * len(head))
    for name, (sysc, g0, eta0) in _problems().items():
        ref = reference_solution(sysc, g0, eta0, np.array([0.0, T]), rtol=1e-13, atol=1e-13)
        for s in (2, 3, 4):
            method = LieNonholonomicPRK(s)
            integrate(sysc, method, g0, eta0, h=h, n_steps=3)  # warm-up (caches, imports)
            t, c = time.perf_counter(), time.process_time()
            tr = integrate(sysc, method, g0, eta0, h=h, n_steps=n)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            its = tr.stats.get("newton_iterations", np.nan) / n
            err = _error(sysc, tr.q[-1], tr.v[-1], ref.q[-1], ref.v[-1])
            # batch of 16 nearby initial conditions (η scaled: stays on the constraint for the
            # linear S² constraint; for the affine ball constraint only ω₃ is varied)
            if "ball" in name:
                eb = np.repeat(eta0[None], 16, 0)
                eb[:, 2] += 0.05 * rng.normal(size=16)
            else:
                eb = eta0[None] * (1.0 + 0.05 * rng.normal(size=(16, 1)))
            nb = max(10, n // 4)
            t = time.process_time()
            integrate(sysc, method, np.repeat(g0[None], 16, 0), eb, h=h, n_steps=nb)
            per_traj = (time.process_time() - t) / (nb * 16) * 1e6
            tol_a, dt_acc, _ = _dop853_at_accuracy(sysc, g0, eta0, T, err, ref)
            tol, dt_ref = (_dop853_hand_ball(g0, eta0, T, err, ref) if "ball" in name
                           else (float("nan"), float("nan")))
            print(f"{name:24s} {s:2d} {1e3 * wall / n:8.2f} {1e3 * cpu / n:6.2f} {its:6.2f} "
                  f"{per_traj:19.1f} "
                  f"{err:9.2e} {tol:11.0e} {1e3 * dt_ref:9.1f} {tol_a:10.0e} "
                  f"{1e3 * dt_acc:8.1f} {1e3 * cpu:9.1f}")
    print("\nms/step (wall) and cpu ms: one trajectory through integrate (Newton with the "
          "analytic Jacobian); wall time depends on the machine's load, CPU time much less.")
    print("us/traj-step, DOP853 ms / NH-PRK ms: CPU time (time.process_time; the machine is "
          "shared), the last two for the whole interval [0, T] at equal accuracy.")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
