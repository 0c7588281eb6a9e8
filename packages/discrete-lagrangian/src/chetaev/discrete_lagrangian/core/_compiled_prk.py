"""The compiled PRK engine (issue 17): one numba module per (system kernels, method), in which
the whole step (stage residual, analytic Jacobian, Newton iterations) and the driver's loop
over the steps are compiled.

The engine is the compiled twin of :mod:`chetaev.discrete_lagrangian.core._prk` (paper
Thm. 4.2; eq. (13); eq. (14)): same unknowns ``x = [V (s·n), Λ of the free stages (k·m)]``,
same equations::

    Q^i = q_k + h Σ_j a_ij V^j,        W^i = D1L(Q^i, V^i) + F^i,
    R1_i = D2L(Q^i, V^i) − p_k − h Σ_j â_ij W^j

with the method's hooks (hook (i): the force ``F^i`` and its derivatives; hook (ii): the extra
rows and their Jacobian; the given multipliers, the initial guess, the residual scale, the
inverse Legendre map and the post-condition residual), written as a source *piece* with
fixed function names:

``hook_force(Qi, Vi, Lami, Fi, wk)``, ``hook_force_jac(Qi, Vi, Lami, Fq, Fv, Fl, wk)``,
``hook_rows(q, p, h, A, Q, V, Lam, W, R, wk)``,
``hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk)``, ``hook_first(q, v, lam, lam1, wk)``,
``hook_guess(q, v, p, h, lam1, hist, nhist, vprev, x)``, ``hook_scale(p, v, h, W)``,
``hook_velocity(q1, p1, v1, wk)``, ``hook_residual(q1, v1, wk)``

(``wk``: a scratch array of ``WK`` floats, no allocation in the Newton loop) and the constants
``HAS_FORCE, WK, SIMPLIFIED, KF`` (number of free multiplier stages, the last ``KF``), with
the header's ``QP`` (Hamiltonian unknowns ``[Q, P, Λ]``, :data:`EVAL_QP`) and ``XO`` (the
offset of the multiplier unknowns and of the hooks' rows in ``x`` and ``R``).
:data:`PLAIN_HOOKS` is the unconstrained VPRK's piece (the compiled ``StageHooks``),
:data:`HOLONOMIC_HOOKS` the holonomically constrained PRK's (eq. (13): ``ConstrainedPRK``,
RATTLE and Lobatto-s); ``chetaev.nh_integrators`` supplies the nonholonomic rows of eq. (14).

The Newton iteration is :data:`NEWTON`'s ``_newton``, the one compiled driver of every engine
(this one, the Lie engine, the GNI), with the rule of
:func:`~chetaev.discrete_lagrangian.core._solver.newton_solve` (unbatched): stop when
``max|R| ≤ max(max(tol, 64 eps)·scale, atol)``, on a non-finite residual, a singular
matrix, ``max_iter`` iterations or ``max_stall`` non-decreasing iterations; full Newton, or
simplified Newton (``SIMPLIFIED``) refreshed when the contraction rate exceeds
``refresh_rate``; the Jacobian is evaluated only where a matrix is factorised, from the
stage values of the residual at that point. Hooks that define ``hook_structured_factor(p, h,
A, AH, Q, V, W, J, piv, wk)`` and ``hook_structured_solve(h, A, AH, J, piv, R, dx)`` (the
nonholonomic rows: the Newton matrix without its ``O(h^2)`` force terms, a Schur complement
on the multipliers) can start every step with that matrix (``build_source(structured=True)``,
:data:`STRUCTURED_MATRIX`), which hands over to the analytic Jacobian where it is singular or
does not contract. The step loop keeps the last five solutions (``hist``), from which a
hook's guess may extrapolate (``_extrapolate``, the nonholonomic hooks). A failure returns a
status; the Python side
raises :class:`~chetaev.discrete_lagrangian.ConvergenceError` naming step, time and
residual. The module's functions of at most :data:`INLINE_LINES` lines are inlined by numba
(:func:`inline_small`).
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable, Collection
from typing import Any

import attrs
import numpy as np

__all__ = ["BATCH_DRIVERS", "DENSE_MATRIX", "ENGINE", "EVAL_QP", "HOLONOMIC_HOOKS",
           "INLINE_LINES", "LINALG", "MEMORY_KEY", "NEWTON", "PLAIN_HOOKS",
           "STRUCTURED_MATRIX", "TAKE", "CompiledPlan", "build_source", "compiled_step",
           "constraint_force_hooks", "inline_small", "memory_carry", "memory_in",
           "method_plan", "run_compiled"]

_EPS = float(np.finfo(np.float64).eps)
_OVERFLOW = float(np.sqrt(np.finfo(np.float64).max))

def constraint_force_hooks(g: str, g_q: str, g_v: str | None) -> str:
    """``hook_force`` and ``hook_force_jac`` of a constraint force ``F^i = G(Q^i, V^i)ᵀΛ^i``
    (hook (i) of eq. (13c) / (14c)): ``g`` names the kernel of ``G`` ``(M, N)``, ``g_q`` that
    of ``∂G_a/∂q`` ``(M, N, N)`` and ``g_v`` that of ``∂G_a/∂v`` (None: G does not depend on
    v). Scratch: ``M·N·N + M·N`` floats of ``wk``."""
    fv = (f"    {g_v}(Qi, Vi, H)\n    _weighted_sum(H, Lami, Fv)" if g_v is not None
          else "    Fv[:, :] = 0.0")
    return f'''

@njit(cache=True)
def hook_force(Qi, Vi, Lami, Fi, wk):
    G, _ = _take(wk, 0, (M, N))
    {g}(Qi, Vi, G)
    _transpose_times(G, Lami, Fi)


@njit(cache=True)
def hook_force_jac(Qi, Vi, Lami, Fq, Fv, Fl, wk):
    H, o = _take(wk, 0, (M, N, N))
    {g_q}(Qi, Vi, H)
    _weighted_sum(H, Lami, Fq)
{fv}
    G, _ = _take(wk, o, (M, N))
    {g}(Qi, Vi, G)
    for k in range(N):
        for a in range(M):
            Fl[k, a] = G[a, k]
'''


# hook_scale (residual_scale of core._prk) and hook_velocity (FL⁻¹ quadratic in v), shared
_NODE_HOOKS = '''
@njit(cache=True)
def hook_scale(p, v, h, W):
    return _prk_scale(p, h, W)


@njit(cache=True)
def hook_velocity(q1, p1, v1, wk):
    _legendre_velocity(q1, p1, v1, wk)
'''

#: The unconstrained VPRK's hooks (no force, no extra rows; v_{k+1} = FL⁻¹(q_{k+1}, p_{k+1})
#: for a Lagrangian quadratic in v; guess V_prev + (v_k − v_{k−1}) as ``VPRK._step_impl``).
PLAIN_HOOKS = '''
HAS_FORCE = False
WK = N * N + 2 * N


@njit(cache=True)
def hook_force(Qi, Vi, Lami, Fi, wk):
    pass


@njit(cache=True)
def hook_force_jac(Qi, Vi, Lami, Fq, Fv, Fl, wk):
    pass


@njit(cache=True)
def hook_rows(q, p, h, A, Q, V, Lam, W, R, wk):
    pass


@njit(cache=True)
def hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk):
    pass


@njit(cache=True)
def hook_first(q, v, lam, lam1, wk):
    pass


@njit(cache=True)
def hook_guess(q, v, p, h, lam1, hist, nhist, vprev, x):
    _guess_velocities(v, hist, nhist, vprev, x)


''' + _NODE_HOOKS + '''

@njit(cache=True)
def hook_residual(q1, v1, wk):
    return 0.0
'''

#: The holonomically constrained PRK's hooks (eq. (13); the compiled ``HolonomicStageHooks``
#: of ``methods._constrained_prk``), for a Lagrangian quadratic in v. Constants: ``FIRST``
#: (1 with H1: Φ(Q^i) = 0 for i = 2..s and the tangency G(q_{k+1}) v_{k+1} = 0 (13d); 0
#: without: Φ(Q^i) = 0 at every stage), ``BV``, ``BW`` (b, b̂). All Λ^1..Λ^s are unknowns
#: (``KF = S``); guess V_prev + (v_k − v_{k−1}), Λ_prev + (Λ^s_prev − Λ^1_prev) as
#: ``ConstrainedPRK._step_impl``; post-condition max(|Φ(q_{k+1})|, |G(q_{k+1}) v_{k+1}|).
HOLONOMIC_HOOKS = """
HAS_FORCE = True
WK = M * N * N + N * NX + 2 * N * N + 2 * M * N + 6 * N + 2 * M
""" + constraint_force_hooks("hol_jac", "hol_hess", None) + """


