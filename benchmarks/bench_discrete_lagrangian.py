"""Benchmark of chetaev.discrete_lagrangian: RATTLE and ConstrainedPRK(s = 3) on the
spherical pendulum, single trajectory and a batch of 10⁴, next to scipy DOP853 on the
same problem (index-1 ODE with the consistent multiplier) at equal accuracy, with a
hand-written right-hand side (``bench_dop853.spherical_pendulum_rhs``) and, labelled
``(acc)``, with ``system.acceleration``.

Run:  python benchmarks/bench_discrete_lagrangian.py [--quick] [--lie]   (--lie: only the
Lie-group section: LieVPRK and LieDiscretizationMapMethod µs per step, before/after)

Reported: µs per step (single trajectory) and µs per trajectory-step (batch), CPU time
(``time.process_time``: the machine may be shared). "Equal accuracy": DOP853's rtol = atol
is lowered until its error at t = T is at most the error of the method (both measured
against DOP853 at rtol = 1e-13).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from bench_dop853 import spherical_pendulum_rhs
from chetaev.discrete_lagrangian import (
    ConstrainedPRK,
    NewtonOptions,
    integrate,
    reference_solution,
)
from chetaev.discrete_lagrangian.testing import spherical_pendulum
from chetaev.rktableaux import lobatto_iiia_iiib
from scipy.integrate import solve_ivp


def _initial(batch: int | None, rng: np.random.Generator):
    if batch is None:
        a, w = np.array(1.0), np.array(0.9)
        phi = np.array(0.0)
    else:
        a = rng.uniform(0.3, 2.5, batch)
        w = rng.uniform(0.3, 1.5, batch)
        phi = rng.uniform(0, 2 * np.pi, batch)
    q0 = np.stack([np.sin(a) * np.cos(phi), np.sin(a) * np.sin(phi), -np.cos(a)], -1)
    v0 = w[..., None] * np.stack([-np.sin(phi), np.cos(phi), 0 * phi], -1)
    return q0, v0


def _cpu(f):
    t = time.process_time()
    out = f()
    return out, time.process_time() - t


def _dop853_equal_accuracy(system, q0, v0, T, target, ref_q, hand=True):
    """Loosest rtol reaching ``target``: DOP853 on the hand-written RHS
    (``bench_dop853.HAND_RHS``, checked there against ``system.acceleration``), or on
    ``system.acceleration`` when ``hand`` is False (the second, labelled column)."""
    n = system.n

    def rhs(_t, y):
        if hand:
            return spherical_pendulum_rhs(y)
        return np.concatenate([y[n:], system.acceleration(y[:n], y[n:])])

    y0 = np.concatenate([q0, v0])
    for rtol in 10.0 ** -np.arange(3, 13.5, 0.5):
        sol, cpu = _cpu(lambda rtol=rtol: solve_ivp(rhs, (0, T), y0, method="DOP853",
                                                    rtol=rtol, atol=rtol))
        err = np.max(np.abs(sol.y[:n, -1] - ref_q))
        if err <= target:
            return rtol, err, cpu, sol.t.size - 1
    return rtol, err, cpu, sol.t.size - 1


def main(quick: bool = False) -> None:
    system = spherical_pendulum()
    rng = np.random.default_rng(0)
    T = 5.0 if quick else 20.0
    B = 1000 if quick else 10_000
    q0, v0 = _initial(None, rng)
    ref = reference_solution(system, q0, v0, [0.0, T])
    qb, vb = _initial(B, rng)
    print(f"spherical pendulum, T = {T:g}; CPU times (process_time)")
    print(f"{'method':<28}{'h':>7}{'err(T)':>11}{'us/step':>10}{'us/traj-step':>14}"
          f"{'DOP853 rtol':>13}{'DOP853 us/step':>16}{'DOP853 steps':>14}{'DOP853 total ms':>17}")
    for s, h in ((2, 0.01), (2, 0.05), (3, 0.05), (3, 0.1)):
        method = ConstrainedPRK(lobatto_iiia_iiib(s))
        n = round(T / h)
        integrate(system, method, q0, v0, h=h, n_steps=3)  # warm-up
        tr, cpu1 = _cpu(lambda method=method, h=h, n=n: integrate(system, method, q0, v0, h=h,
                                                                  n_steps=n))
        err = np.max(np.abs(tr.q[-1] - ref.q[-1]))
        nb = max(5, n // 20)
        _, cpub = _cpu(lambda method=method, h=h, nb=nb: integrate(
            system, method, qb, vb, h=h, n_steps=nb, save_every=nb))
        rtol, derr, dcpu, dsteps = _dop853_equal_accuracy(system, q0, v0, T, err, ref.q[-1])
        acc_cpu = _dop853_equal_accuracy(system, q0, v0, T, err, ref.q[-1], hand=False)[2]
        name = "RATTLE (Lobatto IIIA-IIIB 2)" if s == 2 else f"ConstrainedPRK(s={s})"
        print(f"{name:<28}{h:>7g}{err:>11.2e}{1e6 * cpu1 / n:>10.1f}{1e6 * cpub / (nb * B):>14.2f}"
              f"{rtol:>13.0e}{1e6 * dcpu / max(dsteps, 1):>16.1f}{dsteps:>14d}"
              f"{1e3 * dcpu:>17.1f}")
        print(f"{'':<28}{'':>7}{'':>11}{'':>10}{'':>14}{'(err ' + format(derr, '.1e') + ')':>13}"
              f"   ours per trajectory to T: single {1e3 * cpu1:.1f} ms, "
              f"in the batch {1e3 * cpub / (nb * B) * n:.2f} ms; DOP853 on "
              f"system.acceleration (acc): {1e3 * acc_cpu:.1f} ms")
    print("\nbatch cost with simplified Newton (one Jacobian inverse per step):")
    for s in (2, 3):
        for simplified in (False, True):
            method = ConstrainedPRK(lobatto_iiia_iiib(s), NewtonOptions(simplified=simplified),
                                    fast_path=False)
            nb = 10
            _, cpub = _cpu(lambda method=method, nb=nb: integrate(
                system, method, qb, vb, h=0.05, n_steps=nb, save_every=nb))
            print(f"  generic stage solve s={s} simplified={simplified!s:<5}: "
                  f"{1e6 * cpub / (nb * B):.2f} us/traj-step")


# --------------------------------------------------------------------------------------------
# Lie-group methods: LieVPRK (s = 3) on the heavy top on SO(3), LieDiscretizationMapMethod on
# the heavy top on SO(3)×R³ with the holonomic constraint x = Rχ (discretization-maps paper
# Ex. 5.3, §6).
# µs per step, CPU time; "before" = commit 8266184 (FD Newton Jacobian in LieVPRK, liegroups
# re-validating and summing series term by term on every internal call): this script run on
# that commit's packages, on the same shared 2-core machine, 2026-11-22 (timings there vary by
# ~15 % between runs).
# --------------------------------------------------------------------------------------------
LIE_BEFORE_US = {
    ("LieVPRK s=3", "cayley"): 2006.0, ("LieVPRK s=3", "exp"): 3574.0,
    ("euler_a", "cayley"): 1939.0, ("euler_a", "exp"): 3839.0,
    ("lobatto2", "cayley"): 3566.0, ("lobatto2", "exp"): 6267.0,
    ("rattle", "cayley"): 3046.0, ("rattle", "exp"): 4902.0,
}


def _top_so3xr3():
    """Heavy top on SO(3)×R³ (centre of mass x = Rχ as a holonomic constraint)."""
    from chetaev.discrete_lagrangian import (
        ConstrainedSystem,
        HolonomicConstraint,
        TrivializedMechanicalSystem,
    )
    from chetaev.liegroups import SO3, Product, Rn

    m, grav, chi = 1.5, 9.81, np.array([0.1, 0.2, 0.5])
    G = Product(SO3, Rn(3))
    inertia = np.zeros((6, 6))
    inertia[:3, :3] = np.diag([1.0, 2.0, 3.0])
    inertia[3:, 3:] = m * np.eye(3)
    chi_hat = SO3.hat(chi)

    def V(g):
        return m * grav * g[..., 5, 6]

    def gradV(g):
        out = np.zeros((*g.shape[:-2], 6))
        out[..., 5] = m * grav
        return out

    def phi(g):
        return g[..., 3:6, 6] - g[..., :3, :3] @ chi

    def ell(g):
        out = np.zeros((*g.shape[:-2], 3, 6))
        out[..., :, :3] = g[..., :3, :3] @ chi_hat
        out[..., :, 3:] = np.eye(3)
        return out

    system = ConstrainedSystem(TrivializedMechanicalSystem(G, inertia, V, gradV),
                               HolonomicConstraint(phi, ell))
    R0 = SO3.exp(np.array([0.3, -0.2, 0.4]))
    w0 = np.array([0.5, -1.0, 2.0])
    return system, G.from_parts([R0, R0 @ chi]), np.concatenate([w0, R0 @ np.cross(w0, chi)])


def _us_per_step(system, method, q0, v0, h, n, repeat=3):
    integrate(system, method, q0, v0, h=h, n_steps=2)  # warm-up (caches, imports)
    best = np.inf
    for _ in range(repeat):
        tr, cpu = _cpu(lambda: integrate(system, method, q0, v0, h=h, n_steps=n, save_every=n))
        best = min(best, cpu)
    return 1e6 * best / n, tr


def lie(quick: bool = False) -> None:
    from chetaev.discrete_lagrangian import LieVPRK
    from chetaev.discrete_lagrangian.discretization_maps import LieDiscretizationMapMethod
    from chetaev.discrete_lagrangian.testing import heavy_top
    from chetaev.liegroups import SO3

    n = 40 if quick else 100
    print(f"\nLie-group methods, h = 0.05, {n} steps; CPU µs per step (best of 3)")
    print(f"{'method':<34}{'before':>10}{'now':>10}{'speed-up':>10}{'newton/step':>13}")
    top = heavy_top()
    R0, w0 = SO3.exp(np.array([0.3, -0.2, 0.5])), np.array([0.5, 1.0, -0.7])
    for ret in ("cayley", "exp"):
        us, tr = _us_per_step(top, LieVPRK(lobatto_iiia_iiib(3), ret), R0, w0, 0.05, n)
        b = LIE_BEFORE_US[("LieVPRK s=3", ret)]
        print(f"{'LieVPRK s=3 heavy top SO3 ' + ret:<34}{b:>10.0f}{us:>10.0f}{b / us:>10.2f}"
              f"{tr.stats['newton_iterations'] / n:>13.2f}")
    system, g0, xi0 = _top_so3xr3()
    for kind in ("euler_a", "lobatto2", "rattle"):
        for ret in ("cayley", "exp"):
            us, tr = _us_per_step(system, LieDiscretizationMapMethod(kind, retraction=ret),
                                  g0, xi0, 0.05, n)
            b = LIE_BEFORE_US[(kind, ret)]
            print(f"{'LieDM ' + kind + ' SO3xR3 ' + ret:<34}{b:>10.0f}{us:>10.0f}"
                  f"{b / us:>10.2f}{tr.stats['newton_iterations'] / n:>13.2f}")
    B = 200
    rng = np.random.default_rng(1)
    Rb, wb = SO3.exp(0.5 * rng.normal(size=(B, 3))), rng.normal(size=(B, 3))
    print(f"\nLieVPRK s=3 heavy top, Newton Jacobian: analytic vs finite differences "
          f"(µs per step; batch: per trajectory-step, {B} trajectories)")
    for ret in ("cayley", "exp"):
        row = []
        for fd in (False, True):
            m = LieVPRK(lobatto_iiia_iiib(3), ret, newton=NewtonOptions(finite_differences=fd))
            row.append(_us_per_step(top, m, R0, w0, 0.05, n)[0])
            row.append(_us_per_step(top, m, Rb, wb, 0.05, max(5, n // 10))[0] / B)
        print(f"  {ret:<7} single: analytic {row[0]:7.0f}  FD {row[2]:7.0f}    "
              f"batch: analytic {row[1]:6.1f}  FD {row[3]:6.1f}")


if __name__ == "__main__":
    if "--lie" not in sys.argv:
        main(quick="--quick" in sys.argv)
    lie(quick="--quick" in sys.argv)
