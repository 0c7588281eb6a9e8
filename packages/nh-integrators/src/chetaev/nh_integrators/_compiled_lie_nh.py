"""The nonholonomic terms of App. F for the compiled Lie PRK engine (issue 17).

The compiled twin of :class:`._lie_core.LieNonholonomicHooks` (high-order paper §6.4, App. F,
in the inverse-free form of the homogeneous-spaces paper's eq. (3c) and §4.2) for a
mechanical ℓ = ½ηᵀ𝕀η − V(g): the hooks piece of
:mod:`chetaev.discrete_lagrangian.core._compiled_lie` (through
``chetaev.discrete_lagrangian.extending.lie_plan``), with

- the force ``D₂φ(Gⁱ, Ωⁱ)ᵀ Λⁱ`` in ``Fⁱ`` and its derivative ``(∂_g D₂φᵀΛ) ζ +
  (∂_η D₂φᵀΛ) δΩ + D₂φᵀ δΛ``;
- ``R2ᵢ = φ(Gⁱ, ηⁱ)``, ``ηⁱ = 𝕀⁻¹Mⁱ``, ``Mⁱ = Ad*_{τ(Ξⁱ)} [μ_k + h Σⱼ aᵢⱼ Ñʲ]`` (eq. 5 of
  the note), i = 2..s, and ``δR2 = φ_g ζⁱ + φ_η 𝕀⁻¹ δMⁱ`` with ``δMⁱ = ad*_{ζⁱ} Mⁱ +
  Ad*_{τ(Ξⁱ)} h Σⱼ aᵢⱼ δÑʲ``;
- ``Λ¹`` given: the continuous multiplier (rule ``"continuous"``, the formula of
  ``ConstrainedSystem.multiplier``: λ = −C⁻¹[φ_g η + φ_η a₀], a₀ = 𝕀⁻¹(L*_g D₁ℓ + ad*_η 𝕀η),
  C = φ_η 𝕀⁻¹ φ_ηᵀ) or 0 (``"zero_first"``);
- the guess of ``LieNonholonomicPRK._step_impl`` (``[η_k, λ_k]`` repeated, then the last
  solution, then its linear extrapolation), the scale ``1 + max|μ_k| + max|x₀|``,
  η_{k+1} = ηˢ (the last IIIA stage velocity), λ_{k+1} = Λˢ and the post-condition
  ``max|φ(g_{k+1}, η_{k+1})|``;
- the Newton rule of ``lie_nh_newton``: simplified Newton, refresh rate 0.05, polished to the
  round-off floor while the residual contracts 10-fold (``polish=0.1``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["compiled_lie_plan"]

_HOOKS = '''
HAS_HOOKS = True
POLISH = 0.1
O_PV = 0
O_PVG = O_PV + M * D
O_PVV = O_PVG + M * D * D
O_ETA = O_PVV + M * D * D
O_MST = O_ETA + S * D
O_DM = O_MST + S * D
O_DETA = O_DM + D * NX
O_PG = O_DETA + D * NX
O_PH = O_PG + M * D
O_P = O_PH + M
WK = O_P + D * D + D * NX


@njit(cache=True)
def hook_force(i, Gi, Omi, Lami, Fi, wk):
    pv = wk[O_PV:O_PV + M * D].reshape((M, D))
    phi_v(Gi, Omi, pv)
    for c in range(D):
        acc = 0.0
        for a in range(M):
            acc += pv[a, c] * Lami[a]
        Fi[c] += acc


@njit(cache=True)
def hook_force_jac(i, Gi, Omi, Lami, zeta_i, dOm_i, dF_i, wk):
    pv = wk[O_PV:O_PV + M * D].reshape((M, D))
    pvg = wk[O_PVG:O_PVG + M * D * D].reshape((M, D, D))
    pvv = wk[O_PVV:O_PVV + M * D * D].reshape((M, D, D))
    Cm = wk[O_P:O_P + D * D].reshape((D, D))
    phi_v(Gi, Omi, pv)
    if i >= S - KF:
        r0 = S * D + (i - (S - KF)) * M
        for c in range(D):
            for a in range(M):
                dF_i[c, r0 + a] += pv[a, c]
    phi_vg(Gi, Omi, pvg)
    phi_vv(Gi, Omi, pvv)
    for r in range(D):
        for j in range(D):
            acc = 0.0
            for a in range(M):
                acc += pvg[a, r, j] * Lami[a]
            Cm[r, j] = acc
    _mm(Cm, zeta_i, dF_i, 1.0)
    for r in range(D):
        for j in range(D):
            acc = 0.0
            for a in range(M):
                acc += pvv[a, r, j] * Lami[a]
            Cm[r, j] = acc
    _mm(Cm, dOm_i, dF_i, 1.0)


@njit(cache=True)
def hook_rows(mu, h, A, ev, R, wk):
    Ad = ev[4]
    G = ev[7]
    Y = ev[12]
    eta = wk[O_ETA:O_ETA + S * D].reshape((S, D))
    Mst = wk[O_MST:O_MST + S * D].reshape((S, D))
    ph = wk[O_PH:O_PH + M]
    inner = wk[O_P:O_P + D]
    for i in range(S):
        for b in range(D):
            acc = 0.0
            for j in range(S):
                acc += A[i, j] * Y[j, b]
            inner[b] = mu[b] + h * acc
        for a in range(D):
            acc = 0.0
            for b in range(D):
                acc += Ad[i, b, a] * inner[b]
            Mst[i, a] = acc
        for a in range(D):
            acc = 0.0
            for b in range(D):
                acc += INERTIA_INV[a, b] * Mst[i, b]
            eta[i, a] = acc
    for i in range(1, S):
        phi(G[i], eta[i], ph)
        for a in range(M):
            R[S * D + (i - 1) * M + a] = ph[a]


@njit(cache=True)
def hook_rows_jac(mu, h, A, ev, jv, J, wk):
    Ad = ev[4]
    G = ev[7]
    zeta = jv[0]
    dY = jv[5]
    eta = wk[O_ETA:O_ETA + S * D].reshape((S, D))
    Mst = wk[O_MST:O_MST + S * D].reshape((S, D))
    dM = wk[O_DM:O_DM + D * NX].reshape((D, NX))
    deta = wk[O_DETA:O_DETA + D * NX].reshape((D, NX))
    pg = wk[O_PG:O_PG + M * D].reshape((M, D))
    pv = wk[O_PV:O_PV + M * D].reshape((M, D))
    P = wk[O_P:O_P + D * D].reshape((D, D))
    dinner = wk[O_P + D * D:O_P + D * D + D * NX].reshape((D, NX))
    for i in range(1, S):
        for r in range(D):
            for c in range(NX):
                acc = 0.0
                for j in range(S):
                    acc += A[i, j] * dY[j, r, c]
                dinner[r, c] = h * acc
        dM[...] = 0.0
        grp_coad(Mst[i], P)
        _mm(P, zeta[i], dM, 1.0)
        _mtm(Ad[i], dinner, dM, 1.0)
        deta[...] = 0.0
        _mm(INERTIA_INV, dM, deta, 1.0)
        phi_g(G[i], eta[i], pg)
        phi_v(G[i], eta[i], pv)
        for a in range(M):
            row = S * D + (i - 1) * M + a
            for c in range(NX):
                acc = 0.0
                for j in range(D):
                    acc += pg[a, j] * zeta[i, j, c]
                acc2 = 0.0
                for j in range(D):
                    acc2 += pv[a, j] * deta[j, c]
                J[row, c] = acc + acc2


@njit(cache=True)
def hook_first(g, eta, mu, lam, lam1, wk):
    if RULE == 1:
        for a in range(M):
            lam1[a] = 0.0
        return
    # ConstrainedSystem.multiplier: lam = -C^{-1} [phi_g eta + phi_v a0]
    Bv = np.empty((M, D))
    Bg = np.empty((M, D))
    f = np.empty(D)
    P = np.empty((D, D))
    mu_ = np.empty(D)
    a0 = np.empty(D)
    phi_v(g, eta, Bv)
    phi_g(g, eta, Bg)
    lt_force(g, eta, f)
    for a in range(D):
        acc = 0.0
        for b in range(D):
            acc += INERTIA[a, b] * eta[b]
        mu_[a] = acc
    grp_coad(mu_, P)
    for a in range(D):
        acc = 0.0
        for b in range(D):
            acc += P[a, b] * eta[b]
        f[a] += acc
    for a in range(D):
        acc = 0.0
        for b in range(D):
            acc += INERTIA_INV[a, b] * f[b]
        a0[a] = acc
    C = np.empty((M, M))
    rhs = np.empty(M)
    for a in range(M):
        for c in range(M):
            acc = 0.0
            for j in range(D):
                t = 0.0
                for l in range(D):
                    t += INERTIA_INV[j, l] * Bv[c, l]
                acc += Bv[a, j] * t
            C[a, c] = acc
        acc = 0.0
        for j in range(D):
            acc += Bg[a, j] * eta[j] + Bv[a, j] * a0[j]
        rhs[a] = acc
    piv = np.empty(M, np.int64)
    if not _lu_factor(C, piv):
        for a in range(M):
            lam1[a] = math.nan
        return
    _lu_solve(C, piv, rhs, lam1)
    for a in range(M):
        lam1[a] = -lam1[a]


@njit(cache=True)
def hook_scale(mu, x):
    r = 0.0
    for a in range(D):
        r = max(r, abs(mu[a]))
    rx = 0.0
    for i in range(NX):
        rx = max(rx, abs(x[i]))
    return 1.0 + r + rx


@njit(cache=True)
def hook_guess(eta, hist, nhist, vprev, lam, x):
    if not _extrapolate(hist, nhist, x):  # hist: the last two solutions
        for i in range(S):
            for k in range(D):
                x[i * D + k] = eta[k]
        for r in range(KF):
            for a in range(M):
                x[S * D + r * M + a] = lam[a]


@njit(cache=True)
def hook_velocity(mu1, eta1, wk):
    for a in range(D):
        eta1[a] = wk[O_ETA + (S - 1) * D + a]


@njit(cache=True)
def hook_residual(g1, eta1, wk):
    ph = wk[O_PH:O_PH + M]
    phi(g1, eta1, ph)
    r = 0.0
    for a in range(M):
        v = abs(ph[a])
        if v != v:
            return math.inf
        r = max(r, v)
    return r
'''

_RULES = {"continuous": 0, "zero_first": 1}


def compiled_lie_plan(method: Any, system: Any, iface: Any) -> tuple[str, Any]:
    """``(why_not, plan)`` of :class:`LieNonholonomicPRK` on ``system`` (issue 17): a
    mechanical ℓ with a velocity constraint, built by ``from_trivialized_lagrangian``, on
    SO(3), SE(2), SE(3) or their products with Rⁿ (S² through its SO(3) lift,
    ``spherical_pendulum`` / ``spherical_kepler(symbolic=True)``), with the Cayley or the
    exp retraction, no external force, the rules ``"continuous"`` and ``"zero_first"``
    (``"carry"`` needs the per-step multiplier-mode monitor, ``"weighted_sum"`` the rank
    check)."""
    from chetaev.discrete_lagrangian import NewtonOptions
    from chetaev.discrete_lagrangian.extending import lie_plan

    from ._lie_core import _coefficients

    k = iface.kernels
    if iface.force is not None or getattr(k, "forced", False):
        return "a forced system (external forces run on numpy for now)", None
    if getattr(k, "constraint", None) != "velocity":
        return "a system without a velocity constraint", None
    rule = method.multiplier_rule
    if rule not in _RULES:
        return f"multiplier_rule={rule!r}", None
    hit = method._cache.get("compiled")
    if hit is not None and hit[0] is k:
        return hit[1], hit[2]
    a = np.asarray(method.pair.first.a, dtype=float)
    b = np.asarray(method.pair.first.b, dtype=float)
    s = a.shape[0]
    options = NewtonOptions(tol=method.newton.tol, max_iter=method.newton.max_iter,
                            simplified=True, refresh_rate=0.05)
    hooks = f"RULE = {_RULES[rule]}\n" + _HOOKS
    why, plan = lie_plan(k, system.group, method.retraction, _coefficients(a, b), options,
                         hooks=hooks, kf=s - 1, has_lam=True)
    method._cache["compiled"] = (k, why, plan)
    return why, plan