@njit(cache=True)
def _end_node(q, p, h, V, W, q1, p1, v1, wk):
    # q_{k+1}, p_{k+1} (13a, c) and v_{k+1} = FL^-1(q_{k+1}, p_{k+1})
    _node_values(q, p, h, BV, BW, V, W, q1, p1)
    _legendre_velocity(q1, p1, v1, wk)


@njit(cache=True)
def hook_rows(q, p, h, A, Q, V, Lam, W, R, wk):
    ph = wk[:M]
    row = XO
    for i in range(FIRST, S):
        hol_phi(Q[i], V[i], ph)
        for a in range(M):
            R[row + a] = ph[a]
        row += M
    if FIRST == 1:
        node, o = _take(wk, M, (3, N))  # q1, p1, v1
        q1, p1, v1 = node[0], node[1], node[2]
        G, o = _take(wk, o, (M, N))
        _end_node(q, p, h, V, W, q1, p1, v1, wk[o:])
        hol_jac(q1, v1, G)
        for a in range(M):
            acc = 0.0
            for k in range(N):
                acc += G[a, k] * v1[k]
            R[row + a] = acc


@njit(cache=True)
def hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk):
    G, o = _take(wk, 0, (M, N))
    row = XO
    for i in range(FIRST, S):
        hol_jac(Q[i], V[i], G)
        for a in range(M):
            for col in range(NX):
                J[row + a, col] = 0.0
            for l in range(S):
                c = h * A[i, l]
                for cc in range(N):
                    J[row + a, l * N + cc] = G[a, cc] * c
        row += M
    if FIRST == 0:
        return
    # d(G(q1) v1)/dx = (Σ_k H_k v1_k) dq1/dx + G(q1) dv1/dx,
    # dv1/dx = D22L⁻¹ (dp1/dx − D21L dq1/dx), dq1/dx = h b_l on V^l, dp1/dx = h Σ_j b̂_j dW^j
    node, o = _take(wk, o, (3, N))  # q1, p1, v1
    q1, p1, v1 = node[0], node[1], node[2]
    H, o = _take(wk, o, (M, N, N))
    Hv, o = _take(wk, o, (M, N))
    D21, o = _take(wk, o, (N, N))
    dv, o = _take(wk, o, (N, NX))
    rest = wk[o:]
    _end_node(q, p, h, V, W, q1, p1, v1, rest)
    hol_jac(q1, v1, G)
    hol_hess(q1, v1, H)
    D21L(q1, v1, D21)
    for a in range(M):
        for l in range(N):
            acc = 0.0
            for k in range(N):
                acc += H[a, k, l] * v1[k]
            Hv[a, l] = acc
    for r in range(N):
        for col in range(NX):
            acc = 0.0
            for j in range(S):
                acc += BW[j] * dW[j, r, col]
            dv[r, col] = h * acc
        for l in range(S):
            c = h * BV[l]
            for cc in range(N):
                dv[r, l * N + cc] -= D21[r, cc] * c
    g, o = _take(rest, 0, (N, N))
    z = rest[o:o + N]
    for k in range(N):
        z[k] = 0.0
    D22L(q1, z, g)
    if not _solve_inplace(g, dv):
        for col in range(NX):
            for a in range(M):
                J[row + a, col] = math.nan
        return
    _chain_rows(G, dv, Hv, -1, BV, h, J, row)  # q_{k+1}: Lagrangian unknowns only


@njit(cache=True)
def hook_first(q, v, lam, lam1, wk):
    for a in range(M):
        lam1[a] = lam[a]


@njit(cache=True)
def hook_guess(q, v, p, h, lam1, hist, nhist, vprev, x):
    _guess_velocities(v, hist, nhist, vprev, x)
    o = XO
    for i in range(S):
        for a in range(M):
            if nhist > 0:
                x[o + i * M + a] = hist[0, o + i * M + a] + (hist[0, o + (S - 1) * M + a]
                                                             - hist[0, o + a])
            else:
                x[o + i * M + a] = lam1[a]


""" + _NODE_HOOKS + """

@njit(cache=True)
def hook_residual(q1, v1, wk):
    ph = wk[:M]
    G, o = _take(wk, M, (M, N))
    hol_phi(q1, v1, ph)
    hol_jac(q1, v1, G)
    r = 0.0
    for a in range(M):
        acc = 0.0
        for k in range(N):
            acc += G[a, k] * v1[k]
        if not (abs(ph[a]) <= r):
            r = abs(ph[a])
        if not (abs(acc) <= r):
            r = abs(acc)
    return r
