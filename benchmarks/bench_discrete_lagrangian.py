"""Benchmark of chetaev.discrete_lagrangian: RATTLE and ConstrainedPRK(s = 3) on the
spherical pendulum, single trajectory and a batch of 10⁴, next to scipy DOP853 on the
same problem (index-1 ODE with the consistent multiplier) at equal accuracy.

Run:  python benchmarks/bench_discrete_lagrangian.py [--quick]

Reported: µs per step (single trajectory) and µs per trajectory-step (batch), CPU time
(``time.process_time``: the machine may be shared). "Equal accuracy": DOP853's rtol = atol
is lowered until its error at t = T is at most the error of the method (both measured
against DOP853 at rtol = 1e-13).
"""

from __future__ import annotations

import sys
import time

import numpy as np
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


def _dop853_equal_accuracy(system, q0, v0, T, target, ref_q):
    n = system.n

    def rhs(_t, y):
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
        name = "RATTLE (Lobatto IIIA-IIIB 2)" if s == 2 else f"ConstrainedPRK(s={s})"
        print(f"{name:<28}{h:>7g}{err:>11.2e}{1e6 * cpu1 / n:>10.1f}{1e6 * cpub / (nb * B):>14.2f}"
              f"{rtol:>13.0e}{1e6 * dcpu / max(dsteps, 1):>16.1f}{dsteps:>14d}"
              f"{1e3 * dcpu:>17.1f}")
        print(f"{'':<28}{'':>7}{'':>11}{'':>10}{'':>14}{'(err ' + format(derr, '.1e') + ')':>13}"
              f"   ours per trajectory to T: single {1e3 * cpu1:.1f} ms, "
              f"in the batch {1e3 * cpub / (nb * B) * n:.2f} ms")
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


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
