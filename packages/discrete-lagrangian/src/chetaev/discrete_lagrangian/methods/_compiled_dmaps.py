"""The compiled node-constrained step of the discretization-map methods (issue 17).

The compiled twin of :func:`._dmaps_euclid.node_step` (paper Thm. 4.5, (4.4)–(4.5) and the
null-space form (4.7)–(4.9); RATTLE (5.16)–(5.18)) for an unforced
``ConstrainedSystem`` built by ``chetaev.discrete_lagrangian.symbolic.from_lagrangian`` with
a holonomic constraint and a constant mass matrix (``L = ½ vᵀMv − V(q)``; its scalar kernels
``D1L``, ``D11L``, ``D22L``, ``hol_phi``, ``hol_jac``, ``hol_hess``), one node
``(q_k, p_k) → (q_{k+1}, p_{k+1}, λ_{k+1})``:

1. Phase 1, Newton on the same unknowns and equations as the numpy step, the gradient and
   Hessian of ``V`` read as ``∇V(q) = −D1L(q, 0)``, ``∇²V(q) = −D11L(q, 0)``; the potential
   quadrature ``V_d`` is the θ-map's ``V((1−θ)q0 + θq1)`` (``TRAP = False``, constant
   ``THETA``) or RATTLE's trapezoid ``½(V(q0) + V(q1))`` (``TRAP = True``):

   * the multiplier form (mode 0, ``NULLSPACE = False``): ``x = (q1, ν)``, ``ν = h²λ``,
     ``r1 = M(q1 − q0) + h² ∂V_d/∂q0 − G(q0)ᵀν − h p0``, ``r2 = φ(q1)``, Jacobian
     ``[[M + h² ∂²V_d/∂q1∂q0, −G(q0)ᵀ], [G(q1), 0]]``;
   * the null-space form (mode 1, ``NULLSPACE = True``): ``x = q1``, the rows
     ``P0ᵀ(M(q1 − q0) + h² ∂V_d/∂q0 − h p0)`` and ``φ(q1)``, ``P0`` an orthonormal basis of
     ``ker G(q0)`` (the last ``m − k`` columns of a complete Householder QR of ``G(q0)ᵀ``;
     another orthonormal basis than LAPACK's changes the rows by an orthogonal map, the
     Newton iterates not at all);

   initial guess ``q0 + h M⁻¹p0`` (and ``ν = 0``), scale ``max(1, max|M|·max|q0|)``,
   through the one compiled Newton driver (``NEWTON`` of
   ``chetaev.discrete_lagrangian.extending``: the rule of ``newton_solve`` unbatched, full
   or simplified Newton as ``NewtonOptions.simplified``).
2. Phase 2: ``p1* = M(q1 − q0)/h − h ∂V_d/∂q1`` projected onto ``Leg(TN)``,
   ``p1 = p1* + G(q1)ᵀμ``, ``μ = −C⁻¹G(q1)M⁻¹p1*``, ``C = G(q1)M⁻¹G(q1)ᵀ``
   (:func:`~chetaev.discrete_lagrangian.core._dmaps_kernels.project_momentum`; for the
   null-space form the same momentum as (4.9), the unique ``p1`` with ``G(q1)M⁻¹p1 = 0`` and
   ``p1 − p1* ∈ range G(q1)ᵀ``); ``v1 = M⁻¹p1``; ``λ_{k+1}`` the consistent continuous
   multiplier ``λ(q1, v1) = −C⁻¹(Σ_ij ∂G_{·i}/∂q_j v_i v_j + G M⁻¹ D1L(q1, v1))`` of
   ``ConstrainedSystem.multiplier``; the post-condition residual
   ``max(|φ(q1)|, |G(q1)v1|)``.

``M`` and ``M⁻¹`` are the system interface's arrays (the numpy step's), passed as the plan's
``a`` and ``ahat``. The generated module reuses the PRK engine's LU, max-norm, Newton driver,
step bookkeeping and batch drivers (``LINALG``, ``NEWTON``, ``BATCH_DRIVERS``; ``_eval`` and
``_newton`` inlined, as the GNI) and defines its own ``_run_one`` with the engine's
signature, so ``run_compiled`` (the compiled ``integrate`` loop) and ``compiled_step`` run it
unchanged; a Newton failure reports step, time and residual as every compiled engine.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

__all__ = ["DMAP_STEP", "compiled_plan"]

#: The compiled node step and the loop over the steps (constants ``THETA``, ``TRAP``,
#: ``NULLSPACE``; module docstring).
DMAP_STEP = '''
@njit(cache=True)
def _dm_grad(q, z, g):
    # g = grad V(q) = -D1L(q, 0)
    D1L(q, z, g)
    for c in range(N):
        g[c] = -g[c]


@njit(cache=True)
def _dm_forces(q0, q1, z, qa, g0, f0, f1):
    # (dV_d/dq0, dV_d/dq1); the trapezoid's dV_d/dq0 = grad V(q0)/2 is g0 (set per step)
    if TRAP:
        _dm_grad(q1, z, f1)
        for c in range(N):
            f0[c] = 0.5 * g0[c]
            f1[c] = 0.5 * f1[c]
        return
    for c in range(N):
        qa[c] = (1.0 - THETA) * q0[c] + THETA * q1[c]
    _dm_grad(qa, z, f1)
    for c in range(N):
        f0[c] = (1.0 - THETA) * f1[c]
        f1[c] = THETA * f1[c]


@njit(cache=True)
def _dm_r1(q0, p0, h, Mm, x, z, qa, g0, f0, f1, r1):
    # r1 = M(q1 - q0) + h^2 dV_d/dq0 - h p0 (without the multiplier term)
    _dm_forces(q0, x, z, qa, g0, f0, f1)
    hh = h * h
    for r in range(N):
        acc = 0.0
        for c in range(N):
            acc += Mm[r, c] * (x[c] - q0[c])
        r1[r] = acc + hh * f0[r] - h * p0[r]


@njit(cache=True)
def _dm_block(q0, h, Mm, x, z, qa, Hs, A):
    # A = M + h^2 d^2V_d/dq1dq0: theta (1 - theta) h^2 hess V(q_theta), zero for the
    # trapezoid and theta = 0
    for r in range(N):
        for c in range(N):
            A[r, c] = Mm[r, c]
    if TRAP or THETA == 0.0:
        return
    for c in range(N):
        qa[c] = (1.0 - THETA) * q0[c] + THETA * x[c]
    D11L(qa, z, Hs)
    w = -(1.0 - THETA) * THETA * h * h
    for r in range(N):
        for c in range(N):
            A[r, c] += w * Hs[r, c]


@njit(cache=True)
def _eval(mode, ctx, x, R, J, jac):
    # NEWTON's evaluation of Phase 1: mode 0 the multiplier form in x = (q1, nu), mode 1 the
    # null-space form in x = q1 (module docstring); with jac, the Jacobian J at x
    q0, p0, h, Mm, G0, P0, z, qa, g0, f0, f1, r1, Hs, A, G1, ph, scale = ctx
    K = N - M
    if jac:
        _dm_block(q0, h, Mm, x, z, qa, Hs, A)
        hol_jac(x, z, G1)
        if mode == 0:
            for r in range(N):
                for c in range(N):
                    J[r, c] = A[r, c]
                for a in range(M):
                    J[r, N + a] = -G0[a, r]
            for a in range(M):
                for c in range(N):
                    J[N + a, c] = G1[a, c]
                for b in range(M):
                    J[N + a, N + b] = 0.0
        else:
            for i in range(K):
                for c in range(N):
                    acc = 0.0
                    for r in range(N):
                        acc += P0[r, i] * A[r, c]
                    J[i, c] = acc
            for a in range(M):
                for c in range(N):
                    J[K + a, c] = G1[a, c]
        return
    _dm_r1(q0, p0, h, Mm, x, z, qa, g0, f0, f1, r1)
    hol_phi(x, z, ph)
    if mode == 0:
        for r in range(N):
            acc = 0.0
            for a in range(M):
                acc += G0[a, r] * x[N + a]
            R[r] = r1[r] - acc
        for a in range(M):
            R[N + a] = ph[a]
    else:
        for i in range(K):
            acc = 0.0
            for r in range(N):
                acc += P0[r, i] * r1[r]
            R[i] = acc
        for a in range(M):
            R[K + a] = ph[a]


@njit(cache=True)
def _scale(mode, ctx, x):
    # max(1, max|M| max|q0|), set up per step
    return ctx[16]


@njit(cache=True)
def _dm_kernel_basis(G, T, Q, P):
    # P = the last N - M columns of Q of a complete Householder QR of G^T (N, M); T, Q
    # scratch (N, M), (N, N)
    for r in range(N):
        for a in range(M):
            T[r, a] = G[a, r]
        for c in range(N):
            Q[r, c] = 1.0 if r == c else 0.0
    for j in range(M):
        nrm = 0.0
        for r in range(j, N):
            nrm += T[r, j] * T[r, j]
        nrm = math.sqrt(nrm)
        if nrm == 0.0:
            continue
        alpha = -nrm if T[j, j] >= 0.0 else nrm
        # v = T[j:, j] - alpha e_j, kept in T[j:, j]
        T[j, j] -= alpha
        vn = 0.0
        for r in range(j, N):
            vn += T[r, j] * T[r, j]
        if vn == 0.0:
            continue
        for c in range(j + 1, M):
            acc = 0.0
            for r in range(j, N):
                acc += T[r, j] * T[r, c]
            acc = 2.0 * acc / vn
            for r in range(j, N):
                T[r, c] -= acc * T[r, j]
        for r in range(N):
            acc = 0.0
            for l in range(j, N):
                acc += Q[r, l] * T[l, j]
            acc = 2.0 * acc / vn
            for l in range(j, N):
                Q[r, l] -= acc * T[l, j]
    for r in range(N):
        for i in range(N - M):
            P[r, i] = Q[r, M + i]


@njit(cache=True)
def _dm_project(G, Minv, p, C, pivc, w, mu, out):
    # out = p + G^T mu, mu = -C^-1 G M^-1 p, C = G M^-1 G^T (project_momentum); False when
    # C is singular
    for a in range(M):
        acc = 0.0
        for r in range(N):
            gm = 0.0
            for c in range(N):
                gm += G[a, c] * Minv[c, r]
            acc += gm * p[r]
        w[a] = acc
    _dm_gram(G, Minv, C)
    if not _lu_factor(C, pivc):
        return False
    _lu_solve(C, pivc, w, mu)
    for r in range(N):
        acc = 0.0
        for a in range(M):
            acc -= G[a, r] * mu[a]
        out[r] = p[r] + acc
    return True


@njit(cache=True)
def _dm_gram(G, Minv, C):
    # C = G M^-1 G^T
    for a in range(M):
        for b in range(M):
            acc = 0.0
            for r in range(N):
                for c in range(N):
                    acc += G[a, r] * Minv[r, c] * G[b, c]
            C[a, b] = acc


@njit(cache=True)
def _dm_multiplier(q1, v1, Minv, G1, H, f, a0, C, pivc, w, lam):
    # the consistent continuous multiplier lambda(q1, v1) of ConstrainedSystem.multiplier:
    # C lambda = -(sum_ij dG_ai/dq_j v_i v_j + G M^-1 D1L(q1, v1)); False when C is singular
    hol_hess(q1, v1, H)
    D1L(q1, v1, f)
    for r in range(N):
        acc = 0.0
        for c in range(N):
            acc += Minv[r, c] * f[c]
        a0[r] = acc
    for a in range(M):
        acc = 0.0
        for i in range(N):
            for j in range(N):
                acc += H[a, i, j] * v1[i] * v1[j]
        for r in range(N):
            acc += G1[a, r] * a0[r]
        w[a] = -acc
    _dm_gram(G1, Minv, C)
    if not _lu_factor(C, pivc):
        return False
    _lu_solve(C, pivc, w, lam)
    return True


@njit(cache=True)
def _run_one(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
             refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out):
    # A = M, AH = M^-1 (the interface's arrays); B, BH unused
    Mm = A.copy()
    Minv = AH.copy()
    mmax = 0.0
    for r in range(N):
        for c in range(N):
            mmax = max(mmax, abs(Mm[r, c]))
    NXD = N if NULLSPACE else N + M
    mode = 1 if NULLSPACE else 0
    z = np.zeros(N)
    qa = np.empty(N)
    g0 = np.zeros(N)
    f0 = np.empty(N)
    f1 = np.empty(N)
    r1 = np.empty(N)
    Hs = np.empty((N, N))
    Ab = np.empty((N, N))
    G0 = np.empty((M, N))
    G1 = np.empty((M, N))
    P0 = np.empty((N, max(N - M, 1)))
    T = np.empty((N, M))
    Qh = np.empty((N, N))
    ph = np.empty(M)
    H = np.empty((M, N, N))
    C = np.empty((M, M))
    pivc = np.empty(M, np.int64)
    w = np.empty(M)
    mu = np.empty(M)
    a0 = np.empty(N)
    x = np.empty(NXD)
    R = np.empty(NXD)
    J = np.empty((NXD, NXD))
    piv = np.empty(NXD, np.int64)
    dx = np.empty(NXD)
    q = q0.copy()
    v = v0.copy()
    p = p0.copy()
    lam = lam0.copy()
    q1 = np.empty(N)
    p1s = np.empty(N)
    p1 = np.empty(N)
    v1 = np.empty(N)
    lam1 = np.empty(M)
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    for k in range(1, nsteps + 1):
        hol_jac(q, z, G0)
        if NULLSPACE:
            _dm_kernel_basis(G0, T, Qh, P0)
        if TRAP:
            _dm_grad(q, z, g0)
        qmax = 0.0
        for c in range(N):
            acc = 0.0
            for l in range(N):
                acc += Minv[c, l] * p[l]
            x[c] = q[c] + h * acc
            qmax = max(qmax, abs(q[c]))
        for a in range(NXD - N):
            x[N + a] = 0.0
        scale = max(1.0, mmax * qmax)
        ctx = (q, p, h, Mm, G0, P0, z, qa, g0, f0, f1, r1, Hs, Ab, G1, ph, scale)
        r, thr, it = _newton(mode, ctx, x, R, J, piv, dx, tolf, 0.0, atol, -1.0, max_iter,
                             refresh, max_stall, SIMPLIFIED)
        its[k - 1] = it
        res[k - 1] = r
        if not (r <= thr):
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = it
            break
        # Phase 2: p1* = M(q1 - q0)/h - h dV_d/dq1 projected onto Leg(TN), v1, lambda
        for c in range(N):
            q1[c] = x[c]
        _dm_forces(q, q1, z, qa, g0, f0, f1)
        for r_ in range(N):
            acc = 0.0
            for c in range(N):
                acc += Mm[r_, c] * (q1[c] - q[c])
            p1s[r_] = acc / h - h * f1[r_]
        hol_jac(q1, z, G1)
        ok = _dm_project(G1, Minv, p1s, C, pivc, w, mu, p1)
        for c in range(N):
            acc = 0.0
            for l in range(N):
                acc += Minv[c, l] * p1[l]
            v1[c] = acc
        ok = ok and _dm_multiplier(q1, v1, Minv, G1, H, f0, a0, C, pivc, w, lam1)
        if not (ok and _finite(q1) and _finite(v1) and _finite(p1) and _finite(lam1)):
            status = 2
            break
        hol_phi(q1, z, ph)
        cr = 0.0
        for a in range(M):
            acc = 0.0
            for c in range(N):
                acc += G1[a, c] * v1[c]
            if not (abs(ph[a]) <= cr):
                cr = abs(ph[a])
            if not (abs(acc) <= cr):
                cr = abs(acc)
        cres[k - 1] = cr
        if not (cr <= cbound):
            status = 3
            fail_r = cr
            break
        for c in range(N):
            q[c] = q1[c]
            v[c] = v1[c]
            p[c] = p1[c]
        for a in range(M):
            lam[a] = lam1[a]
        done = k
        if k % save_every == 0:
            _save_node(oq, ov, op, olam, k // save_every, q, v, p, lam)
    _finish(fin, out, q, v, p, lam, status, done, fail_r, fail_thr, fail_it)
'''

# One plan per (kernels, quadrature, form, Newton options); an entry goes with its kernels.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_plan(theta: float | None, nullspace: bool, newton: Any, system: Any,
                  iface: Any) -> tuple[str, Any]:
    """``(why_not, plan)`` of the node-constrained step (module docstring) on ``system``:
    ``theta`` the θ-map's parameter (None: RATTLE's trapezoid), ``nullspace`` the form of
    Phase 1, ``newton`` the method's :class:`NewtonOptions`. Compiled for an unforced
    vector-space system with kernels, a holonomic constraint and a constant mass matrix."""
    from chetaev.discrete_lagrangian.extending import (
        BATCH_DRIVERS,
        LINALG,
        NEWTON,
        CompiledPlan,
        build_source,
        inline_small,
    )

    k = iface.kernels
    if iface.group is not None:
        return "a Lie-group system (LieDiscretizationMapMethod runs on numpy)", None
    if k.forced or iface.force is not None:
        return "a forced system (external forces run on numpy for now)", None
    if k.constraint != "holonomic" or not k.m:
        return "a system without a holonomic constraint", None
    if k.mass is None or iface.mass is None or iface.mass_inv is None:
        return "a system without a constant mass matrix", None
    if newton.finite_differences:
        return "NewtonOptions(finite_differences=True) (the compiled Jacobian is analytic)", None
    per = _PLANS.setdefault(k, {})
    key = (theta, bool(nullspace), newton)
    plan = per.get(key)
    if plan is None:
        trap = theta is None
        consts = (f"THETA = {0.0 if trap else float(theta)!r}\nTRAP = {trap}\n"
                  f"NULLSPACE = {bool(nullspace)}\n")
        engine = "\n\n".join([DMAP_STEP, LINALG, NEWTON, BATCH_DRIVERS])
        source = inline_small(build_source(k, 1, 0, "", newton.simplified, consts,
                                           engine=engine), names=("_eval", "_newton"))
        plan = CompiledPlan(source=source, a=np.array(iface.mass, dtype=float),
                            ahat=np.array(iface.mass_inv, dtype=float), b=np.zeros(1),
                            bhat=np.zeros(1), m=int(k.m), options=newton, has_lam=True)
        per[key] = plan
    return "", plan
