"""The nonholonomic rows of eq. (14) / (15) for the compiled PRK engine (issue 17).

The compiled twin of :class:`._equations.NonholonomicHooks` on the engine's per-step form
(explicit ``FL^{-1}`` of a constant mass matrix, IIIA constraint momenta): the hooks piece of
:mod:`chetaev.discrete_lagrangian.core._compiled_prk`, with

- (i) the force ``D2Phi(Q^i, V^i)^T Lambda^i`` in ``W^i`` (14c) and its derivatives;
- (ii) ``R2_i = Phi(Q^i, v_k^i)``, ``v_k^i = M^{-1} p_k^i``, ``p_k^i = p_k + h sum_j a_ij W^j``
  (14d, 14e), i = 2..s, and their Jacobian ``Phi_q dQ^i/dx + Phi_v M^{-1} dp_k^i/dx``;
- (iii) ``Lambda^1`` given: the continuous multiplier ``lambda(q_k, v_k)`` (rule
  ``"continuous"``, the formula of ``ConstrainedSystem.multiplier``) or 0 (``"zero_first"``);
- the initial guess of ``NonholonomicPRK._step_impl`` (``[v_k, Lambda^1]`` repeated; in the
  Hamiltonian form ``[q_k + h c_i v_k, p_k, Lambda^1]``; then the polynomial extrapolation
  of the last solutions), its residual scale ``1 + max(|p|, |v|)``, ``v_{k+1} = M^{-1}
  p_{k+1}``, ``lambda_{k+1} = Lambda^s`` and the post-condition residual ``max |Phi(q_{k+1},
  v_{k+1})|``.

The Hamiltonian form (eq. (15), App. E) runs the same hooks on the engine's Hamiltonian
unknowns (``EVAL_QP``): the rows are the same functions of ``(Q^i, W^i)``, only ``dQ^i/dx``
is the identity on the unknown ``Q^i`` (``_chain_rows``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from chetaev.discrete_lagrangian.extending import constraint_force_hooks

__all__ = ["compiled_plan"]

_HOOKS = '''
HAS_FORCE = True
WK = N * NX + 4 * M * N * N + 4 * N * N + 16 * N + 4 * M * M + 8 * M

''' + constraint_force_hooks("phi_v", "phi_vq", "phi_vv") + '''


@njit(cache=True)
def _stage_velocity(i, p, h, A, W, pk, vc):
    for k in range(N):
        acc = 0.0
        for j in range(S):
            acc += A[i, j] * W[j, k]
        pk[k] = p[k] + h * acc
    _times_minv(pk, vc)


@njit(cache=True)
def _times_minv(x, out):
    # out = M^-1 x (the constant mass matrix: FL^-1); a copy for M = I (the same numbers)
    if MINV_IDENTITY:
        for k in range(N):
            out[k] = x[k]
        return
    for k in range(N):
        acc = 0.0
        for l in range(N):
            acc += MINV[k, l] * x[l]
        out[k] = acc


@njit(cache=True)
def _structured_blocks(J):
    # the structured matrix's storage in J: the Schur complement Sm ((S-1)M)^2 (its LU), the
    # constraint rows Cq_i (S-1, M, N) and the directions Gh_k = M^-1 G_k^T (S-1, N, M)
    L = (S - 1) * M
    Sm, o = _take(J, 0, (L, L))
    Cq, o = _take(J, o, (S - 1, M, N))
    Gh, o = _take(J, o, (S - 1, N, M))
    return Sm, Cq, Gh


@njit(cache=True)
def hook_structured_factor(p, h, A, AH, Q, V, W, J, piv, wk):
    # the Newton matrix without its O(h^2) force terms (_equations._structured_solver): with
    # G_k = D2Phi(Q^k, V^k), Gh_k = M^-1 G_k^T and Cq_i, Cv_i the derivatives of Phi at
    # (Q^i, v_k^i), the Schur complement on Lambda^2..s
    # S_ik = h a_ik Cv_i Gh_k + h^2 (a ahat)_ik Cq_i Gh_k, factorised; False when singular
    Sm, Cq, Gh = _structured_blocks(J)
    vc = wk[:N]
    pk = wk[N:2 * N]
    Cv, o = _take(wk, 2 * N, (M, N))
    G, o = _take(wk, o, (M, N))
    for k in range(1, S):
        phi_v(Q[k], V[k], G)
        for a in range(M):
            for r in range(N):
                vc[r] = G[a, r]
            _times_minv(vc, pk)
            for r in range(N):
                Gh[k - 1, r, a] = pk[r]
    for i in range(1, S):
        _stage_velocity(i, p, h, A, W, pk, vc)
        phi_q(Q[i], vc, Cq[i - 1])
        phi_v(Q[i], vc, Cv)
        for k in range(1, S):
            caa = 0.0
            for l in range(S):
                caa += A[i, l] * AH[l, k]
            ca = h * A[i, k]
            caa *= h * h
            for a in range(M):
                for b in range(M):
                    sv = 0.0
                    sq = 0.0
                    for r in range(N):
                        sv += Cv[a, r] * Gh[k - 1, r, b]
                        sq += Cq[i - 1, a, r] * Gh[k - 1, r, b]
                    Sm[(i - 1) * M + a, (k - 1) * M + b] = ca * sv + caa * sq
    return _lu_factor(Sm, piv)


@njit(cache=True)
def hook_structured_solve(h, A, AH, J, piv, R, dx):
    # dx = J_0^-1 R: u_i = M^-1 R1_i; dLambda = S^-1 (R2 - Cq_i h sum_l a_il u_l);
    # dV_i = u_i + h sum_k ahat_ik Gh_k dLambda_k
    Sm, Cq, Gh = _structured_blocks(J)
    for i in range(S):
        _times_minv(R[i * N:(i + 1) * N], dx[i * N:(i + 1) * N])
    for i in range(1, S):
        for a in range(M):
            dx[XO + (i - 1) * M + a] = R[XO + (i - 1) * M + a]
        for k in range(N):
            y = 0.0
            for l in range(S):
                y += A[i, l] * dx[l * N + k]
            y *= h
            for a in range(M):
                dx[XO + (i - 1) * M + a] -= Cq[i - 1, a, k] * y
    dl = dx[XO:]
    _lu_solve(Sm, piv, dl, dl)
    for i in range(S):
        for r in range(N):
            acc = 0.0
            for k in range(1, S):
                c = AH[i, k]
                if c != 0.0:
                    for b in range(M):
                        acc += c * Gh[k - 1, r, b] * dl[(k - 1) * M + b]
            dx[i * N + r] += h * acc


@njit(cache=True)
def hook_rows(q, p, h, A, Q, V, Lam, W, R, wk):
    vc = wk[:N]
    pk = wk[N:2 * N]
    ph = wk[2 * N:2 * N + M]
    for i in range(1, S):
        _stage_velocity(i, p, h, A, W, pk, vc)
        phi(Q[i], vc, ph)
        for a in range(M):
            R[XO + (i - 1) * M + a] = ph[a]


@njit(cache=True)
def hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk):
    vc = wk[:N]
    pk = wk[N:2 * N]
    o = 2 * N
    Cq, o = _take(wk, o, (M, N))
    Cv, o = _take(wk, o, (M, N))
    Cp, o = _take(wk, o, (M, N))
    dpk, o = _take(wk, o, (N, NX))
    for i in range(1, S):
        _stage_velocity(i, p, h, A, W, pk, vc)
        phi_q(Q[i], vc, Cq)
        phi_v(Q[i], vc, Cv)
        for a in range(M):
            for k in range(N):
                acc = 0.0
                for l in range(N):
                    acc += Cv[a, l] * MINV[l, k]
                Cp[a, k] = acc
        for k in range(N):
            for col in range(NX):
                dpk[k, col] = 0.0
            for j in range(S):
                c = h * A[i, j]
                if c != 0.0:
                    for col in range(NX):
                        dpk[k, col] += c * dW[j, k, col]
        _chain_rows(Cp, dpk, Cq, i, A[i], h, J, XO + (i - 1) * M)


@njit(cache=True)
def hook_first(q, v, lam, lam1, wk):
    # the continuous multiplier: with g = D22L, f = D1L - D21L v, the constraint rows
    # Bv = Phi_v, Bq = Phi_q: (Bv g^-1 Bv^T) lam = -(Bq v + Bv g^-1 f); two eliminations in
    # place (_solve_inplace), no allocation
    if RULE == 1:
        for a in range(M):
            lam1[a] = 0.0
        return
    o = 0
    g, o = _take(wk, o, (N, N))
    d21, o = _take(wk, o, (N, N))
    d1 = wk[o:o + N]
    o += N
    X, o = _take(wk, o, (N, M + 1))  # [g^-1 f, g^-1 Bv^T]
    Bv, o = _take(wk, o, (M, N))
    Bq, o = _take(wk, o, (M, N))
    C, o = _take(wk, o, (M, M))
    rhs, o = _take(wk, o, (M, 1))
    D22L(q, v, g)
    D1L(q, v, d1)
    D21L(q, v, d21)
    phi_v(q, v, Bv)
    phi_q(q, v, Bq)
    for r in range(N):
        acc = d1[r]
        for c in range(N):
            acc -= d21[r, c] * v[c]
        X[r, 0] = acc
        for a in range(M):
            X[r, a + 1] = Bv[a, r]
    if not _solve_inplace(g, X):
        for a in range(M):
            lam1[a] = math.nan
        return
    for a in range(M):
        for b in range(M):
            acc = 0.0
            for r in range(N):
                acc += Bv[a, r] * X[r, b + 1]
            C[a, b] = acc
        acc = 0.0
        for r in range(N):
            acc += Bq[a, r] * v[r] + Bv[a, r] * X[r, 0]
        rhs[a, 0] = acc
    if not _solve_inplace(C, rhs):
        for a in range(M):
            lam1[a] = math.nan
        return
    for a in range(M):
        lam1[a] = -rhs[a, 0]


@njit(cache=True)
def hook_guess(q, v, p, h, lam1, hist, nhist, vprev, x):
    if not _extrapolate(hist, nhist, x):
        for i in range(S):
            for k in range(N):
                if QP:  # Q^i = q_k + h c_i v_k, P^i = p_k (NonholonomicPRK._step_impl)
                    x[i * N + k] = q[k] + h * CN[i] * v[k]
                    x[S * N + i * N + k] = p[k]
                else:
                    x[i * N + k] = v[k]
        for r in range(S - 1):
            for a in range(M):
                x[XO + r * M + a] = lam1[a]


@njit(cache=True)
def hook_scale(p, v, h, W):
    mp = 0.0
    mv = 0.0
    for k in range(N):
        mp = max(mp, abs(p[k]))
        mv = max(mv, abs(v[k]))
    return 1.0 + max(mp, mv)


@njit(cache=True)
def hook_velocity(q1, p1, v1, wk):
    _times_minv(p1, v1)


@njit(cache=True)
def hook_residual(q1, v1, wk):
    ph = wk[:M]
    phi(q1, v1, ph)
    r = 0.0
    for a in range(M):
        if not (abs(ph[a]) <= r):
            r = abs(ph[a])
    return r
'''

_RULES = {"continuous": 0, "zero_first": 1}


def compiled_plan(method: Any, system: Any, iface: Any) -> tuple[str, Any]:
    """``(why_not, plan)`` of :class:`NonholonomicPRK` on ``system`` (issue 17): the
    Lagrangian form (unknowns ``[V, Λ²..Λˢ]``, eq. (14)) or the Hamiltonian form (unknowns
    ``[Q, P, Λ²..Λˢ]``, eq. (15), the numpy path's ``unknowns="QP"``) with IIIA constraint
    momenta, the explicit ``FL^{-1}`` of a constant mass matrix, a velocity constraint, no
    external force, the rules ``"continuous"`` and ``"zero_first"`` (``"carry"`` needs the
    per-step multiplier-mode monitor)."""
    from chetaev.discrete_lagrangian.extending import CompiledPlan, build_source

    k = iface.kernels
    if k.forced or iface.force is not None:
        return "a forced system (external forces run on numpy for now)", None
    if k.constraint != "velocity":
        return "a system without a velocity constraint", None
    if k.mass is None or method.implicit_velocity:
        return "a system without a constant mass matrix (implicit FL^-1)", None
    if method.constraint_momenta != "iiia":
        return "constraint_momenta='iiib_rejected'", None
    if method.multiplier_rule not in _RULES:
        return f"multiplier_rule={method.multiplier_rule!r}", None
    hit = method._cache.get("compiled")
    if hit is not None and hit[0] is k:
        return "", hit[1]
    a, b, ahat, _c = method._cache["tableau"]
    s = a.shape[0]
    minv = np.linalg.inv(np.array(k.mass, dtype=float))
    consts = (f"MINV = np.array({minv.tolist()!r})\n"
              f"MINV_IDENTITY = {bool(np.array_equal(minv, np.eye(minv.shape[0])))}\n"
              f"CN = np.array({np.asarray(_c, float).tolist()!r})\n"
              f"RULE = {_RULES[method.multiplier_rule]}\n")
    simplified = method.jacobian_reuse != "iteration"
    # the structured Newton matrix where it applies (the Lagrangian form), for every input:
    # compiled, a member's result never depends on the batch it runs in
    structured = (method.form != "hamiltonian"
                  and method.jacobian_reuse in ("auto", "structured"))
    source = build_source(k, s, s - 1, _HOOKS, simplified, consts,
                          "QP" if method.form == "hamiltonian" else "V", structured=structured)
    plan = CompiledPlan(source=source, a=a, ahat=ahat, b=b, bhat=b.copy(), m=int(k.m),
                        options=method.newton, has_lam=True)
    method._cache["compiled"] = (k, plan)
    return "", plan