"""

#: The engine: LU, residual and Jacobian of the stage equations, Newton, the step loop;
#: helpers the hooks share (``_solve_inplace``, ``_legendre_velocity``, ``_prk_scale``).
ENGINE = '''
@njit(cache=True)
def _solve_inplace(G, X):
    # G X = B with B given in X (nn, kk), overwritten by the solution; G destroyed.
    # Gaussian elimination with partial pivoting, no allocation; False when singular.
    nn = G.shape[0]
    kk = X.shape[1]
    for k in range(nn):
        p = _pivot(G, k)
        if p < 0:
            return False
        if p != k:
            _swap_rows(G, k, p)
            _swap_rows(X, k, p)
        d = G[k, k]
        for i in range(k + 1, nn):
            f = G[i, k] / d
            if f != 0.0:
                for j in range(k + 1, nn):
                    G[i, j] -= f * G[k, j]
                for j in range(kk):
                    X[i, j] -= f * X[k, j]
    for i in range(nn - 1, -1, -1):
        for j in range(kk):
            acc = X[i, j]
            for l in range(i + 1, nn):
                acc -= G[i, l] * X[l, j]
            X[i, j] = acc / G[i, i]
    return True


@njit(cache=True)
def _transpose_times(G, lam, out):
    # out = G^T lam: a constraint force from its (M, N) matrix and the multipliers
    for k in range(G.shape[1]):
        acc = 0.0
        for a in range(G.shape[0]):
            acc += G[a, k] * lam[a]
        out[k] = acc


@njit(cache=True)
def _weighted_sum(H, lam, out):
    # out[r, c] = sum_a lam[a] H[a, r, c] (a outermost: the inner loops run over rows of H)
    for r in range(H.shape[1]):
        for c in range(H.shape[2]):
            out[r, c] = 0.0
    for a in range(H.shape[0]):
        la = lam[a]
        for r in range(H.shape[1]):
            for c in range(H.shape[2]):
                out[r, c] += la * H[a, r, c]


@njit(cache=True)
def _node_values(q, p, h, B, BH, V, W, q1, p1):
    # q1 = q + h sum_j b_j V^j, p1 = p + h sum_j bhat_j W^j
    for c in range(N):
        aq = 0.0
        ap = 0.0
        for j in range(S):
            aq += B[j] * V[j, c]
            ap += BH[j] * W[j, c]
        q1[c] = q[c] + h * aq
        p1[c] = p[c] + h * ap


@njit(cache=True)
def _chain_rows(C, dX, Cq, i, coef, h, J, row):
    # rows row.. of J: C dX/dx + Cq dQ/dx for constraint rows of (X, Q). Lagrangian
    # unknowns: Q = q + h sum_l coef_l V^l (dQ/dx = h coef_l I on the columns of V^l);
    # Hamiltonian unknowns (QP): Q = Q^i, an unknown (dQ/dx = I on its columns; i >= 0)
    for a in range(C.shape[0]):
        for col in range(J.shape[1]):
            J[row + a, col] = 0.0
        for k in range(C.shape[1]):
            c = C[a, k]
            if c != 0.0:
                for col in range(J.shape[1]):
                    J[row + a, col] += c * dX[k, col]
        if QP:
            for cc in range(N):
                J[row + a, i * N + cc] += Cq[a, cc]
        else:
            for l in range(S):
                c = h * coef[l]
                for cc in range(N):
                    J[row + a, l * N + cc] += Cq[a, cc] * c


@njit(cache=True)
def _guess_velocities(v, hist, nhist, vprev, x):
    # the S stage velocities: the last step's shifted by v_k - v_{k-1}, or v_k at the first
    # step (the PRK engine's V^i, the Lie engine's H^i)
    n = v.shape[0]
    for i in range(S):
        for k in range(n):
            if nhist > 0:
                x[i * n + k] = hist[0, i * n + k] + (v[k] - vprev[k])
            else:
                x[i * n + k] = v[k]


@njit(cache=True)
def _legendre_velocity(q1, p1, v1, wk):
    # v1 = FL^-1(q1, p1) = D22L(q1)^-1 (p1 - D2L(q1, 0)) for L quadratic in v (D2L is then
    # affine in v); wk: N * N + 2 * N floats. NaN when D22L(q1) is singular.
    g = wk[:N * N].reshape((N, N))
    z = wk[N * N:N * N + N]
    d0 = wk[N * N + N:N * N + 2 * N]
    for k in range(N):
        z[k] = 0.0
    D22L(q1, z, g)
    D2L(q1, z, d0)
    for k in range(N):
        v1[k] = p1[k] - d0[k]
    if not _solve_inplace(g, v1.reshape((N, 1))):
        for k in range(N):
            v1[k] = math.nan


@njit(cache=True)
def _prk_scale(p, h, W):
    # residual_scale of core._prk: max(1, max|p| + h max|W|)
    mp = 0.0
    for k in range(N):
        mp = max(mp, abs(p[k]))
    mw = 0.0
    for i in range(S):
        for k in range(N):
            mw = max(mw, abs(W[i, k]))
    return max(1.0, mp + h * mw)


@njit(cache=True)
def _pivot(J, k):
    # the row of the largest |J[i, k]|, i >= k (partial pivoting); -1 when 0 or not finite
    p = k
    big = abs(J[k, k])
    for i in range(k + 1, J.shape[0]):
        if abs(J[i, k]) > big:
            big = abs(J[i, k])
            p = i
    if not (big > 0.0) or not (big < math.inf):
        return -1
    return p


@njit(cache=True)
def _swap_rows(A, k, p):
    for j in range(A.shape[1]):
        t = A[k, j]
        A[k, j] = A[p, j]
        A[p, j] = t


@njit(cache=True)
def _lu_factor(J, piv):
    nx = J.shape[0]
    for k in range(nx):
        p = _pivot(J, k)
        if p < 0:
            return False
        piv[k] = p
        if p != k:
            _swap_rows(J, k, p)
        d = J[k, k]
        for i in range(k + 1, nx):
            f = J[i, k] / d
            J[i, k] = f
            if f != 0.0:
                for j in range(k + 1, nx):
                    J[i, j] -= f * J[k, j]
    return True


@njit(cache=True)
def _lu_solve(LU, piv, F, dx):
    nx = LU.shape[0]
    for i in range(nx):
        dx[i] = F[i]
    for k in range(nx):
        p = int(piv[k])
        if p != k:
            t = dx[k]
            dx[k] = dx[p]
            dx[p] = t
    for i in range(nx):
        acc = dx[i]
        for j in range(i):
            acc -= LU[i, j] * dx[j]
        dx[i] = acc
    for i in range(nx - 1, -1, -1):
        acc = dx[i]
        for j in range(i + 1, nx):
            acc -= LU[i, j] * dx[j]
        dx[i] = acc / LU[i, i]


@njit(cache=True)
def _maxabs(R):
    r = 0.0
    for i in range(R.shape[0]):
        a = abs(R[i])
        if a != a:
            return math.inf
        if a > r:
            r = a
    return r


@njit(cache=True)
def _mix(C, i, X, k):
    # sum_j C[i, j] X[j, k]: stage row i of a tableau times stage values
    acc = 0.0
    for j in range(S):
        acc += C[i, j] * X[j, k]
    return acc


@njit(cache=True)
def _fill_lam(x, lam1, Lam):
    # Λ of the stages: the given Λ^1.. (lam1) and the free last KF from x
    for i in range(S - KF):
        for a in range(M):
            Lam[i, a] = lam1[a]
    for r in range(KF):
        for a in range(M):
            Lam[S - KF + r, a] = x[XO + r * M + a]


@njit(cache=True)
def _add_force(Qi, Vi, Lami, Wi, F, wk):
    # W^i += F^i (hook (i))
    if HAS_FORCE:
        hook_force(Qi, Vi, Lami, F, wk)
        for k in range(N):
            Wi[k] += F[k]


@njit(cache=True)
def _second_derivatives(Qj, Vj, Lamj, Wqj, Wvj, D21j, D22j, Fq, Fv, Flj, wk):
    # dW^j/dQ^j, dW^j/dV^j (with the force's), D21L, D22L at stage j; Flj = dF^j/dΛ^j
    D11L(Qj, Vj, Wqj)
    D12L(Qj, Vj, Wvj)
    D21L(Qj, Vj, D21j)
    D22L(Qj, Vj, D22j)
    if HAS_FORCE:
        hook_force_jac(Qj, Vj, Lamj, Fq, Fv, Flj, wk)
        for r in range(N):
            for c in range(N):
                Wqj[r, c] += Fq[r, c]
                Wvj[r, c] += Fv[r, c]


@njit(cache=True)
def _lam_columns(j, dWj, Flj):
    # dW^j/dx += dF^j/dΛ^j on the columns of Λ^j (free stages only)
    if j >= S - KF:
        r0 = XO + (j - (S - KF)) * M
        for r in range(N):
            for a in range(M):
                dWj[r, r0 + a] += Flj[r, a]


@njit(cache=True)
def _eval(mode, ctx, x, R, J, jac):
    # NEWTON's evaluation (mode unused): the residual of the stage equations and the hooks'
    # rows at x in R; with jac, the Jacobian J at x, the point of the last residual (its
    # stage values Q, V, Lam, W reused)
    q, v, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, dW, dV, Wq, Wv, Fq, Fv, Fl, D21, D22, wk = ctx
    if not jac:
        _stage_residual(x, q, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, R, wk)
        hook_rows(q, p, h, A, Q, V, Lam, W, R, wk)
        return
    for j in range(S):
        _second_derivatives(Q[j], V[j], Lam[j], Wq[j], Wv[j], D21[j], D22[j], Fq, Fv, Fl[j],
                            wk)
    if _stage_jacobian(h, A, AH, J, dW, dV, Wq, Wv, Fl, D21, D22):
        hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk)


@njit(cache=True)
def _scale(mode, ctx, x):
    # the residual scale at the initial guess (hook_scale: W of the first evaluation)
    q, v, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, dW, dV, Wq, Wv, Fq, Fv, Fl, D21, D22, wk = ctx
    return hook_scale(p, v, h, W)


@njit(cache=True)
def _stage_residual(x, q, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, R, wk):
    # Lagrangian unknowns x = [V, Λ_free]: Q^i = q + h Σ a_ij V^j, R1_i = D2L − P^i
    for i in range(S):
        for k in range(N):
            V[i, k] = x[i * N + k]
    _fill_lam(x, lam1, Lam)
    for i in range(S):
        for k in range(N):
            Q[i, k] = q[k] + h * _mix(A, i, V, k)
    for i in range(S):
        D1L(Q[i], V[i], W[i])
        D2L(Q[i], V[i], D2[i])
        _add_force(Q[i], V[i], Lam[i], W[i], F, wk)
    for i in range(S):
        for k in range(N):
            R[i * N + k] = D2[i, k] - p[k] - h * _mix(AH, i, W, k)


@njit(cache=True)
def _stage_jacobian(h, A, AH, J, dW, dV, Wq, Wv, Fl, D21, D22):
    # dR1/dx and dW/dx (dQ^i = h Σ a_il dV^l, dV^l = I on the columns of V^l); the
    # tableaux' zeros skipped, the inner loops along rows of J and dW
    for j in range(S):
        for r in range(N):
            for col in range(XO, NX):
                dW[j, r, col] = 0.0
            for l in range(S):
                c = h * A[j, l]
                for cc in range(N):
                    dW[j, r, l * N + cc] = Wq[j, r, cc] * c
            for cc in range(N):
                dW[j, r, j * N + cc] += Wv[j, r, cc]
        _lam_columns(j, dW[j], Fl[j])
    for i in range(S):
        for r in range(N):
            row = i * N + r
            for col in range(NX):
                J[row, col] = 0.0
            for j in range(S):
                c = -h * AH[i, j]
                if c != 0.0:
                    for col in range(NX):
                        J[row, col] += c * dW[j, r, col]
            for l in range(S):
                c = h * A[i, l]
                if c != 0.0:
                    for cc in range(N):
                        J[row, l * N + cc] += D21[i, r, cc] * c
            for cc in range(N):
                J[row, i * N + cc] += D22[i, r, cc]
    return True


@njit(cache=True)
def _run_one(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
             refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out, mem):
    # every work array is a view of one zeroed buffer without a reference count
    # (_take): the views and slices the step takes of them cost no atomic operations
    LM = max(M, 1)
    nqp = S * N * NX if QP else 1
    buf = np.zeros(2 * S * S + 2 * S + 5 * S * N + S * LM + 4 * S * N * N + S * N * NX + nqp
                   + 2 * N * N + S * N * LM + NX * NX + 8 * NX + WK + 8 * N + M + LM + NX)
    A, o = _take_copy(buf, 0, A)
    AH, o = _take_copy(buf, o, AH)
    B, o = _take_copy(buf, o, B)
    BH, o = _take_copy(buf, o, BH)
    Q, o = _take(buf, o, (S, N))
    V, o = _take(buf, o, (S, N))
    Lam, o = _take(buf, o, (S, LM))
    W, o = _take(buf, o, (S, N))
    D2, o = _take(buf, o, (S, N))
    F, o = _take(buf, o, (N,))
    R, o = _take(buf, o, (NX,))
    J, o = _take(buf, o, (NX, NX))
    dW, o = _take(buf, o, (S, N, NX))
    dV, o = _take(buf, o, (S, N, NX) if QP else (1, 1, 1))
    Wq, o = _take(buf, o, (S, N, N))
    Wv, o = _take(buf, o, (S, N, N))
    Fq, o = _take(buf, o, (N, N))
    Fv, o = _take(buf, o, (N, N))
    Fl, o = _take(buf, o, (S, N, LM))
    D21, o = _take(buf, o, (S, N, N))
    D22, o = _take(buf, o, (S, N, N))
    dx, o = _take(buf, o, (NX,))
    x, o = _take(buf, o, (NX,))
    wk, o = _take(buf, o, (WK,))
    hist, o = _take(buf, o, (5, NX))
    q, o = _take_copy(buf, o, q0)
    v, o = _take_copy(buf, o, v0)
    p, o = _take_copy(buf, o, p0)
    lam, o = _take_copy(buf, o, lam0)
    lam1, o = _take(buf, o, (LM,))
    vprev, o = _take_copy(buf, o, v0)
    q1, o = _take(buf, o, (N,))
    p1, o = _take(buf, o, (N,))
    v1, o = _take(buf, o, (N,))
    piv, o = _take(buf, o, (NX,))  # the pivots' indices, as floats
    nhist = _memory_load(mem, hist, vprev)  # a continued run picks up its predictor
    ctx = (q, v, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, dW, dV, Wq, Wv, Fq, Fv, Fl, D21, D22,
           wk)
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    for k in range(1, nsteps + 1):
        hook_first(q, v, lam, lam1, wk)
        hook_guess(q, v, p, h, lam1, hist, nhist, vprev, x)
        r, thr, it = _newton(MODE0, ctx, x, R, J, piv, dx, tolf, 0.0, atol, -1.0, max_iter,
                             refresh, max_stall, SIMPLIFIED)
        its[k - 1] = it
        res[k - 1] = r
        if not (r <= thr):
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = it
            break
        # node values (Thm. 4.2 / eq. (14a)) from the evaluation at the solution
        _node_values(q, p, h, B, BH, V, W, q1, p1)
        hook_velocity(q1, p1, v1, wk)
        if not (_finite(q1) and _finite(v1) and _finite(p1) and _finite(Lam[S - 1, :M])):
            status = 2
            break
        cr = hook_residual(q1, v1, wk)
        cres[k - 1] = cr
        if not (cr <= cbound):
            status = 3
            fail_r = cr
            break
        nhist = _remember(hist, nhist, x)
        for c in range(N):
            vprev[c] = v[c]
            q[c] = q1[c]
            v[c] = v1[c]
            p[c] = p1[c]
        for a in range(M):
            lam[a] = Lam[S - 1, a]
        done = k
        if k % save_every == 0:
            _save_node(oq, ov, op, olam, k // save_every, q, v, p, lam)
    _finish(fin, out, q, v, p, lam, status, done, fail_r, fail_thr, fail_it)
    _memory_store(mem, hist, nhist, vprev)
    buf[0] = 0.0  # the buffer outlives its views


# what a member keeps between runs (mem, run_compiled): the predictor's count, its last
# solutions and the last velocity, so that a run continued from its final state takes the
# same steps as one run
MEM = 1 + 5 * NX + N
'''

#: Work arrays without reference counts: ``_take(buf, o, shape)`` returns floats ``o..`` of
#: the float buffer ``buf`` as an array of ``shape`` (a ``numba.carray`` of its data, so its
#: views and slices cost no atomic operation; ``buf`` must outlive it) and the next offset;
#: ``_take_copy(buf, o, a)`` the same holding a copy of ``a``. Needs ``carray``, ``cgutils``,
#: ``types`` and ``intrinsic`` imported (the PRK header does). Every engine that allocates
#: per-trajectory work arrays takes them from here.
TAKE = '''

# the integer address addr as a void pointer, for carray (a numba intrinsic, not a jitted
# function: nothing to inline)
_address = intrinsic(lambda typingctx, addr: (
    types.voidptr(addr),
    lambda context, builder, sig, args: builder.inttoptr(args[0], cgutils.voidptr_t)))


@njit(cache=True)
def _take(buf, o, shape):
    # floats o.. of buf as an array of this shape, and the next offset: a carray of buf's
    # data, without a reference count (no atomic operation on its views); buf outlives it
    n = 1
    for d in shape:
        n *= d
    if o + n > buf.size:  # checked before any view of it is made or written
        raise ValueError("_take: the work buffer is too short")
    return carray(_address(buf.ctypes.data + 8 * o), shape, np.float64), o + n


@njit(cache=True)
def _take_copy(buf, o, a):
    # _take of a's shape, holding a copy of a
    out, o1 = _take(buf, o, a.shape)
    flat = out.reshape(a.size)
    i = 0
    for val in a.flat:
        flat[i] = val
        i += 1
    return out, o1
'''


#: The one compiled Newton driver and the step loop's bookkeeping, shared by every engine
#: (PRK, Lie, GNI): ``_newton(mode, ctx, x, R, J, piv, dx, tolf, floor_tol, atol, polish,
#: max_iter, refresh, max_stall, simplified)`` runs the rule of
#: :func:`~chetaev.discrete_lagrangian.core._solver.newton_solve` (unbatched) on the module's
#: ``_eval(mode, ctx, x, R, J, jac)`` (``jac`` False: the residual at ``x`` in ``R``; True:
#: the Jacobian in ``J`` at ``x``, the point of the last residual; ``mode`` selects one of an
#: engine's systems, e.g. the GNI's two forms) and ``_scale(mode, ctx, x)`` (the residual
#: scale, after the first evaluation): threshold ``max(tolf·scale, atol)``; with ``polish ≥
#: 0``, on to the round-off floor ``max(floor_tol·scale, atol)`` while the rate stays ≤
#: ``polish``; stops on a non-finite residual, a singular matrix, ``max_iter`` iterations or
#: ``max_stall`` non-decreasing ones; full Newton, or simplified Newton whose matrix is
#: rebuilt at the iterate when the rate exceeds ``refresh`` (``inf``: a chord iteration).
#: The matrix is the engine's (``_factor``, ``_solve``, ``_fallback``: :data:`DENSE_MATRIX`,
#: part of this piece, or the PRK engine's :data:`STRUCTURED_MATRIX`); a fresh matrix that
#: does not contract (rate above ``refresh`` clear of the round-off floor) hands over to
#: ``_fallback(mode)``. Returns ``(r, thr, it)``. Bookkeeping: ``_finite`` (sum of squares
#: finite), ``_remember`` (the last solutions, newest first), ``_extrapolate`` (their
#: polynomial extrapolation in the step index, of the highest degree, up to one less than the
#: rows kept, whose backward differences do not grow), ``_save_node``, ``_finish`` (the final
#: node and the status row).
NEWTON = '''
@njit(cache=True)
def _newton(mode, ctx, x, R, J, piv, dx, tolf, floor_tol, atol, polish, max_iter, refresh,
            max_stall, simplified):
    _eval(mode, ctx, x, R, J, False)
    scale = _scale(mode, ctx, x)
    thr = max(tolf * scale, atol)
    floor = thr
    if polish >= 0.0:
        floor = max(floor_tol * scale, atol)
    r = _maxabs(R)
    it = 0
    stall = 0
    rate = math.nan
    have_lu = False
    fresh = False
    while it < max_iter and r > floor and r < math.inf:
        if polish >= 0.0 and r <= thr and it > 0 and not (rate <= polish):
            break
        if not have_lu:
            ok, mode = _factor(mode, ctx, x, R, J, piv)
            if not ok:
                break
            have_lu = True
            fresh = True
        _solve(mode, ctx, J, piv, R, dx)
        for i in range(x.shape[0]):
            x[i] -= dx[i]
        it += 1
        _eval(mode, ctx, x, R, J, False)
        rn = _maxabs(R)
        rate = rn / max(r, 1e-300)
        if rate >= 1.0:
            stall += 1
        else:
            stall = 0
        judged = r > 16.0 * thr
        r = rn
        if not simplified or (rate > refresh and r > thr):
            if fresh and judged and rate > refresh:
                # a matrix that does not contract right after its build, clear of the
                # round-off floor: the engine's other matrix, if it has one
                mode = _fallback(mode)
            have_lu = False
        fresh = False
        if stall >= max_stall:
            break
    return r, thr, it


@njit(cache=True)
def _finite(u):
    # the sum of squares of u is finite (no NaN, no inf, no overflow)
    acc = 0.0
    for i in range(u.shape[0]):
        acc += u[i] * u[i]
    return acc < math.inf


# the extrapolations sum_{j <= d} nabla^j h_0 = sum_j (-1)^j C(d + 1, j + 1) h_j of
# _extrapolate (row d; nabla^j the backward differences at the newest solution h_0)
_EXTRAPOLATION = np.array([[(-1.0) ** j * math.comb(d + 1, j + 1) if j <= d else 0.0
                            for j in range(5)] for d in range(5)])


@njit(cache=True)
def _remember(hist, nhist, x):
    # x becomes the newest of the last solutions (rows of hist); their new count
    for r in range(hist.shape[0] - 1, 0, -1):
        for i in range(x.shape[0]):
            hist[r, i] = hist[r - 1, i]
    for i in range(x.shape[0]):
        hist[0, i] = x[i]
    return min(nhist + 1, hist.shape[0])


@njit(cache=True)
def _memory_load(mem, hist, vec):
    # what the last run kept between its steps (mem: the count, the rows of hist, vec; all
    # zero for a fresh start): the count, with hist and vec filled when it is positive
    count = int(mem[0])
    if count > 0:
        o = 1
        for r in range(hist.shape[0]):
            for i in range(hist.shape[1]):
                hist[r, i] = mem[o]
                o += 1
        for i in range(vec.shape[0]):
            vec[i] = mem[o]
            o += 1
    return count


@njit(cache=True)
def _memory_store(mem, hist, count, vec):
    # the inverse of _memory_load, after the last step: the next run continues from here
    mem[0] = count
    o = 1
    for r in range(hist.shape[0]):
        for i in range(hist.shape[1]):
            mem[o] = hist[r, i]
            o += 1
    for i in range(vec.shape[0]):
        mem[o] = vec[i]
        o += 1


@njit(cache=True)
def _extrapolate(hist, nhist, x):
    # the polynomial extrapolation in the step index of the last nhist solutions (rows of
    # hist, newest first): degree d = 1 (2 h0 - h1) and up (d = 2: 3 h0 - 3 h1 + h2, ...,
    # at most nhist - 1) while the backward differences |nabla^d| (max-norm) do not grow:
    # the next omitted difference estimates the error, and growing differences (steps that
    # do not resolve the motion) would amplify it; False when there is no solution yet
    if nhist == 0:
        return False
    nx = x.shape[0]
    d = min(nhist - 1, 1)
    if nhist >= 3:
        # the norms of nabla^1..nabla^(nhist-1) in one pass (repeated differences of each
        # column, in place in a copy of the newest rows)
        n1 = 0.0
        n2 = 0.0
        n3 = 0.0
        n4 = 0.0
        for i in range(nx):
            a0 = hist[0, i]
            a1 = hist[1, i]
            a2 = hist[2, i]
            b0 = a0 - a1
            b1 = a1 - a2
            n1 = max(n1, abs(b0))
            n2 = max(n2, abs(b0 - b1))
            if nhist >= 4:
                b2 = a2 - hist[3, i]
                c1 = b1 - b2
                n3 = max(n3, abs(b0 - b1 - c1))
                if nhist >= 5:
                    c2 = b2 - (hist[3, i] - hist[4, i])
                    n4 = max(n4, abs(b0 - b1 - c1 - (c1 - c2)))
        if n2 <= n1:
            d = 2
            if nhist >= 4 and n3 <= n2:
                d = 3
                if nhist >= 5 and n4 <= n3:
                    d = 4
    for i in range(nx):
        acc = 0.0
        for j in range(d + 1):
            acc += _EXTRAPOLATION[d, j] * hist[j, i]
        x[i] = acc
    return True


@njit(cache=True)
def _save_node(oq, ov, op, olam, row, q, v, p, lam):
    for c in range(q.shape[0]):
        oq[row, c] = q[c]
    for c in range(v.shape[0]):
        ov[row, c] = v[c]
    for c in range(p.shape[0]):
        op[row, c] = p[c]
    for a in range(lam.shape[0]):
        olam[row, a] = lam[a]


@njit(cache=True)
def _finish(fin, out, q, v, p, lam, status, done, fail_r, fail_thr, fail_it):
    for c in range(q.shape[0]):
        fin[0, c] = q[c]
    for c in range(v.shape[0]):
        fin[1, c] = v[c]
    for c in range(p.shape[0]):
        fin[2, c] = p[c]
    for a in range(lam.shape[0]):
        fin[3, a] = lam[a]
    out[0] = status
    out[1] = done
    out[2] = fail_r
    out[3] = fail_thr
    out[4] = fail_it

'''

#: The Newton matrix of an engine with one kind: the analytic Jacobian of ``_eval``, LU with
#: partial pivoting. ``_factor(mode, ctx, x, R, J, piv)`` builds and factorises the matrix at
#: ``x`` (the point of the last residual) and returns ``(ok, mode)``: False for a singular
#: matrix (Newton stops), and the mode the solves use; ``_solve(mode, ctx, J, piv, R, dx)``
#: solves ``J dx = R``; ``_fallback(mode)`` is the mode after a fresh matrix failed to
#: contract (the same here: the matrix is rebuilt at the iterate). An engine with a structured
#: matrix defines its own three (the PRK engine's :data:`STRUCTURED_MATRIX`).
DENSE_MATRIX = '''
@njit(cache=True)
def _factor(mode, ctx, x, R, J, piv):
    _eval(mode, ctx, x, R, J, True)
    return _lu_factor(J, piv), mode


@njit(cache=True)
def _solve(mode, ctx, J, piv, R, dx):
    _lu_solve(J, piv, R, dx)


@njit(cache=True)
def _fallback(mode):
    return mode

'''

#: The PRK engine's Newton matrices (the modes of :data:`DENSE_MATRIX`'s functions): mode 0
#: the analytic Jacobian (LU); mode 1 the structured matrix of the hooks
#: (``hook_structured_factor``, ``hook_structured_solve``: the nonholonomic rows' matrix without
#: its ``O(h^2)`` force terms, solved by a Schur complement on the multipliers), which falls
#: back to mode 0 where it is singular or does not contract right after its build.
STRUCTURED_MATRIX = '''
@njit(cache=True)
def _factor(mode, ctx, x, R, J, piv):
    q, v, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, dW, dV, Wq, Wv, Fq, Fv, Fl, D21, D22, wk = ctx
    if mode == 1:
        if hook_structured_factor(p, h, A, AH, Q, V, W, J, piv, wk):
            return True, 1
    # mode 0, or a singular structured matrix: the analytic Jacobian
    _eval(0, ctx, x, R, J, True)
    return _lu_factor(J, piv), 0


@njit(cache=True)
def _solve(mode, ctx, J, piv, R, dx):
    if mode == 1:
        hook_structured_solve(ctx[4], ctx[5], ctx[6], J, piv, R, dx)
    else:
        _lu_solve(J, piv, R, dx)


@njit(cache=True)
def _fallback(mode):
    return 0

'''

# the batch loops over _run_one: run_serial (range) and run_parallel (prange), one template
_BATCH_LOOP = '''

@njit(cache=True{flags})
def {name}(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
        refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out, mem):
    for b in {loop}(q0.shape[0]):
        _run_one(q0[b], v0[b], p0[b], lam0[b], h, nsteps, save_every, A, AH, B, BH, tolf,
                 atol, max_iter, refresh, max_stall, cbound, oq[b], ov[b], op[b], olam[b],
                 its[b], res[b], cres[b], fin[b], out[b], mem[b])
'''
#: The batch drivers (``run_serial``, ``run_parallel``: ``range`` / ``prange`` over the members,
#: each calling the module's ``_run_one``), shared by every compiled method.
BATCH_DRIVERS = (_BATCH_LOOP.format(name="run_serial", flags="", loop="range")
                 + _BATCH_LOOP.format(name="run_parallel", flags=", parallel=True",
                                      loop="prange"))

#: The engine's helpers before its stage equations: LU factorisation and solve (partial
#: pivoting), the NaN-aware max-norm, the small dense products; a method with a step of its
#: own (the Lie engine, the GNI) puts them in its module as they are, with :data:`NEWTON`.
LINALG = ENGINE[: ENGINE.index("@njit(cache=True)\ndef _eval(")]
_NEWTON_LOOP = NEWTON
NEWTON = _NEWTON_LOOP + DENSE_MATRIX
ENGINE = LINALG + NEWTON + ENGINE[len(LINALG):] + TAKE + BATCH_DRIVERS

# the Lagrangian-unknowns pieces of ENGINE, which EVAL_QP replaces
_EVAL_V = ENGINE[ENGINE.index("@njit(cache=True)\ndef _stage_residual("):
                 ENGINE.index("@njit(cache=True)\ndef _run_one(")]

_HEADER = '''"""Generated by chetaev.discrete_lagrangian.core._compiled_prk (issue 17)."""
import math

import numpy as np
from numba import carray, njit, prange
from numba.core import cgutils, types
from numba.extending import intrinsic

S = {s}
N = {n}
M = {m}
KF = {kf}
NX = {nx}
SIMPLIFIED = {simplified}
QP = {qp}
XO = {xo}
MODE0 = {mode0}
'''

#: The Hamiltonian unknowns ``x = [Q (s·n), P (s·n), Λ_free (KF·m)]`` of eq. (15) of the
#: nonholonomic paper (``core._prk``, hook (v), ``unknowns = "QP"``): V^i = FL⁻¹(Q^i, P^i)
#: (L quadratic in v), rows RQ_i = Q^i − q_k − h Σ_j a_ij V^j and RP_i = P^i − p_k −
#: h Σ_j â_ij W^j in place of R1; dV^j = D22L⁻¹(dP^j − D21L dQ^j). Replaces the Lagrangian
#: ``_stage_residual`` and ``_stage_jacobian`` of :data:`ENGINE` (same signatures; ``D2``
#: holds P, ``dV`` the tangents).
EVAL_QP = '''@njit(cache=True)
def _stage_residual(x, q, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, R, wk):
    # Hamiltonian unknowns x = [Q, P, Λ_free]: V^i = FL^-1(Q^i, P^i), rows RQ_i, RP_i
    for i in range(S):
        for k in range(N):
            Q[i, k] = x[i * N + k]
            D2[i, k] = x[S * N + i * N + k]
    _fill_lam(x, lam1, Lam)
    for i in range(S):
        _legendre_velocity(Q[i], D2[i], V[i], wk)
        D1L(Q[i], V[i], W[i])
        _add_force(Q[i], V[i], Lam[i], W[i], F, wk)
    for i in range(S):
        for k in range(N):
            R[i * N + k] = Q[i, k] - q[k] - h * _mix(A, i, V, k)
            R[S * N + i * N + k] = D2[i, k] - p[k] - h * _mix(AH, i, W, k)


@njit(cache=True)
def _stage_jacobian(h, A, AH, J, dW, dV, Wq, Wv, Fl, D21, D22):
    # dV^j = D22L^-1 (dP^j - D21L dQ^j), dW^j = Wq dQ^j + Wv dV^j + Fl dΛ^j;
    # False (J all NaN: Newton stops) when D22L is singular
    dV[:, :, :] = 0.0
    for j in range(S):
        for r in range(N):
            for cc in range(N):
                dV[j, r, j * N + cc] = -D21[j, r, cc]
            dV[j, r, S * N + j * N + r] = 1.0
        if not _solve_inplace(D22[j], dV[j]):
            J[:, :] = math.nan
            return False
        for r in range(N):
            for col in range(NX):
                acc = 0.0
                for c in range(N):
                    acc += Wv[j, r, c] * dV[j, c, col]
                dW[j, r, col] = acc
            for cc in range(N):
                dW[j, r, j * N + cc] += Wq[j, r, cc]
        _lam_columns(j, dW[j], Fl[j])
    for i in range(S):
        for r in range(N):
            for col in range(NX):
                aq = 0.0
                ap = 0.0
                for j in range(S):
                    aq += A[i, j] * dV[j, r, col]
                    ap += AH[i, j] * dW[j, r, col]
                J[i * N + r, col] = -h * aq
                J[S * N + i * N + r, col] = -h * ap
            J[i * N + r, i * N + r] += 1.0
            J[S * N + i * N + r, S * N + i * N + r] += 1.0
    return True


'''


def _jit_kernels(source: str) -> str:
    """The kernels' plain ``def`` lines prefixed with ``@njit(cache=True)``."""
    return re.sub(r"^def ", "@njit(cache=True)\ndef ", source, flags=re.M)


