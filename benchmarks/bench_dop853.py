"""chetaev against scipy's DOP853 with hand-written right-hand sides (issue 17's figures).

Run::

    python benchmarks/bench_dop853.py [--quick] [--json PATH] [--only PART ...]

DOP853 gets, for every model, a hand-written, vectorised numpy right-hand side (the ODE of
that model written out, λ eliminated in closed form), checked in the setup against
``system.acceleration`` on random states (so both integrate the same ODE). The DOP853 run fed
with ``system.acceleration`` (what the other scripts of ``benchmarks/`` use) is kept as a
second, labelled column only. CPU time (``time.process_time``), one process, the contenders
timed alternately (interleaved) and the best of the repeats kept; ``OPENBLAS_NUM_THREADS`` is
printed in the header. Models: the nonholonomic particle (high-order nonholonomic paper §7.1),
the chaotic system (§7.3, member j = 3 of the ensemble), the CVT (§7.2), the ball on a
turntable on SO(3)×R² (§7.5), the heavy top on SO(3).

Figures:

1. µs per step of one trajectory through ``integrate``: ``NonholonomicPRK`` Lobatto IIIA-IIIB
   s = 3, h = 0.1, and DOP853 per accepted step (at rtol 1e-6);
2. time to reach an error of 1e-6 and 1e-9 at T = 10 (max over q at T against DOP853 at rtol
   1e-13 with the hand-written RHS): chetaev with the best (s, h) of s = 2, 3, 4 and
   h = 10 / N on a geometric grid, run through ``integrate`` (initial state included);
   DOP853 with the loosest rtol = 10^(-k/2) that reaches the error (atol = rtol / 100);
3. CVT (``CVT_Q0``, ``CVT_V0_LOW``) to T = 10⁴: max |E - E0| of NH-PRK (s = 2, 3, 4,
   h = 0.1) and, at equal CPU time, of DOP853 (the smallest error among its runs at
   rtol = 10^-k, k = 4..13, that took at most the NH-PRK's CPU time; when even its cheapest
   run, rtol 1e-4, took longer, that run, the ratio marked ">"), and the ratio;
4. ball (``LieNonholonomicPRK(3)``, Cayley) and heavy top (``LieVPRK`` Lobatto 3, Cayley),
   h = 0.1 / 0.05, T = 10: µs per step, error at T, DOP853's time at the loosest rtol reaching
   that error, and the ratio of times;
5. chaotic ensemble of 10⁴ members (§7.3), T = 10: batched NH-PRK s = 3, h = 0.1, µs per
   trajectory-step, against one stacked DOP853 (the whole ensemble as one ODE, the RHS
   vectorised over members) at rtol 1e-6, its time per member and h = 0.1 step.

``--backend`` (default ``auto``) is passed to every chetaev method: the vector-space models
are the symbolic ones of ``chetaev.examples.models`` (``from_lagrangian``: exact derivatives
and, with numba installed, compiled kernels), so ``auto`` runs the compiled step where the
method has one and numpy elsewhere; every row says which backend ran
(``sol.stats["backend"]``). ``--backend numpy`` times the reference path on the same systems.

``--quick`` shortens everything (fewer h, T = 100 for the CVT, 10³ members, fewer repeats) to
check that the script runs and its numbers are sane; the figures of record come from a full
run on an idle machine. ``--only PART`` (repeatable) runs only some parts: ``particle`` or
``chaotic`` (one model's rows of figures 1-2), ``lie`` (4), ``ensemble`` (5), ``cvt`` (3).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from functools import partial
from pathlib import Path

import numpy as np
from chetaev.discrete_lagrangian import LieVPRK, integrate
from chetaev.discrete_lagrangian import testing as dlt
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
from chetaev.nh_integrators import testing as nht
from chetaev.rktableaux import lobatto_iiia_iiib
from scipy.integrate import solve_ivp

__all__ = ["HAND_RHS", "main"]

#: The ``backend`` given to every chetaev method (``--backend``).
BACKEND = "auto"
#: The parts ``--only`` selects from: the rows of figures 1-2, then figures 4, 5, 3.
PARTS = ("particle", "chaotic", "lie", "ensemble", "cvt")
#: The parts this run measures (``--only``; all by default).
ONLY = frozenset(PARTS)


def _wanted(part: str) -> bool:
    return part in ONLY


def _method(cls, *args, **kw):
    """``cls(*args, backend=BACKEND, **kw)``, or without ``backend`` in a tree that has none."""
    try:
        return cls(*args, backend=BACKEND, **kw)
    except TypeError:
        return cls(*args, **kw)


def _backend_of(sol) -> str:
    return str(sol.stats.get("backend", "numpy"))

# ---------------------------------------------------------------- hand-written right-hand sides
# Each takes y = (q, v) of shape (..., 2n) (batch axes leading) and returns ẏ. Mass matrix I,
# one linear constraint a(q)·v = 0: q̈ = -∇V + λ a, λ = (a·∇V - ȧ·v) / |a|².


def particle_rhs(y):
    """§7.1: V = (x² + y²)/2, a = (-y, 0, 1); λ = (v_x v_y - x y)/(1 + y²)."""
    x, yy = y[..., 0], y[..., 1]
    vx, vy, vz = y[..., 3], y[..., 4], y[..., 5]
    lam = (vx * vy - x * yy) / (1.0 + yy * yy)
    return np.stack([vx, vy, vz, -x - lam * yy, -yy, lam], axis=-1)


def cvt_rhs(y, eps=0.5):
    """§7.2: ∇V = (x, sin y + eps cos 2y, z), a = (sin y, 0, 1), ȧ·v = cos y v_y v_x."""
    x, yy, z = y[..., 0], y[..., 1], y[..., 2]
    vx, vy, vz = y[..., 3], y[..., 4], y[..., 5]
    s, c = np.sin(yy), np.cos(yy)
    lam = (s * x + z - c * vy * vx) / (1.0 + s * s)
    return np.stack([vx, vy, vz, -x + lam * s, -s - eps * np.cos(2.0 * yy), -z + lam], axis=-1)


def chaotic_rhs(y, m=3):
    """§7.3, n = 2m + 1: V = (|q|² + q_{m+2}² q_{m+3}² + Σ q_{1+i}² q_{m+1+i}²)/2,
    a = (1, 0, …, 0, q_{m+2}, …, q_n) (1-based), ȧ·v = Σ_{k ≥ m+2} v_k²."""
    n = 2 * m + 1
    q, v = y[..., :n], y[..., n:]
    lo, hi = q[..., 1 : m + 1], q[..., m + 1 :]
    g = q.copy()
    g[..., 1 : m + 1] += lo * hi * hi
    g[..., m + 1 :] += hi * lo * lo
    g[..., m + 1] += q[..., m + 1] * q[..., m + 2] ** 2
    g[..., m + 2] += q[..., m + 2] * q[..., m + 1] ** 2
    lam = (g[..., 0] + np.sum(hi * g[..., m + 1 :], axis=-1)
           - np.sum(v[..., m + 1 :] ** 2, axis=-1)) / (1.0 + np.sum(hi * hi, axis=-1))
    acc = -g
    acc[..., 0] += lam
    acc[..., m + 1 :] += lam[..., None] * hi
    return np.concatenate([v, acc], axis=-1)


def _hat(w):
    z = np.zeros_like(w[..., 0])
    return np.stack([np.stack([z, -w[..., 2], w[..., 1]], -1),
                     np.stack([w[..., 2], z, -w[..., 0]], -1),
                     np.stack([-w[..., 1], w[..., 0], z], -1)], -2)


_BALL_A, _BALL_R, _BALL_OM = 0.4, 1.0, 1.0


def ball_rhs(y):
    """§7.5 in spatial variables, y = (R (9), x, y, ω_s (3), v (2)): Ṙ = ω̂_s R, ṗ = v,
    ω̇_s = Ω (v_x, v_y, 0)/((1 + a) r), v̇ = κ (-v_y, v_x), κ = aΩ/(1 + a)."""
    a, r, Om = _BALL_A, _BALL_R, _BALL_OM
    R = y[..., :9].reshape(*y.shape[:-1], 3, 3)
    w, v = y[..., 11:14], y[..., 14:16]
    kap = a * Om / (1.0 + a)
    dR = np.einsum("...ij,...jk->...ik", _hat(w), R).reshape(*y.shape[:-1], 9)
    c = Om / ((1.0 + a) * r)
    dw = np.stack([c * v[..., 0], c * v[..., 1], np.zeros_like(v[..., 0])], -1)
    dv = np.stack([-kap * v[..., 1], kap * v[..., 0]], -1)
    return np.concatenate([dR, v, dw, dv], axis=-1)


_TOP_I = np.array([1.0, 1.5, 2.5])
_TOP_CHI = np.array([0.1, 0.2, 1.0])


def heavy_top_rhs(y):
    """Heavy top, y = (R (9), Ω (3)): Ṙ = R Ω̂, 𝕀 Ω̇ = 𝕀Ω × Ω - mgl χ × Γ, Γ = Rᵀ e₃
    (𝕀 = diag(1, 1.5, 2.5), mgl = 1, χ = (0.1, 0.2, 1))."""
    R = y[..., :9].reshape(*y.shape[:-1], 3, 3)
    W = y[..., 9:12]
    dR = np.einsum("...ij,...jk->...ik", R, _hat(W)).reshape(*y.shape[:-1], 9)
    gam = R[..., 2, :]
    dW = (np.cross(_TOP_I * W, W) - np.cross(_TOP_CHI, gam)) / _TOP_I
    return np.concatenate([dR, dW], axis=-1)


def spherical_pendulum_rhs(y, g=1.0):
    """Spherical pendulum in R³ (``discrete_lagrangian.testing.spherical_pendulum``):
    q̈ = -g e₃ + λ q, λ = (g q_z - |v|²)/|q|² (from d²/dt² |q|²/2 = 0)."""
    q, v = y[..., :3], y[..., 3:]
    lam = (g * q[..., 2] - np.sum(v * v, axis=-1)) / np.sum(q * q, axis=-1)
    acc = lam[..., None] * q
    acc[..., 2] -= g
    return np.concatenate([v, acc], axis=-1)


HAND_RHS = {"particle": particle_rhs, "chaotic": chaotic_rhs, "CVT": cvt_rhs,
            "ball": ball_rhs, "heavy top": heavy_top_rhs,
            "spherical pendulum": spherical_pendulum_rhs}


# ---------------------------------------------------------------- models and checks


def _vector_models():
    """The models; the symbolic ones of ``chetaev.examples.models`` (compiled kernels with
    numba) where that package is importable, else the hand-coded ones of ``nh.testing``."""
    try:
        from chetaev.examples.models import chaotic, cvt, nonholonomic_particle
        particle, ch, cv_sys = nonholonomic_particle.system(), chaotic.system(), cvt.system()
    except ImportError:  # a tree without the examples package
        particle, ch, cv_sys = nht.particle_system(), nht.chaotic_system(), nht.cvt_system()
    cq, cv = nht.chaotic_ensemble(9)
    return {
        "spherical pendulum": (dlt.spherical_pendulum(), None, None),
        "particle": (particle, nht.PARTICLE_Q0.copy(), nht.PARTICLE_V0.copy()),
        "chaotic": (ch, cq[3].copy(), cv[3].copy()),
        "CVT": (cv_sys, nht.CVT_Q0.copy(), nht.CVT_V0_LOW.copy()),
    }


def _check_hand_rhs(rng) -> float:
    """Largest relative difference of every hand-written RHS from ``system.acceleration`` on
    100 random states (of the hand-coded and, for the Lie models, the symbolic systems);
    raises if one exceeds 1e-12 (a different ODE, not round-off)."""
    worst = 0.0
    for name, (system, _, _) in _vector_models().items():
        n = system.n
        q = rng.uniform(-1.5, 1.5, (100, n))
        v = rng.uniform(-1.5, 1.5, (100, n))
        ref = system.acceleration(q, v)
        got = HAND_RHS[name](np.concatenate([q, v], -1))[:, n:]
        worst = _record(worst, name, got, ref)
    from chetaev.liegroups import SO3

    R = SO3.exp(rng.normal(size=(100, 3)))
    w_b = rng.normal(size=(100, 3))
    g = np.tile(np.eye(6), (100, 1, 1))
    g[:, :3, :3] = R
    g[:, 3:5, 5] = rng.normal(size=(100, 2))
    v = rng.normal(size=(100, 2))
    w_s = np.einsum("bij,bj->bi", R, w_b)
    y = np.concatenate([R.reshape(100, 9), g[:, 3:5, 5], w_s, v], -1)
    d = ball_rhs(y)
    got = np.concatenate([np.einsum("bji,bj->bi", R, d[:, 11:14]), d[:, 14:16]], -1)
    got_top = heavy_top_rhs(np.concatenate([R.reshape(100, 9), w_b], -1))[:, 9:]
    for ball, top in _lie_models():
        worst = _record(worst, "ball", got, ball.acceleration(g, np.concatenate([w_b, v], -1)))
        worst = _record(worst, "heavy top", got_top, top.acceleration(R, w_b))
    return worst


def _lie_models():
    """(ball, heavy top): the hand-written models, then their symbolic twins (compiled
    kernels with numba) where the tree has them; the figures use the last pair."""
    models = [(nht.turntable_ball(), dlt.heavy_top())]
    try:
        from chetaev.examples.models import turntable_ball

        models.append((turntable_ball.symbolic_system(), dlt.heavy_top(symbolic=True)))
    except (ImportError, TypeError, AttributeError):  # a tree without them
        pass
    return models


def _record(worst, name, got, ref):
    err = float(np.max(np.abs(got - ref)) / max(1.0, np.max(np.abs(ref))))
    if err > 1e-12:
        raise AssertionError(f"hand-written RHS of {name} differs from system.acceleration "
                             f"by {err:.2e}: not the same ODE")
    return max(worst, err)


def _acc_rhs(system):
    n = system.n
    return lambda y: np.concatenate([y[n:], system.acceleration(y[:n], y[n:])])


# ---------------------------------------------------------------- timing helpers


def _dop(f, y0, T, rtol, t_eval=None):
    t0 = time.process_time()
    sol = solve_ivp(lambda _t, y: f(y), (0.0, T), y0, method="DOP853", rtol=rtol,
                    atol=rtol * 1e-2, t_eval=t_eval)
    return sol, time.process_time() - t0


def _nh(system, method, q0, v0, h, T, **kw):
    t0 = time.process_time()
    sol = integrate(system, method, q0, v0, h=h, t_final=T, **kw)
    return sol, time.process_time() - t0


def _best_interleaved(runs, repeats):
    """Best CPU time of each callable over ``repeats`` rounds, called alternately."""
    best = [np.inf] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            best[i] = min(best[i], run()[1])
    return best


def _per_step_us(method, system, q0, v0, h, n):
    """µs per step of one trajectory run through ``integrate`` (``n`` steps, initial state
    included, after one warm-up run that also pays a compiled backend's first call)."""
    integrate(system, method, q0, v0, h=h, n_steps=2)
    t0 = time.process_time()
    integrate(system, method, q0, v0, h=h, n_steps=n)
    return (time.process_time() - t0) / n * 1e6


# ---------------------------------------------------------------- figures


def fig_single_and_accuracy(quick, out):
    T, repeats = 10.0, (2 if quick else 5)
    stages = (3, 4) if quick else (2, 3, 4)
    grid = np.unique(np.round(np.geomspace(20, 2000, 12 if quick else 31)).astype(int))
    print(f"\n1-2. one trajectory, T = {T:g}: µs/step (NH-PRK s = 3, h = 0.1; DOP853 per "
          f"accepted step at rtol 1e-6) and CPU ms to reach an error (max over q at T)")
    print(f"{'model':9s} {'NH µs':>7s} {'DOP µs':>7s} {'(acc)':>7s} | {'target':>7s} "
          f"{'NH (s, N)':>10s} {'NH ms':>8s} {'DOP rtol':>9s} {'DOP ms':>8s} {'(acc) ms':>9s} "
          f"{'NH/DOP':>7s} backend")
    for name in ("particle", "chaotic"):
        if not _wanted(name):
            continue
        system, q0, v0 = _vector_models()[name]
        f, fa = HAND_RHS[name], _acc_rhs(system)
        n = system.n
        y0 = np.r_[q0, v0]
        ref, _ = _dop(f, y0, T, 1e-13)
        q_ref = ref.y[:n, -1]
        pair3 = _method(NonholonomicPRK, lobatto_iiia_iiib(3))
        nh_us = min(_per_step_us(pair3, system, q0, v0, 0.1, 100 if quick else 2000)
                    for _ in range(repeats))
        d6, _ = _dop(f, y0, T, 1e-6)
        dop_us, acc_us = (t * 1e6 / (d6.t.size - 1) for t in _best_interleaved(
            [partial(_dop, f, y0, T, 1e-6), partial(_dop, fa, y0, T, 1e-6)], repeats))
        for target in (1e-6, 1e-9):
            best = None  # (time, s, N)
            for s in stages:
                method = _method(NonholonomicPRK, lobatto_iiia_iiib(s))
                for N in grid:
                    sol, t = _nh(system, method, q0, v0, T / N, T)
                    if np.abs(sol.q[-1] - q_ref).max() <= target:
                        if best is None or t < best[0]:
                            best = (t, s, N)
                        break
            rtol = None
            for k in range(6, 27):
                d, _ = _dop(f, y0, T, 10.0 ** (-k / 2))
                if np.abs(d.y[:n, -1] - q_ref).max() <= target:
                    rtol = 10.0 ** (-k / 2)
                    break
            if best is None or rtol is None:
                print(f"{name:9s} target {target:.0e} not reached")
                continue
            _, s, N = best
            method = _method(NonholonomicPRK, lobatto_iiia_iiib(s))
            ran = _backend_of(_nh(system, method, q0, v0, T / N, T)[0])
            t_nh, t_dop, t_acc = _best_interleaved(
                [partial(_nh, system, method, q0, v0, T / N, T),
                 partial(_dop, f, y0, T, rtol), partial(_dop, fa, y0, T, rtol)], repeats)
            print(f"{name:9s} {nh_us:7.1f} {dop_us:7.1f} {acc_us:7.1f} | {target:7.0e} "
                  f"{f'({s}, {N})':>10s} {1e3 * t_nh:8.2f} {rtol:9.1e} {1e3 * t_dop:8.2f} "
                  f"{1e3 * t_acc:9.2f} {t_nh / t_dop:7.2f} {ran}", flush=True)
            out.setdefault("accuracy", []).append(dict(
                model=name, nh_step_us=nh_us, dop_step_us=dop_us, dop_acc_step_us=acc_us,
                target=target, s=s, N=int(N), nh_s=t_nh, dop_rtol=rtol, dop_s=t_dop,
                dop_acc_s=t_acc, backend=ran))


def fig_cvt(quick, out):
    T = 100.0 if quick else 1e4
    h, every = 0.1, 10
    system, q0, v0 = _vector_models()["CVT"]
    f = HAND_RHS["CVT"]
    y0 = np.r_[q0, v0]
    n_out = round(T / (h * every))
    t_eval = np.linspace(0.0, T, n_out + 1)

    def dE(q, v):
        E = nht.cvt_energies(q, v)[2]
        return float(np.max(np.abs(E - E[0])))

    dop = []  # (rtol, cpu s, max |dE|)
    for k in range(4, 14):
        d, t = _dop(f, y0, T, 10.0 ** -k, t_eval=t_eval)
        dop.append((10.0 ** -k, t, dE(d.y[:3].T, d.y[3:].T)))
    print(f"\n3. CVT (Q0, V0_LOW), T = {T:g}: max |E - E0| at equal CPU time "
          f"(NH-PRK h = {h}, energy every {every} steps; DOP853 on the same output times: "
          f"its best error within the NH-PRK's time)")
    print("   DOP853: " + ", ".join(f"rtol {r:.0e} {t:.2f} s {e:.1e}" for r, t, e in dop))
    print(f"{'s':>3s} {'NH s':>8s} {'NH |dE|':>9s} {'DOP |dE|':>10s} {'at rtol':>8s} "
          f"{'ratio':>9s} backend")
    for s in (2, 3, 4):
        method = _method(NonholonomicPRK, lobatto_iiia_iiib(s))
        integrate(system, method, q0, v0, h=h, n_steps=2)  # a compiled backend's first call
        sol, t = _nh(system, method, q0, v0, h, T, save_every=every)
        e_nh, ran = dE(sol.q, sol.v), _backend_of(sol)
        # DOP853's best error among its runs that took at most the NH-PRK's time; when even
        # its cheapest run took longer, that run (a comparison in DOP853's favour), marked >
        within = [(e, r) for r, td, e in dop if td <= t]
        slower = not within
        e_dop, r_dop = min(within) if within else (dop[0][2], dop[0][0])
        print(f"{s:3d} {t:8.2f} {e_nh:9.1e} {e_dop:10.1e} {r_dop:8.0e} "
              f"{('>' if slower else ' ') + f'{e_dop / e_nh:.1f}':>9s} {ran}"
              + ("  (DOP853's cheapest run took longer)" if slower else ""), flush=True)
        out.setdefault("cvt", []).append(dict(s=s, T=T, nh_s=t, nh_dE=e_nh, dop_dE=e_dop,
                                              dop_rtol=r_dop, dop=dop, backend=ran,
                                              dop_cheapest_slower=slower))


def fig_lie(quick, out):
    T, repeats = 10.0, (2 if quick else 5)
    gb, eb = nht.ball_initial()
    R0, W0 = np.eye(3), np.array([0.3, 1.0, -0.4])
    ball, top = _lie_models()[-1]
    print(f"\n4. Lie groups, T = {T:g} (Cayley, Lobatto 3): error at T = max over (g, η) "
          f"against DOP853 at rtol 1e-13; DOP853 at the loosest rtol = 10^(-k/2) reaching it")
    print(f"{'model':9s} {'h':>5s} {'µs/step':>8s} {'error':>8s} {'NH ms':>8s} "
          f"{'DOP rtol':>9s} {'DOP ms':>8s} {'NH/DOP':>7s} backend")

    def ball_y0():
        return np.r_[gb[:3, :3].ravel(), gb[3:5, 5], gb[:3, :3] @ eb[:3], eb[3:]]

    def ball_state(y):
        R = y[:9].reshape(3, 3)
        return np.r_[R.ravel(), y[9:11], R.T @ y[11:14], y[14:16]]

    def top_state(y):
        return y

    cases = [("ball", ball, _method(LieNonholonomicPRK, 3), gb, eb, 0.1, ball_y0(), ball_state,
              lambda g, e: np.r_[g[:3, :3].ravel(), g[3:5, 5], e]),
             ("heavy top", top, _method(LieVPRK, lobatto_iiia_iiib(3)), R0, W0, 0.05,
              np.r_[R0.ravel(), W0], top_state, lambda g, e: np.r_[g.ravel(), e])]
    for name, system, method, g0, e0, h, y0, to_state, nh_state in cases:
        f = HAND_RHS[name]
        ref, _ = _dop(f, y0, T, 1e-13)
        x_ref = to_state(ref.y[:, -1])
        us = min(_per_step_us(method, system, g0, e0, h, 20 if quick else 200)
                 for _ in range(repeats))
        sol, _ = _nh(system, method, g0, e0, h, T)
        ran = _backend_of(sol)
        err = float(np.max(np.abs(nh_state(sol.q[-1], sol.v[-1]) - x_ref)))
        rtol = None
        for k in range(6, 27):
            d, _ = _dop(f, y0, T, 10.0 ** (-k / 2))
            if np.max(np.abs(to_state(d.y[:, -1]) - x_ref)) <= err:
                rtol = 10.0 ** (-k / 2)
                break
        t_nh, t_dop = _best_interleaved([partial(_nh, system, method, g0, e0, h, T),
                                         partial(_dop, f, y0, T, rtol)], repeats)
        print(f"{name:9s} {h:5.2f} {us:8.1f} {err:8.1e} {1e3 * t_nh:8.1f} {rtol:9.1e} "
              f"{1e3 * t_dop:8.2f} {t_nh / t_dop:7.1f} {ran}", flush=True)
        out.setdefault("lie", []).append(dict(model=name, h=h, step_us=us, error=err,
                                              nh_s=t_nh, dop_rtol=rtol, dop_s=t_dop,
                                              backend=ran))


def fig_ensemble(quick, out):
    B = 1000 if quick else 10_000
    T, h = (2.0 if quick else 10.0), 0.1
    n_steps = round(T / h)
    system = _vector_models()["chaotic"][0]
    q, v = nht.chaotic_ensemble(B - 1)
    y0 = np.concatenate([q, v], -1)

    def stacked(y):
        return chaotic_rhs(y.reshape(B, 14)).ravel()

    method = _method(NonholonomicPRK, lobatto_iiia_iiib(3))
    # not timed: a compiled backend's first call (the batched module) and the backend name
    ran = _backend_of(_nh(system, method, q[:2], v[:2], h, 2 * h)[0])
    t_nh, t_dop = _best_interleaved(
        [partial(_nh, system, method, q, v, h, T), partial(_dop, stacked, y0.ravel(), T, 1e-6)],
        1)
    # wall time too: the compiled batch runs its members in parallel (prange), so its CPU
    # time counts every core
    w0 = time.perf_counter()
    _nh(system, method, q, v, h, T)
    w_nh = time.perf_counter() - w0
    w0 = time.perf_counter()
    _dop(stacked, y0.ravel(), T, 1e-6)
    w_dop = time.perf_counter() - w0
    per_nh = t_nh / (B * n_steps) * 1e6
    per_dop = t_dop / (B * n_steps) * 1e6
    print(f"\n5. chaotic ensemble, B = {B}, T = {T:g}, h = {h}: NH-PRK s = 3 batched "
          f"{per_nh:.2f} µs per trajectory-step ({t_nh:.2f} s); stacked DOP853 rtol 1e-6 "
          f"{t_dop:.2f} s = {per_dop:.2f} µs per member and h-step; ratio {t_nh / t_dop:.2f} "
          f"(backend {ran}); wall time: NH-PRK {w_nh / (B * n_steps) * 1e6:.2f} µs per "
          f"trajectory-step, DOP853 {w_dop / (B * n_steps) * 1e6:.2f} µs")
    out["ensemble"] = dict(B=B, T=T, nh_s=t_nh, dop_s=t_dop, nh_us=per_nh, dop_us=per_dop,
                           backend=ran, nh_wall_s=w_nh, dop_wall_s=w_dop)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short run: check the script")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--backend", choices=("auto", "numpy", "numba"), default="auto",
                    help="the chetaev methods' backend (default auto)")
    ap.add_argument("--only", action="append", choices=PARTS, default=None, metavar="PART",
                    help=f"run only this part (repeatable; one of {', '.join(PARTS)}): "
                         "'particle' and 'chaotic' are the rows of figures 1-2, 'lie' figure "
                         "4, 'ensemble' figure 5, 'cvt' figure 3 (default: all)")
    args = ap.parse_args(argv)
    global BACKEND, ONLY
    BACKEND = args.backend
    ONLY = frozenset(args.only or PARTS)
    rng = np.random.default_rng(0)
    worst = _check_hand_rhs(rng)
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
    print(f"# {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"python {platform.python_version()}, numpy {np.__version__}; "
          f"OPENBLAS_NUM_THREADS={blas}; CPU time (time.process_time)")
    print(f"# hand-written RHS == system.acceleration on 100 random states of each model: "
          f"worst relative difference {worst:.1e}")
    system, q0, v0 = _vector_models()["particle"]
    stats = integrate(system, _method(NonholonomicPRK, lobatto_iiia_iiib(3)), q0, v0, h=0.1,
                      n_steps=2).stats
    backend = stats.get("backend", "numpy (no backend choice in this tree)")
    print(f"# NonholonomicPRK backend (sol.stats['backend']): {backend}")
    out = {"quick": args.quick, "OPENBLAS_NUM_THREADS": blas, "rhs_check": worst,
           "backend": str(backend)}
    out["only"] = sorted(ONLY)
    if ONLY & {"particle", "chaotic"}:
        fig_single_and_accuracy(args.quick, out)
    if _wanted("lie"):
        fig_lie(args.quick, out)
    if _wanted("ensemble"):
        fig_ensemble(args.quick, out)
    if _wanted("cvt"):
        fig_cvt(args.quick, out)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, default=float))
    return out


if __name__ == "__main__":
    main()
