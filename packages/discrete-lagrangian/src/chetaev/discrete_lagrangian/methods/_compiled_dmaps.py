"""The compiled steps of the discretization-map methods on vector spaces (issue 17).

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

The extrinsic Euler B(h/2)∘Euler A(h/2) of :class:`ExtrinsicEulerBA` (paper (5.7), mode 2,
``KIND = 1``) is the same loop with its joint solve: unknowns ``(q_{1/2}, q1, λ, μ)``, rows
``M(q_{1/2} − q0) + (h/2)²∇V(q0) − G(q0)ᵀλ − (h/2)p0``, ``M(2q_{1/2} − q0 − q1) +
G(q_{1/2})ᵀμ``, ``φ(q_{1/2})``, ``φ(q1)``, its analytic Jacobian (with
``Σ_a μ_a ∇²φ_a(q_{1/2})``), guess ``(q0 + (h/2)M⁻¹p0, q0 + hM⁻¹p0, 0, 0)``, then
``p1* = M(q1 − q_{1/2})/(h/2) − (h/2)∇V(q1)`` projected as above.

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

#: The compiled node step, the extrinsic joint solve and the loop over the steps (constants
#: ``KIND``, ``THETA``, ``TRAP``, ``NULLSPACE``; module docstring).
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
    # NEWTON's evaluation: mode 0 Phase 1 in the multiplier form, x = (q1, nu); mode 1 the
    # null-space form, x = q1; mode 2 the extrinsic Euler B o A joint solve, x = (q_half, q1,
    # lam, mu) (module docstring); with jac, the Jacobian J at x
    q0, p0, h, Mm, G0, P0, z, qa, g0, f0, f1, r1, Hs, A, G1, ph, scale, Gm, Hm = ctx
    if mode == 2:
        _dm_extrinsic(q0, p0, h, Mm, G0, z, g0, Gm, Hm, G1, ph, x, R, J, jac)
        return
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
def _dm_extrinsic(q0, p0, h, Mm, G0, z, g0, Gm, Hm, G1, ph, x, R, J, jac):
    # ExtrinsicEulerBA (5.7): r1 = M(q_half - q0) + (h/2)^2 grad V(q0) - G0^T lam - (h/2) p0,
    # r2 = M(2 q_half - q0 - q1) + G(q_half)^T mu, phi(q_half), phi(q1); g0 = grad V(q0)
    hh = 0.5 * h
    qm = x[:N]
    q1 = x[N:2 * N]
    hol_jac(qm, z, Gm)
    if jac:
        hol_hess(qm, z, Hm)
        hol_jac(q1, z, G1)
        for r in range(2 * N + 2 * M):
            for c in range(2 * N + 2 * M):
                J[r, c] = 0.0
        for r in range(N):
            for c in range(N):
                acc = 0.0
                for a in range(M):
                    acc += x[2 * N + M + a] * Hm[a, r, c]
                J[r, c] = Mm[r, c]
                J[N + r, c] = 2.0 * Mm[r, c] + acc
                J[N + r, N + c] = -Mm[r, c]
            for a in range(M):
                J[r, 2 * N + a] = -G0[a, r]
                J[N + r, 2 * N + M + a] = Gm[a, r]
        for a in range(M):
            for c in range(N):
                J[2 * N + a, c] = Gm[a, c]
                J[2 * N + M + a, N + c] = G1[a, c]
        return
    for r in range(N):
        acc = 0.0
        acc2 = 0.0
        for c in range(N):
            acc += Mm[r, c] * (qm[c] - q0[c])
            acc2 += Mm[r, c] * (2.0 * qm[c] - q0[c] - q1[c])
        lam = 0.0
        mu = 0.0
        for a in range(M):
            lam += G0[a, r] * x[2 * N + a]
            mu += Gm[a, r] * x[2 * N + M + a]
        R[r] = acc + hh * hh * g0[r] - lam - hh * p0[r]
        R[N + r] = acc2 + mu
    hol_phi(qm, z, ph)
    for a in range(M):
        R[2 * N + a] = ph[a]
    hol_phi(q1, z, ph)
    for a in range(M):
        R[2 * N + M + a] = ph[a]


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
             refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out, mem):
    # A = M, AH = M^-1 (the interface's arrays); B, BH unused
    Mm = A.copy()
    Minv = AH.copy()
    mmax = 0.0
    for r in range(N):
        for c in range(N):
            mmax = max(mmax, abs(Mm[r, c]))
    NXD = N if NULLSPACE else N + M
    mode = 1 if NULLSPACE else 0
    if KIND == 1:
        NXD = 2 * N + 2 * M
        mode = 2
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
    Gm = np.empty((M, N))
    Hm = np.empty((M, N, N))
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
        if TRAP or KIND == 1:
            _dm_grad(q, z, g0)
        qmax = 0.0
        for a in range(NXD):
            x[a] = 0.0
        for c in range(N):
            acc = 0.0
            for l in range(N):
                acc += Minv[c, l] * p[l]
            if KIND == 1:  # (q0 + (h/2) M^-1 p0, q0 + h M^-1 p0, 0, 0)
                x[c] = q[c] + (0.5 * h) * acc
                x[N + c] = q[c] + h * acc
            else:
                x[c] = q[c] + h * acc
            qmax = max(qmax, abs(q[c]))
        scale = max(1.0, mmax * qmax)
        ctx = (q, p, h, Mm, G0, P0, z, qa, g0, f0, f1, r1, Hs, Ab, G1, ph, scale, Gm, Hm)
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
        # p1* = M(q1 - q0)/h - h dV_d/dq1 (the extrinsic map: M(q1 - q_half)/(h/2) -
        # (h/2) grad V(q1)) projected onto Leg(TN)
        if KIND == 1:
            for c in range(N):
                qa[c] = x[c]
                q1[c] = x[N + c]
            _dm_grad(q1, z, f1)
            for r_ in range(N):
                acc = 0.0
                for c in range(N):
                    acc += Mm[r_, c] * (q1[c] - qa[c])
                p1s[r_] = acc / (0.5 * h) - (0.5 * h) * f1[r_]
        else:
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
        cr = _maxabs(ph)  # inf for a NaN entry
        for a in range(M):  # the hidden constraint G(q1) v1
            acc = 0.0
            for c in range(N):
                acc += G1[a, c] * v1[c]
            ph[a] = acc
        cr = max(cr, _maxabs(ph))
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


# what a member keeps between runs (mem): nothing, the step starts from its state
MEM = 1
'''

#: The ``KIND`` constant of each compiled step.
_KINDS = {"node": 0, "extrinsic": 1}

# One plan per (kernels, kind, quadrature, form, Newton options); an entry goes with its
# kernels.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_plan(kind: str, theta: float | None, nullspace: bool, newton: Any, system: Any,
                  iface: Any) -> tuple[str, Any]:
    """``(why_not, plan)`` of a compiled step (module docstring) on ``system``: ``kind``
    ``"node"`` (the node-constrained step: ``theta`` the θ-map's parameter, None for RATTLE's
    trapezoid; ``nullspace`` the form of Phase 1) or ``"extrinsic"`` (the joint solve of
    :class:`ExtrinsicEulerBA`); ``newton`` the method's :class:`NewtonOptions`. Compiled
    for an unforced vector-space system with kernels, a holonomic constraint and a constant
    mass matrix."""
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
    key = (kind, theta, bool(nullspace), newton)
    plan = per.get(key)
    if plan is None:
        trap = theta is None and kind == "node"
        consts = (f"KIND = {_KINDS[kind]}\nTHETA = {0.0 if theta is None else float(theta)!r}\n"
                  f"TRAP = {trap}\nNULLSPACE = {bool(nullspace) and kind == 'node'}\n")
        engine = "\n\n".join([DMAP_STEP, LINALG, NEWTON, BATCH_DRIVERS])
        source = inline_small(build_source(k, 1, 0, "", newton.simplified, consts,
                                           engine=engine), names=("_eval", "_newton"))
        plan = CompiledPlan(source=source, a=np.array(iface.mass, dtype=float),
                            ahat=np.array(iface.mass_inv, dtype=float), b=np.zeros(1),
                            bhat=np.zeros(1), m=int(k.m), options=newton, has_lam=True)
        per[key] = plan
    return "", plan