#: The longest function (in source lines, ``def`` to its last line) that
#: :func:`inline_small` marks for numba's IR-level inlining (20: the particle's Lobatto-3
#: NH-PRK step 6.6 → 4.3 µs for a cold compile 1.4× that of no inlining; 40: 3.95 µs for
#: 2.4×).
INLINE_LINES = 20

_FUNCTION = re.compile(r"^@njit\(cache=True\)\ndef (\w+)\(.*?(?=^\S|\Z)", re.M | re.S)


def inline_small(source: str, names: Collection[str] | None = None,
                 max_lines: int = INLINE_LINES) -> str:
    """``source`` with ``inline="always"`` on its ``@njit(cache=True)`` functions of at most
    ``max_lines`` lines (``names``: on these functions only, whatever their length).

    numba then inlines their IR into the callers: no call overhead and no boxing of the
    context tuples in the Newton loop. Applied selectively (the PRK engine: the small
    functions; the Lie engine: ``_eval`` and ``_newton``), since inlining everything makes
    cold compiles explode."""

    def mark(m: re.Match) -> str:
        text = m.group(0)
        if names is not None:
            pick = m.group(1) in names
        else:
            pick = len(text.rstrip().splitlines()) - 1 <= max_lines
        if not pick:
            return text
        return text.replace("@njit(cache=True)", "@njit(cache=True, inline='always')", 1)

    return _FUNCTION.sub(mark, source)


