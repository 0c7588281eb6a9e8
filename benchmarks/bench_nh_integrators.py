"""Benchmark of the nonholonomic PRK methods (chetaev.nh_integrators, issue 6).

Run:  python benchmarks/bench_nh_integrators.py [--quick]

For Lobatto s = 2, 3, 4 on the nonholonomic particle (paper §7.1) and the chaotic
n = 7 system (§7.3):

* µs per step of one trajectory (``NonholonomicPRK.step``, default options);
* µs per trajectory-step for a batch of 10^4 initial conditions (the §7.3 ensemble with
  J = 9999; for the particle, 10^4 consistent perturbations of the §7.1 data), one
  vectorized computation, with the default Newton matrix (``jacobian_reuse="auto"``: the
  structured matrix for a batch this large) and, for comparison, with the analytic
  Jacobian carried between steps (``jacobian_reuse="steps"``); best of three runs of
  ``n_batch`` steps (the machine is shared: a single run varies by +-20 %);
* the error at T = 10 against DOP853 at rtol = 1e-13, and the cost of scipy DOP853 on the
  reduced ODE (lambda eliminated) at the loosest rtol = 10^-k reaching the same error, with
  the hand-written, vectorised right-hand side of ``bench_dop853.HAND_RHS`` (checked there
  against ``system.acceleration``) and, in a second labelled column ``(acc)``, with
  ``system.acceleration`` (a generic, much slower right-hand side);
* the long-time energy error max |E - E0| over T = 1000 of NH-PRK (h = 0.1) and of DOP853
  at that rtol.

Aims (issue 6): single-trajectory Lobatto-3 step under 200 µs; batched cost under 5 µs
per trajectory-step. All times are CPU times (``time.process_time``: the machine is
shared and wall time is noisy); run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 for
one core.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from bench_dop853 import HAND_RHS
from chetaev.discrete_lagrangian import integrate
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.nh_integrators import testing as _models
from chetaev.rktableaux import lobatto_iiia_iiib
from scipy.integrate import solve_ivp

# ---------------------------------------------------------------- models (broadcasting)
# The models are those of the tests: chetaev.nh_integrators.testing (§7.1, §7.3).


def particle():
    return _models.particle_system(), _models.PARTICLE_Q0.copy(), _models.PARTICLE_V0.copy()


def chaotic(m: int = 3):
    return _models.chaotic_system(m)


def chaotic_ensemble(J: int):
    return _models.chaotic_ensemble(J)


def particle_ensemble(k: int, rng):
    _, q0, v0 = particle()
    q = q0 + 0.1 * rng.standard_normal((k, 3))
    v = v0 + 0.1 * rng.standard_normal((k, 3))
    v[:, 2] = q[:, 1] * v[:, 0]  # on the constraint
    return q, v


# ---------------------------------------------------------------- timing helpers


def per_step_us(method, system, q0, v0, h, n, repeats=1):
    """CPU µs per step over ``n`` steps after three warm-up steps (so the predictor has
    its full history); best of ``repeats`` runs."""
    st0 = method.initial_state(system, q0, v0)
    for _ in range(3):
        st0 = method.step(system, st0, h)
    best = np.inf
    for _ in range(repeats):
        st = st0
        t0 = time.process_time()
        for _ in range(n):
            st = method.step(system, st, h)
        best = min(best, (time.process_time() - t0) / n * 1e6)
    return best


def dop853(system, q0, v0, T, rtol, t_eval=None, hand=None):
    """DOP853 on the model's hand-written RHS ``hand`` (or ``system.acceleration``)."""
    n = system.n

    def rhs(_t, y):
        if hand is not None:
            return hand(y)
        return np.concatenate([y[n:], system.acceleration(y[:n], y[n:])])

    t0 = time.process_time()
    sol = solve_ivp(
        rhs, (0.0, T), np.r_[q0, v0], method="DOP853", rtol=rtol, atol=rtol * 1e-2, t_eval=t_eval
    )
    return sol, time.process_time() - t0


def main(quick: bool) -> None:
    rng = np.random.default_rng(0)
    n_single = 50 if quick else 300
    # enough batch steps to include the Jacobian refreshes (every 4-7 steps): two steps
    # after the first one see only the fresh Jacobian and under-report the steady cost
    n_batch = 12 if quick else 24
    B = 10_000
    T = 10.0
    T_long = 100.0 if quick else 1000.0
    ch = chaotic()
    cq0, cv0 = chaotic_ensemble(B - 1)
    ps, pq0, pv0 = particle()
    pq, pv = particle_ensemble(B, rng)
    cases = [("particle", ps, pq0, pv0, pq, pv), ("chaotic", ch, cq0[3], cv0[3], cq0, cv0)]
    print(
        f"{'system':9s} {'s':>2s} {'single us/step':>15s} {'batch us/traj-step':>19s} "
        f"{'(analytic J)':>12s} "
        f"{'err(T=10,h=.1)':>15s} {'NH-PRK s':>9s} {'DOP853 rtol':>11s} {'DOP853 s':>9s} "
        f"{'(acc) s':>9s} "
        f"{'|dE| NH-PRK':>12s} {'|dE| DOP853':>12s}"
    )
    for name, system, q0, v0, qb, vb in cases:
        hand = HAND_RHS[name]
        ref, _ = dop853(system, q0, v0, T, 1e-13, hand=hand)
        q_ref = ref.y[: system.n, -1]
        for s in (2, 3, 4):
            pair = lobatto_iiia_iiib(s)
            single = per_step_us(NonholonomicPRK(pair), system, q0, v0, 0.1, n_single, 3)
            batch, batch_analytic = (
                per_step_us(
                    NonholonomicPRK(pair, jacobian_reuse=reuse), system, qb, vb, 0.1, n_batch, 3
                )
                / qb.shape[0]
                for reuse in ("auto", "steps")
            )
            t0 = time.process_time()
            sol = integrate(system, NonholonomicPRK(pair), q0, v0, h=0.1, t_final=T)
            t_nh = time.process_time() - t0
            err = np.abs(sol.q[-1] - q_ref).max()
            rtol, t_dop, t_acc = float("nan"), float("nan"), float("nan")
            for k in range(3, 14):
                d, t_d = dop853(system, q0, v0, T, 10.0 ** (-k), hand=hand)
                if np.abs(d.y[: system.n, -1] - q_ref).max() <= err:
                    rtol, t_dop = 10.0 ** (-k), t_d
                    t_acc = dop853(system, q0, v0, T, rtol)[1]
                    break
            long = integrate(
                system, NonholonomicPRK(pair), q0, v0, h=0.1, t_final=T_long, save_every=10
            )
            E = system.energy(long.q, long.v)
            dE_nh = np.abs(E - E[0]).max()
            dE_dop = float("nan")
            if np.isfinite(rtol):
                d, _ = dop853(system, q0, v0, T_long, rtol, t_eval=np.linspace(0, T_long, 1001),
                              hand=hand)
                Ed = system.energy(d.y[: system.n].T, d.y[system.n :].T)
                dE_dop = np.abs(Ed - Ed[0]).max()
            print(
                f"{name:9s} {s:2d} {single:15.0f} {batch:19.2f} {batch_analytic:12.2f} "
                f"{err:15.2e} {t_nh:9.3f} "
                f"{rtol:11.0e} {t_dop:9.3f} {t_acc:9.3f} {dE_nh:12.2e} {dE_dop:12.2e}",
                flush=True,
            )


if __name__ == "__main__":
    main("--quick" in sys.argv)
