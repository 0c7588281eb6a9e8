"""The compiled GNI step (issue 17): paper Def. 4.1 / (8)/(26) and the local form (9)/(27)
in numba.

The compiled twin of :func:`._gni.gni_momentum_step` for a system built by
``chetaev.discrete_lagrangian.symbolic.from_lagrangian`` (its scalar kernels ``D1L``,
``D2L``, ``D11L``, ``D12L``, ``D21L``, ``D22L``, ``phi``, ``phi_v``), one node
``(q_k, v_k, λ_k) → (q_{k+1}, v_{k+1}, λ_{k+1})``:

1. ``p⁻_k = G(q_k) v_k + (h/2) mu(q_k)ᵀ λ_k`` (the reflection (8)/(26) of ``p⁺_k``), with the
   metric ``G(q) = ∂²L/∂v²(q, 0)`` (the mass matrix ``M(q)`` of a mechanical system, constant
   or not) and ``mu(q) = ∂Φ/∂v``, ``a(q) = Φ(q, 0)`` of the constraint ``Φ = mu v + a``;
2. the inverse discrete Legendre transform ``−D1 L_d(q_k, q_{k+1}) = p⁻_k`` solved for
   ``q_{k+1}`` by the chord Newton iteration of :func:`._gni.solve_pre_legendre` (matrix
   ``∂(D1 L_d)/∂q_{k+1}`` at the guess ``q_k + h v_k``, scale ``1 + max|p⁻_k|``) with the one
   compiled Newton driver (``NEWTON`` of ``chetaev.discrete_lagrangian.extending``, the rule
   of ``newton_solve`` unbatched): ``max|R| ≤ max(max(tol, 64 eps)·scale, atol)``, a
   non-finite residual, a singular matrix, ``max_iter`` iterations or ``max_stall``
   non-decreasing ones;
3. ``p⁺_{k+1} = D2 L_d(q_k, q_{k+1})``, the closed-form multiplier
   ``h λ_{k+1} = −2 C⁻¹ (mu G⁻¹ p⁺ + a)``, ``C = mu G⁻¹ muᵀ`` at ``q_{k+1}``,
   ``p̄ = p⁺ + (h/2) muᵀ λ_{k+1}`` and ``v_{k+1} = G⁻¹ p̄`` (:func:`._reflection.
   node_from_post_momentum`); the post-condition residual ``max|Φ(q_{k+1}, v_{k+1})|``.

``form="two_step"`` (the local form (9)/(27), :meth:`._gni.GNI._step_two`): from the node
``q_{k+1}`` (the look-ahead point; on the first step from 2. above) Newton on
``(q_{k+2}, λ_{k+1})`` of :func:`._gni.gni_two_step_residual` with its analytic Jacobian
(full or simplified Newton as ``NewtonOptions.simplified``), initial guess
``(2q_{k+1} − q_k, λ_k)``, scale ``1 + max|p̄_k|``; ``p̄_{k+1} = (p⁺ − D1 L_d(q_{k+1},
q_{k+2}))/2``, ``v_{k+1} = G⁻¹ p̄_{k+1}``. The compiled loop carries the look-ahead point; a
compiled :meth:`GNI.step` returns no carry, so the next step recomputes it from the node data
(as the numpy step does without a carry): the same nodes to the Newton tolerance.

Discrete Lagrangians: the endpoint family ``L_d^α = h[(1−α)L(q0, v̄) + αL(q1, v̄)]`` (paper
(10), (16): ``"euler_a"``, ``"euler_b"``, ``"rattle"``, ``AlphaDiscreteLagrangian(α)``,
``DiscreteLagrangian("trapezoidal")``) and the quadrature-point family
``L_d = h L((1−α)q0 + αq1, v̄)`` (``"midpoint"``, ``DiscreteLagrangian("alpha", α)``); not a
subclass of these (it may override the formulas) nor a discrete Lagrangian of the user's.

Both forms solve through one setup, ``_gni_solve(two, ...)`` (the metric and constraint at
the node, the guess, the scale), and the one driver ``_newton`` on this module's ``_eval``
(the form selected by ``two``). The generated module reuses the LU factorisation, the
max-norm, the Newton driver with the step loop's bookkeeping and the serial / ``prange``
batch drivers of the PRK engine (``LINALG``, ``NEWTON``, ``BATCH_DRIVERS`` of
``chetaev.discrete_lagrangian.extending``; ``_eval`` and ``_newton`` inlined) and defines its
own ``_run_one`` with the engine's signature, so the engine's ``run_compiled`` (the compiled
``integrate`` loop) and ``compiled_step`` run it unchanged.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

__all__ = ["GNI_STEP", "compiled_plan"]

#: The compiled steps of both forms and the loop over the steps (constants ``ALPHA``,
#: ``QUAD``: 0 the endpoint family, 1 the quadrature-point family; ``TWO``: the local form).
GNI_STEP = '''
@njit(cache=True)
def _gni_D1(q0, q1, h, vb, qa, t1, t2, out):
    for k in range(N):
        vb[k] = (q1[k] - q0[k]) / h
    if QUAD:
        for k in range(N):
            qa[k] = (1.0 - ALPHA) * q0[k] + ALPHA * q1[k]
        D1L(qa, vb, t1)
        D2L(qa, vb, t2)
        for k in range(N):
            out[k] = h * (1.0 - ALPHA) * t1[k] - t2[k]
        return
    D2L(q0, vb, t1)
    D2L(q1, vb, t2)
    for k in range(N):
        out[k] = -(1.0 - ALPHA) * t1[k] - ALPHA * t2[k]
    if ALPHA != 1.0:
        D1L(q0, vb, t1)
        for k in range(N):
            out[k] = out[k] + h * (1.0 - ALPHA) * t1[k]


@njit(cache=True)
def _gni_D2(q0, q1, h, vb, qa, t1, t2, out):
    for k in range(N):
        vb[k] = (q1[k] - q0[k]) / h
    if QUAD:
        for k in range(N):
            qa[k] = (1.0 - ALPHA) * q0[k] + ALPHA * q1[k]
        D1L(qa, vb, t1)
        D2L(qa, vb, t2)
        for k in range(N):
            out[k] = h * ALPHA * t1[k] + t2[k]
        return
    D2L(q0, vb, t1)
    D2L(q1, vb, t2)
    for k in range(N):
        out[k] = (1.0 - ALPHA) * t1[k] + ALPHA * t2[k]
    if ALPHA != 0.0:
        D1L(q1, vb, t1)
        for k in range(N):
            out[k] = out[k] + h * ALPHA * t1[k]


@njit(cache=True)
def _gni_D12(q0, q1, h, vb, qa, T1, T2, J):
    for k in range(N):
        vb[k] = (q1[k] - q0[k]) / h
    if QUAD:
        for k in range(N):
            qa[k] = (1.0 - ALPHA) * q0[k] + ALPHA * q1[k]
        D11L(qa, vb, T1)
        D12L(qa, vb, T2)
        for r in range(N):
            for c in range(N):
                J[r, c] = h * (1.0 - ALPHA) * (ALPHA * T1[r, c] + T2[r, c] / h)
        D21L(qa, vb, T1)
        D22L(qa, vb, T2)
        for r in range(N):
            for c in range(N):
                J[r, c] = J[r, c] - (ALPHA * T1[r, c] + T2[r, c] / h)
        return
    for r in range(N):
        for c in range(N):
            J[r, c] = 0.0
    if ALPHA != 1.0:
        D12L(q0, vb, T1)
        D22L(q0, vb, T2)
        for r in range(N):
            for c in range(N):
                J[r, c] = J[r, c] + (1.0 - ALPHA) * (T1[r, c] - T2[r, c] / h)
    if ALPHA != 0.0:
        D21L(q1, vb, T1)
        D22L(q1, vb, T2)
        for r in range(N):
            for c in range(N):
                J[r, c] = J[r, c] - ALPHA * (T1[r, c] + T2[r, c] / h)


@njit(cache=True)
def _gni_node(q1, pp, h, z, G, piv, mu, a, Y, C, pivm, w, lam1, pb, v1):
    """(8)/(26) at q1: lam1, pb = pbar and v1 from the post-momentum pp."""
    D22L(q1, z, G)
    phi_v(q1, z, mu)
    phi(q1, z, a)
    if not _lu_factor(G, piv):
        return False
    _lu_solve(G, piv, pp, v1)
    for i in range(M):
        acc = 0.0
        for k in range(N):
            acc += mu[i, k] * v1[k]
        w[i] = acc + a[i]
    for j in range(M):
        _lu_solve(G, piv, mu[j], Y[j])
    for i in range(M):
        for j in range(M):
            acc = 0.0
            for k in range(N):
                acc += mu[i, k] * Y[j, k]
            C[i, j] = acc
    if not _lu_factor(C, pivm):
        return False
    _lu_solve(C, pivm, w, lam1)
    for i in range(M):
        lam1[i] = (-2.0 / h) * lam1[i]
    for k in range(N):
        acc = 0.0
        for i in range(M):
            acc += mu[i, k] * lam1[i]
        pb[k] = pp[k] + 0.5 * h * acc
    _lu_solve(G, piv, pb, v1)
    return True


@njit(cache=True)
def _eval(two, ctx, x, R, J, jac):
    """NEWTON's evaluation: the residual at x in R, or with jac the Jacobian J at x (the
    point of the last residual), of the local form (two: (9)/(27) in x = (q_{k+2},
    lam_{k+1}), gni_two_step_residual / gni_two_step_jacobian; G holds the LU of G(q_{k+1}),
    Y the rows G^-1 mu_i) or of the inverse Legendre transform (R = D1 L_d(q, x) + p_minus,
    J = d(D1 L_d)/dq1). One context type for both forms."""
    q, pb, h, vb, qa, t1, t2, T1, T2, Jn, G, pivg, mu, a, Y, d1, scale = ctx
    if not two:
        if jac:
            _gni_D12(q, x, h, vb, qa, T1, T2, J)
        else:
            _gni_D1(q, x, h, vb, qa, t1, t2, R)
            for c in range(N):
                R[c] += pb[c]
        return
    xq = x[:N]
    if jac:
        _gni_D12(q, xq, h, vb, qa, T1, T2, Jn)
        for r in range(N):
            for c in range(N):
                J[r, c] = Jn[r, c]
            for i in range(M):
                J[r, N + i] = h * mu[i, r]
        for i in range(M):
            for c in range(N):
                acc = 0.0
                for l in range(N):
                    acc += (-0.5 * Y[i, l]) * Jn[l, c]
                J[N + i, c] = acc
            for j in range(M):
                J[N + i, N + j] = 0.0
        return
    _gni_D1(q, xq, h, vb, qa, t1, t2, d1)
    for c in range(N):
        acc = 0.0
        for i in range(M):
            acc += mu[i, c] * x[N + i]
        R[c] = d1[c] + pb[c] + h * acc
        t1[c] = 0.5 * (pb[c] - d1[c])
    _lu_solve(G, pivg, t1, t2)
    for i in range(M):
        acc = 0.0
        for c in range(N):
            acc += mu[i, c] * t2[c]
        R[N + i] = acc + a[i]


@njit(cache=True)
def _scale(two, ctx, x):
    # 1 + max|p_minus| (the momentum form), 1 + max|pbar_k| (the local form): set up by
    # _gni_solve
    return ctx[16]


@njit(cache=True)
def _gni_solve(two, q0, q, v, p, lam, h, tolf, atol, max_iter, refresh, max_stall, ws, pb, x,
               R, J, piv, dx):
    """One Newton solve of a step, either form, through NEWTON's _newton. The momentum form
    (two False; GNI's momentum step): -D1 L_d(q, x) = p_minus for x = q_{k+1}, p_minus =
    G v + (h/2) mu^T lam at q (pre_post_from_node) in pb; chord Newton, matrix at the guess
    q + h v (solve_pre_legendre), scale 1 + max|p_minus|. The local form (two; GNI._step_two)
    at the node q = q_{k+1} after q0 = q_k: x = (q_{k+2}, lam_{k+1}) from [2 q - q0, lam],
    p_plus = D2 L_d(q0, q) in pb, the LU of G(q) and Y = G^-1 mu^T in ws, scale 1 +
    max|p|. Returns (r, thr, it)."""
    z, vb, qa, t1, t2, T1, T2, Jn, G, pivg, mu, a, Y, d1 = ws
    D22L(q, z, G)
    phi_v(q, z, mu)
    mp = 0.0
    if two:
        phi(q, z, a)
        if not _lu_factor(G, pivg):
            return math.inf, 0.0, 0
        for i in range(M):
            _lu_solve(G, pivg, mu[i], Y[i])
        _gni_D2(q0, q, h, vb, qa, t1, t2, pb)
        for c in range(N):
            x[c] = 2.0 * q[c] - q0[c]
            mp = max(mp, abs(p[c]))
        for i in range(M):
            x[N + i] = lam[i]
    else:
        for c in range(N):
            pbar = 0.0
            for l in range(N):
                pbar += G[c, l] * v[l]
            imp = 0.0
            for i in range(M):
                imp += mu[i, c] * lam[i]
            pb[c] = pbar + 0.5 * h * imp
            mp = max(mp, abs(pb[c]))
        for c in range(N):
            x[c] = q[c] + h * v[c]
    ctx = (q, pb, h, vb, qa, t1, t2, T1, T2, Jn, G, pivg, mu, a, Y, d1, 1.0 + mp)
    rf = refresh if two else math.inf
    simplified = SIMPLIFIED if two else True
    return _newton(two, ctx, x, R, J, piv, dx, tolf, 0.0, atol, -1.0, max_iter, rf, max_stall,
                   simplified)


@njit(cache=True)
def _run_one(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
             refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out, mem):
    z = np.zeros(N)
    vb = np.empty(N)
    qa = np.empty(N)
    t1 = np.empty(N)
    t2 = np.empty(N)
    T1 = np.empty((N, N))
    T2 = np.empty((N, N))
    Jn = np.empty((N, N))
    G = np.empty((N, N))
    pivg = np.empty(N, np.int64)
    mu = np.empty((M, N))
    a = np.empty(M)
    Y = np.empty((M, N))
    d1 = np.empty(N)
    ws = (z, vb, qa, t1, t2, T1, T2, Jn, G, pivg, mu, a, Y, d1)
    J = np.empty((N, N))
    piv = np.empty(N, np.int64)
    C = np.empty((M, M))
    pivm = np.empty(M, np.int64)
    w = np.empty(M)
    pm = np.empty(N)
    pp = np.empty(N)
    F = np.empty(N)
    dx = np.empty(N)
    x = np.empty(N)
    ph = np.empty(M)
    y = np.empty(N + M)
    R = np.empty(N + M)
    JJ = np.empty((N + M, N + M))
    pivj = np.empty(N + M, np.int64)
    dy = np.empty(N + M)
    qn = np.empty(N)
    hk = np.zeros((1, 1))
    # the two-step form continues from the next node a run left (mem), at the same h only
    have_next = _memory_load(mem, hk, qn) > 0 and TWO and hk[0, 0] == h
    q = q0.copy()
    v = v0.copy()
    p = p0.copy()
    lam = lam0.copy()
    lam1 = np.empty(M)
    v1 = np.empty(N)
    p1 = np.empty(N)
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    for k in range(1, nsteps + 1):
        it0 = 0
        it = 0
        r = 0.0
        thr = 0.0
        if TWO and have_next:
            for c in range(N):
                x[c] = qn[c]
        else:
            r, thr, it0 = _gni_solve(False, q, q, v, p, lam, h, tolf, atol, max_iter, refresh,
                                     max_stall, ws, pm, x, F, J, piv, dx)
        fit = it0
        if TWO and r <= thr:
            # the local form: (q2, lam1) at the node x = q_{k+1}; v1 from the averaged
            # momentum (p_plus - D1 L_d(x, q2))/2 (GNI._step_two)
            r, thr, it = _gni_solve(True, q, x, v, p, lam, h, tolf, atol, max_iter, refresh,
                                    max_stall, ws, pp, y, R, JJ, pivj, dy)
            fit = it
        its[k - 1] = it0 + it
        res[k - 1] = r
        if not (r <= thr):
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = fit
            break
        if TWO:
            _gni_D1(x, y[:N], h, vb, qa, t1, t2, F)
            for c in range(N):
                p1[c] = 0.5 * (pp[c] + (-F[c]))
            _lu_solve(G, pivg, p1, v1)
            for i in range(M):
                lam1[i] = y[N + i]
        else:
            # p_plus = D2 L_d(q_k, q_{k+1}), the node data at k+1 (node_from_post_momentum)
            _gni_D2(q, x, h, vb, qa, t1, t2, pp)
            if not _gni_node(x, pp, h, z, G, pivg, mu, a, Y, C, pivm, w, lam1, p1, v1):
                status = 2
                break
        if not (_finite(x) and _finite(v1) and _finite(p1) and _finite(lam1)):
            status = 2
            break
        phi(x, v1, ph)
        cr = _maxabs(ph)  # inf for a NaN entry
        cres[k - 1] = cr
        if not (cr <= cbound):
            status = 3
            fail_r = cr
            break
        for c in range(N):
            q[c] = x[c]
            v[c] = v1[c]
            p[c] = p1[c]
        if TWO:
            for c in range(N):
                qn[c] = y[c]
            have_next = True
        for i in range(M):
            lam[i] = lam1[i]
        done = k
        if k % save_every == 0:
            _save_node(oq, ov, op, olam, k // save_every, q, v, p, lam)
    _finish(fin, out, q, v, p, lam, status, done, fail_r, fail_thr, fail_it)
    hk[0, 0] = h
    _memory_store(mem, hk, 1 if have_next else 0, qn)


# what a member keeps between runs (mem): a flag, the step h and the two-step form's next node
MEM = 2 + N
'''


# One plan per (kernels, discrete Lagrangian, Newton options); an entry goes with its kernels.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _family(dl: Any) -> tuple[int, float] | None:
    """``(QUAD, ALPHA)`` of a discrete Lagrangian with a compiled form, else None (also for
    a subclass, which may override the formulas)."""
    from chetaev.discrete_lagrangian import DiscreteLagrangian

    from ._discrete_lagrangians import AlphaDiscreteLagrangian, MidpointDiscreteLagrangian

    inner = getattr(dl, "inner", dl)
    if type(inner) is AlphaDiscreteLagrangian:
        return 0, float(inner.alpha)
    if type(inner) in (DiscreteLagrangian, MidpointDiscreteLagrangian):
        if inner.kind == "trapezoidal":
            return 0, 0.5
        if inner.kind in ("midpoint", "alpha"):
            return 1, float(inner.alpha)
    return None


def compiled_plan(method: Any, system: Any, iface: Any) -> tuple[str, Any]:
    """``(why_not, plan)`` of :class:`~chetaev.gni.GNI` on ``system`` (issue 17): either
    form, the system's own metric (no ``metric=`` override), a constraint linear or
    affine in the velocity, no external force, a discrete Lagrangian of the endpoint or
    quadrature-point family (module docstring)."""
    from chetaev.discrete_lagrangian.extending import (
        BATCH_DRIVERS,
        LINALG,
        NEWTON,
        CompiledPlan,
        build_source,
        inline_small,
    )

    k = iface.kernels
    if method.metric is not None:
        return "a metric= override (a Python callable)", None
    if k.forced or iface.force is not None:
        return "a forced system (external forces run on numpy for now)", None
    if k.constraint != "velocity" or not k.m or not iface.linear_in_velocity:
        return "a system without a constraint linear or affine in the velocity", None
    fam = _family(method.discrete_lagrangian)
    if fam is None:
        return (f"the discrete Lagrangian {type(method.discrete_lagrangian).__name__} (only "
                "the endpoint and quadrature-point families are compiled)"), None
    per = _PLANS.setdefault(k, {})
    two = method.form == "two_step"
    key = (fam, two, method.newton)
    plan = per.get(key)
    if plan is None:
        consts = f"QUAD = {fam[0]}\nALPHA = {fam[1]!r}\nTWO = {two}\n"
        engine = "\n\n".join([GNI_STEP, LINALG, NEWTON, BATCH_DRIVERS])
        # the driver and the evaluation inlined into _gni_solve (as the Lie engine)
        source = inline_small(build_source(k, 1, 0, "", two and method.newton.simplified,
                                           consts, engine=engine), names=("_eval", "_newton"))
        nil = np.zeros((1, 1))
        plan = CompiledPlan(source=source, a=nil, ahat=nil, b=np.zeros(1), bhat=np.zeros(1),
                            m=int(k.m), options=method.newton, has_lam=True)
        per[key] = plan
    return "", plan