def build_source(kernels: Any, s: int, kf: int, hooks: str, simplified: bool,
                 constants: str = "", unknowns: str = "V", engine: str | None = None,
                 structured: bool = False) -> str:
    """The generated module: header constants, kernels, the method's hooks, the engine
    (:data:`ENGINE`, its small functions inlined by :func:`inline_small`; ``unknowns="QP"``:
    the Hamiltonian unknowns, :data:`EVAL_QP`; or ``engine``: a method with a step of its
    own, e.g. the GNI, as given). ``structured``: the Newton matrix of every step starts as
    the hooks' structured matrix (:data:`STRUCTURED_MATRIX`; the hooks define
    ``hook_structured_factor`` and ``hook_structured_solve``)."""
    n, m = int(kernels.n), int(kernels.m)
    qp = unknowns == "QP"
    xo = (2 if qp else 1) * s * n
    head = _HEADER.format(s=s, n=n, m=m, kf=kf, nx=xo + kf * m, simplified=bool(simplified),
                          qp=qp, xo=xo, mode0=int(bool(structured)))
    if engine is not None:
        return "\n".join([head, constants, _jit_kernels(kernels.source), hooks, engine])
    engine = ENGINE.replace(_EVAL_V, EVAL_QP) if qp else ENGINE
    if structured:
        engine = engine.replace(DENSE_MATRIX, STRUCTURED_MATRIX)
    return inline_small("\n".join([head, constants, _jit_kernels(kernels.source), hooks,
                                    engine]))


#: The imported module of each live plan (:func:`_plan_module`), kept beside the plan (not
#: on it, so that a method holding the plan in its cache pickles) and keyed by the plan object:
#: a plan is frozen, so its ``source``, which alone determines the module, cannot change under
#: its entry; a method's changed option or another system makes another plan.
_PLAN_MODULES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plan_module(plan: Any) -> Any:
    """The imported (and, on first use, compiled) module of ``plan.source`` for a frozen plan
    (:class:`CompiledPlan`, the Lie engine's ``LiePlan``): loaded, its source hashed, on the
    plan's first call only, then one dictionary look-up per run."""
    mod = _PLAN_MODULES.get(plan)
    if mod is None:
        from ._kernels import load_module

        mod = _PLAN_MODULES[plan] = load_module(plan.source)
    return mod


@attrs.frozen(eq=False)
class CompiledPlan:
    """What a method runs compiled on one system: the module source and its data."""

    source: str
    a: np.ndarray
    ahat: np.ndarray
    b: np.ndarray
    bhat: np.ndarray
    m: int
    options: Any  # NewtonOptions
    has_lam: bool

    def module(self) -> Any:
        """The imported (and, on first use, compiled) module, kept per plan
        (:func:`_plan_module`)."""
        return _plan_module(self)


def method_plan(method: Any, iface: Any, constraint: str | None, hooks: str, kf: int,
                constants: Callable[[], str] | None = None) -> tuple[str, Any]:
    """``(why_not, plan)`` of a PRK method of this package (``VPRK``: ``constraint=None``,
    :data:`PLAIN_HOOKS`; ``ConstrainedPRK``: ``"holonomic"``, :data:`HOLONOMIC_HOOKS`) on a
    system with kernels: unforced, of that constraint kind, with a Lagrangian quadratic in v
    (explicit inverse Legendre map). ``method.coeffs``, ``method.newton`` and
    ``method._cache`` (the plan is kept there per kernel set); ``constants()`` the hooks'
    module constants, built once."""
    k = iface.kernels
    if k.forced or iface.force is not None:
        return "a forced system (external forces run on numpy for now)", None
    if k.constraint != constraint:
        return (f"a system with a {k.constraint} constraint" if constraint is None
                else f"a system without a {constraint} constraint"), None
    if not k.mechanical:
        return "a Lagrangian that is not quadratic in v", None
    hit = method._cache.get("compiled")
    if hit is not None and hit[0] is k:
        return "", hit[1]
    c = method.coeffs
    source = build_source(k, c.s, kf, hooks, method.newton.simplified,
                          constants() if constants is not None else "")
    plan = CompiledPlan(source=source, a=c.a, ahat=c.ahat, b=c.b, bhat=c.bhat,
                        m=int(k.m) if constraint else 0, options=method.newton,
                        has_lam=constraint is not None)
    method._cache["compiled"] = (k, plan)
    return "", plan


def _flat(x: Any, n: int, batch: tuple) -> np.ndarray:
    """``x`` broadcast to ``(*batch, n)`` as a C-contiguous ``(nb, n)`` float array, read-only
    where it views the input (the compiled runs take their inputs read-only)."""
    if (type(x) is np.ndarray and x.dtype == _F64 and x.flags.c_contiguous
            and x.shape == (*batch, n)):  # the usual case: a read-only view, no copy
        flat = x.reshape(-1, n)
        flat.flags.writeable = False
        return flat
    return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=float), (*batch, n))
                                ).reshape(-1, n)


_F64 = np.dtype(np.float64)

#: The key of a compiled run's memory in ``State.carry``: ``(module name, (*batch, MEM)
#: array)``, what each member keeps between its steps (the predictor's past solutions), so
#: that a run continued from a compiled run's final state takes the same steps, bit for bit,
#: as one run.
MEMORY_KEY = "compiled_memory"


def memory_in(state: Any, mod: Any, nb: int) -> np.ndarray:
    """The ``(nb, mod.MEM)`` memory a compiled run of ``mod`` starts from: the one in
    ``state.carry`` when a run of the same module with the same batch size left it, else
    zeros (a fresh start). A copy: the run writes into it."""
    size = int(mod.MEM)
    hit = (getattr(state, "carry", None) or {}).get(MEMORY_KEY)
    if hit is not None and hit[0] == mod.__name__:
        arr = np.asarray(hit[1], dtype=float)
        if arr.size == nb * size:
            return arr.reshape(nb, size).copy()
    return np.zeros((nb, size))


def memory_carry(mod: Any, mem: np.ndarray, batch: tuple) -> dict:
    """The ``State.carry`` entry of the memory ``mem`` a run of ``mod`` ended with
    (read-only)."""
    arr = mem.reshape(*batch, mem.shape[-1]).copy()
    arr.flags.writeable = False
    return {MEMORY_KEY: (mod.__name__, arr)}


def run_compiled(plan: CompiledPlan, state: Any, h: float, n_steps: int, save_every: int,
                 cbound: float = math.inf) -> dict:
    """Run ``n_steps`` steps from ``state`` in compiled code (the driver's loop compiled).

    Returns a dict with the saved nodes ``q, v, p, lam`` ``(n_saved, *batch, ·)`` (node 0
    included; the last node of an incomplete period is appended), the final ``q, v, p,
    lam``, ``done`` (steps completed by every member), ``status`` (0 ok, 1 Newton failure,
    2 non-finite, 3 post-condition), ``fail`` (residual, tolerance, iterations of the
    failing step), ``its``, ``res``, ``cres`` per step (maximised over the batch) and
    ``carry``, the :data:`MEMORY_KEY` entry of the final state (a run from a state that holds
    one, left by a run of the same module, continues its predictor).
    """
    q = np.asarray(state.q, dtype=float)
    batch = q.shape[:-1]
    n = q.shape[-1]
    m = plan.m
    nb = math.prod(batch)
    q0 = _flat(q, n, batch)
    v0 = _flat(state.v, n, batch)
    p0 = _flat(state.p, n, batch)
    lam_in = state.lam if (m and state.lam is not None) else np.zeros((*batch, m))
    lam0 = _flat(lam_in, m, batch) if m else np.zeros((nb, 0))
    mod = plan.module()
    opts = plan.options
    tolf = max(float(opts.tol), 64.0 * _EPS)
    mem0 = memory_in(state, mod, nb)

    def go(steps: int) -> tuple:
        nsave = steps // save_every + 1
        oq = np.empty((nb, nsave, n))
        ov = np.empty((nb, nsave, n))
        op = np.empty((nb, nsave, n))
        olam = np.empty((nb, nsave, m))
        oq[:, 0], ov[:, 0], op[:, 0], olam[:, 0] = q0, v0, p0, lam0
        its = np.zeros((nb, max(steps, 1)), np.int64)
        res = np.zeros((nb, max(steps, 1)))
        cres = np.zeros((nb, max(steps, 1)))
        fin = np.zeros((nb, 4, max(n, m)))
        out = np.zeros((nb, 5))
        mem = mem0.copy()
        run = mod.run_parallel if nb > 1 else mod.run_serial
        run(q0, v0, p0, lam0, float(h), int(steps), int(save_every), plan.a, plan.ahat, plan.b,
            plan.bhat, tolf, float(opts.atol), int(opts.max_iter), float(opts.refresh_rate),
            int(opts.max_stall), float(cbound), oq, ov, op, olam, its, res, cres, fin, out,
            mem)
        return oq, ov, op, olam, its, res, cres, fin, out, mem

    oq, ov, op, olam, its, res, cres, fin, out, mem = go(n_steps)
    if nb == 1:  # one trajectory: its own count and status
        k, worst = int(out[0, 1]), 0
    else:
        done = out[:, 1].astype(np.int64)
        k = int(done.min())
        if k < n_steps and np.any(done != k):  # the batch stops at the first failing step
            oq, ov, op, olam, its, res, cres, fin, out, mem = go(k)
        worst = int(np.argmin(done))
    status = int(out[worst, 0]) if k < n_steps else 0
    nreg = k // save_every + 1

    def saved(o, width):
        arr = o[:, :nreg]
        if k % save_every:
            arr = np.concatenate([arr, fin[:, None, width[0]:width[0] + 1, :width[1]][:, :, 0]],
                                 axis=1)
        if nb == 1:  # one trajectory: the time axis is already first
            return arr[0].reshape(arr.shape[1], *batch, arr.shape[2])
        return np.moveaxis(arr, 0, 1).reshape(arr.shape[1], *batch, arr.shape[2])

    def per_step(o):  # the maximum over the batch of each completed step
        if not k:
            return np.zeros(0, o.dtype)
        return o[0, :k] if nb == 1 else o[:, :k].max(axis=0)

    result = {
        "q": saved(oq, (0, n)), "v": saved(ov, (1, n)), "p": saved(op, (2, n)),
        "lam": saved(olam, (3, m)) if plan.has_lam else None,
        "final": {key: fin[:, i, :w].reshape(*batch, w)
                  for i, (key, w) in enumerate((("q", n), ("v", n), ("p", n), ("lam", m)))},
        "done": k, "status": status,
        "fail": (float(out[worst, 2]), float(out[worst, 3]), int(out[worst, 4])),
        "its": per_step(its), "res": per_step(res), "cres": per_step(cres),
        "carry": memory_carry(mod, mem, batch),
    }
    if not plan.has_lam:
        result["final"]["lam"] = None
    return result


def compiled_step(plan: CompiledPlan, state: Any, h: float) -> Any:
    """One step of :meth:`Method.step` in compiled code: the new State (``t``, ``n`` are set
    by ``Method.step``). Raises ``ConvergenceError`` on a Newton failure."""
    from .._util._errors import ConvergenceError
    from ._state import State

    out = run_compiled(plan, state, h, 1, 1)
    if out["status"] == 1:
        r, tol, it = out["fail"]
        raise ConvergenceError(step=state.n, t=state.t, residual=r, tol=tol, iterations=it,
                               hint="halve h, or increase NewtonOptions(max_iter=...)")
    f = out["final"]
    info = {"newton_iterations": int(out["its"].max()) if out["its"].size else 0,
            "residual": float(out["res"].max()) if out["res"].size else 0.0,
            "backend": "numba"}
    return State(t=state.t + h, q=f["q"], v=f["v"], p=f["p"],
                 lam=None if f["lam"] is None else np.array(f["lam"]), n=state.n + 1,
                 carry=out["carry"], info=info)
