"""Residual builder of Lie-group variational PRK steps (VPRKMK), with hooks.

Paper Theorem 6.1, eqs. (24)–(27) (paper Thm. 6.1), its holonomic version §6.3 (paper §6.3),
and — through the hooks — the nonholonomic Lie-group PRK of §6.4 / App. F (paper §6.4, App. F),
which ``chetaev.nh_integrators`` builds on. Given (g_k, μ_k) and unknowns H^1..H^s ∈ 𝔤
(plus free multipliers Λ^i)::

    Ξ^i = h Σ_j a_ij H^j,   ξ = h Σ_j b_j H^j,   G^i = g_k τ(Ξ^i),   Ω^i = dLτ(Ξ^i) H^i
    N^i = dLτ(Ξ^i)ᵀ [ D1ℓ(G^i, Ω^i) + F^i ]          (F^i: hook (i), trivialized at G^i)
    Π^i = dLτ(Ξ^i)ᵀ D2ℓ(G^i, Ω^i)
    R_i = dLτ⁻¹(ξ)ᵀ [ Π^i + h Σ_j (b_j a_ji / b_i) ddLτ*(Ξ^j; H^j, Π^j) ]
          − Ad*_{τ(ξ)} [ μ_k + h Σ_j b_j ( dLτ⁻¹(−Ξ^j)ᵀ − (a_ji/b_i) dLτ⁻¹(−ξ)ᵀ ) N^j ]   (26)
    μ_{k+1} = Ad*_{τ(ξ)} [ μ_k + h Σ_j b_j dLτ⁻¹(−Ξ^j)ᵀ N^j ],   g_{k+1} = g_k τ(ξ)     (27)

(Ad*_g = Ad(g)ᵀ, covectors are arrays, pairing = dot product.) The evaluation exposes
``Nt^j = dLτ⁻¹(−Ξ^j)ᵀ N^j`` so that a hook can form the IIIA-weighted momenta of §6.4,
μ_k^i = Ad*_{τ(Ξ^i)} [ μ_k + h Σ_j a_ij Nt^j ], and impose ψ(G^i, μ_k^i) = 0.

Hooks (duck typed, like the vector-space ones of ``_prk``):

``m``, ``free`` : as in ``_prk`` (multipliers per stage, which Λ^i are unknowns);
``force(G, Omega, Lam)`` → ``(..., s, d)`` or None: extra trivialized force at G^i
    (e.g. ``J(G^i)ᵀ Λ^i`` for a holonomic Φ, ``(∂φ/∂η)ᵀ Λ^i`` for a nonholonomic φ);
``equations(ev)`` → ``(..., E)``: extra equations (E = number of free multiplier entries).
Optional: ``analytic_stage_jacobian()`` → bool and ``stage_jacobian(ev, tau)`` → the exact
``(..., s d + E, s d + E)`` Jacobian of the residual with the hook's equations (built on
:func:`stage_derivatives`); used when the system has closed-form second derivatives.

Newton Jacobian (issue 4: analytic when the system gives second derivatives, finite
differences otherwise).  Without hooks and for a system with closed-form second derivatives
(``system.fd_second_derivatives`` False: D11ℓ, D12ℓ, D21ℓ, D22ℓ), :func:`lie_prk_jacobian`
differentiates (26) exactly by the chain rule, using the retraction's closed-form derivative
terms (``tau.dL_deriv``, ``tau.dL_inv_deriv``) and second derivative (``tau.dL_hess``, for the
ddLτ* term) and δ[Ad*_{τ(ξ)} v] = ad(dLτ(ξ) δξ)ᵀ Ad*_{τ(ξ)} v.  Hooks may supply the derivatives
of their force and equations (``stage_jacobian``; the holonomic §6.3 hooks of ``LieVPRK`` do,
from the constraint's Hessian).  Otherwise (other hooks, or finite-difference second
derivatives) the Jacobian is formed by central finite differences of the residual in ONE
broadcast call.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ._prk import PRKCoefficients, unpack

__all__ = [
    "LieStageEvaluation",
    "lie_prk_jacobian",
    "lie_prk_residual",
    "solve_lie_stages",
    "stage_derivatives",
]


@attrs.define(eq=False)
class LieStageEvaluation:
    """Stage quantities of a Lie-group PRK step (shapes with s stages, algebra dim d).

    ``H, Xi, Omega, N, Nt, Pi`` are ``(..., s, d)``; ``G`` ``(..., s, *group.shape)``;
    ``xi, mu1`` ``(..., d)``; ``g1`` ``(..., *group.shape)``; ``Lam`` ``(..., s, m)`` or None;
    ``tau_Xi`` = τ(Ξ^i) ``(..., s, *group.shape)``; ``Ad_tau_xi_T`` = Ad*_{τ(ξ)}.
    """

    g: np.ndarray
    mu: np.ndarray
    h: float
    coeffs: PRKCoefficients
    H: np.ndarray
    Xi: np.ndarray
    xi: np.ndarray
    G: np.ndarray
    tau_Xi: np.ndarray
    Omega: np.ndarray
    Lam: np.ndarray | None
    N: np.ndarray
    Nt: np.ndarray
    Pi: np.ndarray
    g1: np.ndarray
    mu1: np.ndarray
    Ad_tau_xi_T: np.ndarray
    extra: dict = attrs.field(factory=dict)


def _mv(M: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.einsum("...ij,...j->...i", M, x)


def _mtv(M: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.einsum("...ji,...j->...i", M, x)


def lie_prk_residual(
    x: np.ndarray,
    g: np.ndarray,
    mu: np.ndarray,
    h: float,
    coeffs: PRKCoefficients,
    system: Any,
    tau: Any,
    hooks: Any = None,
    lam_fixed: np.ndarray | None = None,
):
    """Residual of eq. (26) (plus hook equations) at the unknowns ``x`` (may carry extra
    leading axes). Returns ``(R, ev)``."""
    G_ = system.group
    d = G_.dim
    s = coeffs.s
    gnd = len(tuple(G_.shape))
    m = int(getattr(hooks, "m", 0)) if hooks is not None else 0
    free = np.asarray(getattr(hooks, "free", (False,) * s), dtype=bool)
    H, Lam = unpack(x, s, d, m, free, lam_fixed)
    a, b = coeffs.a, coeffs.b
    Xi = h * (a @ H)  # (..., s, d)
    xi = h * (b @ H)  # (..., d)
    # one call per retraction function: stack [Ξ^1..Ξ^s, ξ] and [Ξ, −Ξ, ξ, −ξ]
    Xx = np.concatenate([Xi, xi[..., None, :]], axis=-2)  # (..., s+1, d)
    tX = tau(Xx, check=False)
    tXi = tX[(Ellipsis, slice(0, s)) + (slice(None),) * gnd]
    t_xi = tX[(Ellipsis, s) + (slice(None),) * gnd]
    dLinv = tau.dL_inv(np.concatenate([Xx, -Xx], axis=-2), check=False)  # (..., 2s+2, d, d)
    dLinv_Xi, dLinv_xi = dLinv[..., :s, :, :], dLinv[..., s, :, :]
    dLinv_mXi, dLinv_mxi = dLinv[..., s + 1: 2 * s + 1, :, :], dLinv[..., 2 * s + 1, :, :]
    gk = np.expand_dims(g, axis=-gnd - 1)
    G = G_.compose(gk, tXi, check=False)
    dL_Xi = tau.dL(Xi, check=False)  # (..., s, d, d)
    Omega = _mv(dL_Xi, H)
    F = system.D1L(G, Omega)
    if hooks is not None:
        extra_force = hooks.force(G, Omega, Lam)
        if extra_force is not None:
            F = F + extra_force
    N = _mtv(dL_Xi, F)
    P = system.D2L(G, Omega)
    Pi = _mtv(dL_Xi, P)
    Nt = _mtv(dLinv_mXi, N)  # dLτ⁻¹(−Ξ^j)ᵀ N^j
    AdT = np.swapaxes(G_.Ad(t_xi, check=False), -1, -2)
    # (ddLτ_Ξ)*(H, Π) = (dLτ⁻¹(Ξ) dL_deriv(Ξ, H))ᵀ Π
    ddl = _mtv(tau.dL_deriv(Xi, H, check=False), _mtv(dLinv_Xi, Pi))  # (..., s, d)
    wmat = (b[None, :] * a.T) / b[:, None]  # [i, j] = b_j a_ji / b_i
    lhs = _mtv(dLinv_xi[..., None, :, :], Pi + h * (wmat @ ddl))
    sumN = b @ Nt  # Σ_j b_j Nt^j
    corr = _mtv(dLinv_mxi[..., None, :, :], wmat @ N)
    inner = (mu + h * sumN)[..., None, :] - h * corr
    rhs = _mv(AdT[..., None, :, :], inner)
    R = (lhs - rhs).reshape((*lhs.shape[:-2], s * d))
    mu1 = _mv(AdT, mu + h * sumN)
    g1 = G_.compose(g, t_xi, check=False)
    ev = LieStageEvaluation(g=g, mu=mu, h=h, coeffs=coeffs, H=H, Xi=Xi, xi=xi, G=G,
                            tau_Xi=tXi, Omega=Omega, Lam=Lam, N=N, Nt=Nt, Pi=Pi, g1=g1,
                            mu1=mu1, Ad_tau_xi_T=AdT,
                            extra={"dL_Xi": dL_Xi, "dL_inv_all": dLinv, "D1L": F, "D2L": P})
    if hooks is not None:
        R2 = hooks.equations(ev)
        if R2 is not None:
            R = np.concatenate([R, np.broadcast_to(R2, R.shape[:-1] + R2.shape[-1:])], -1)
    return R, ev


def _has_analytic_second_derivatives(system: Any) -> bool:
    return (not getattr(system, "fd_second_derivatives", True)
            and all(hasattr(system, n) for n in ("D11L", "D12L", "D21L", "D22L")))


def lie_prk_jacobian(ev: LieStageEvaluation, system: Any, tau: Any) -> np.ndarray:
    """Exact Jacobian ``∂R/∂H`` ``(..., s d, s d)`` of the hook-free residual (26); see
    :func:`stage_derivatives` for the formulas."""
    dR = stage_derivatives(ev, system, tau)["dR"]
    return dR.reshape((*dR.shape[:-3], dR.shape[-1], dR.shape[-1]))


def stage_derivatives(ev: LieStageEvaluation, system: Any, tau: Any, n_extra: int = 0,
                      extra_force=None) -> dict:
    """Derivatives of the stage quantities of (26) at the evaluation ``ev`` of
    :func:`lie_prk_residual` with respect to the unknowns ``x = (H, extra)`` (chain rule; see
    the module docstring).  ``n_extra`` trailing unknowns (multipliers) enter only through an
    extra force with derivatives ``extra_force() -> (dFg, dFl)``: ``dFg`` ``(..., s, d, d)``
    its left-trivialized derivative in G^i, ``dFl`` ``(..., s, d, n_extra)`` in the extra
    unknowns.  Returns a dict with ``dR`` ``(..., s, d, s d + n_extra)``, ``dxi``, ``dXi``,
    ``dNt``,
    ``dL_xi`` (= dLτ(ξ)) and ``Cad`` (the map y ↦ [v ↦ ad(v)ᵀ y]).

    Notation: D_i = dLτ(Ξ^i), B_i = dLτ⁻¹(Ξ^i), E_i = dLτ⁻¹(−Ξ^i), C = dLτ⁻¹(ξ),
    C₋ = dLτ⁻¹(−ξ); for a map x ↦ M(x) and a covector v, ``T_M(x, v)`` is the Jacobian of
    x ↦ M(x)ᵀv (rows ``J_M(x, e_k)ᵀ v``); Q^i = B_iᵀΠ^i.  With δΞ^i = h Σ_k a_ik δH^k,
    δξ = h Σ_k b_k δH^k::

        δΩ = D δH + J_D(Ξ, H) δΞ,   δF = D11ℓ D δΞ + D12ℓ δΩ,   δP = D21ℓ D δΞ + D22ℓ δΩ
        δN = Dᵀ δF + T_D(Ξ, F) δΞ,  δΠ = Dᵀ δP + T_D(Ξ, P) δΞ,  δÑ = Eᵀ δN − T_B(−Ξ, N) δΞ
        δQ = Bᵀ δΠ + T_B(Ξ, Π) δΞ
        δddl = [∇²_Ξ ⟨Q, D(Ξ) H⟩] δΞ + T_D(Ξ, Q)ᵀ δH + J_D(Ξ, H)ᵀ δQ
        δlhs_i = Cᵀ δS^i + T_B(ξ, S^i) δξ,            S^i = Π^i + h Σ_j w_ij ddl^j
        δrhs_i = Ad*_{τ(ξ)} [h Σ_j b_j δÑ^j − h (C₋ᵀ δW^i − T_B(−ξ, W^i) δξ)]
                 + ad(D(ξ) δξ)ᵀ rhs_i,                W^i = Σ_j w_ij N^j

    (w_ij = b_j a_ji / b_i; the ∇² term uses ``tau.dL_hess``).
    """
    G_ = system.group
    d = G_.dim
    c = ev.coeffs
    s, h = c.s, ev.h
    a, b = np.asarray(c.a), np.asarray(c.b)
    n = s * d + n_extra
    H, Xi, xi, G, Om = ev.H, ev.Xi, ev.xi, ev.G, ev.Omega
    eye = np.eye(d)
    wmat = (b[None, :] * a.T) / b[:, None]
    # constant derivative maps of Ξ, ξ, H with respect to the unknowns (flattened s·d)
    nh = s * d
    dXi = np.zeros((s, d, n))
    dXi[..., :nh] = h * np.einsum("ik,pq->ipkq", a, eye).reshape(s, d, nh)
    dxi = np.zeros((d, n))
    dxi[:, :nh] = h * np.einsum("k,pq->pkq", b, eye).reshape(d, nh)
    dH = np.eye(nh, n).reshape(s, d, n)

    # retraction pieces, one call each: dL and its derivative at Ξ (and ξ), dL_inv at ±Ξ, ±ξ
    # (dL(Ξ), dL_inv at [Ξ, ξ, −Ξ, −ξ], D1ℓ, D2ℓ are reused from the residual evaluation)
    Xx = np.concatenate([Xi, xi[..., None, :]], axis=-2)  # (..., s+1, d)
    D, Dxi = ev.extra["dL_Xi"], tau.dL(xi, check=False)
    Jd = tau.dL_deriv(Xi[..., None, :], eye, check=False)  # (..., s, k, d, d): J_D(Ξ, e_k)
    Y = np.concatenate([Xx, -Xx], axis=-2)  # [Ξ, ξ, −Ξ, −ξ]
    Binv = ev.extra["dL_inv_all"]
    Jb = tau.dL_inv_deriv(Y[..., None, :], eye, check=False)  # (..., 2s+2, k, d, d)
    B, C = Binv[..., :s, :, :], Binv[..., s, :, :]
    E, Cm = Binv[..., s + 1: 2 * s + 1, :, :], Binv[..., 2 * s + 1, :, :]
    JbX, JbXi = Jb[..., :s, :, :, :], Jb[..., s, :, :, :]
    JbmX, Jbmxi = Jb[..., s + 1: 2 * s + 1, :, :, :], Jb[..., 2 * s + 1, :, :, :]

    def T(Jk, v):  # rows k: J(x, e_k)ᵀ v   → (..., k, d)
        return np.einsum("...kij,...i->...kj", Jk, v)

    def Jv(Jk, eta):  # J(x, eta) = Σ_k eta_k J(x, e_k)
        return np.einsum("...kij,...k->...ij", Jk, eta)

    # system pieces
    F, P = ev.extra["D1L"], ev.extra["D2L"]
    A11, A12 = system.D11L(G, Om), system.D12L(G, Om)
    A21, A22 = system.D21L(G, Om), system.D22L(G, Om)
    N, Pi = ev.N, ev.Pi
    JH = Jv(Jd, H)  # J_D(Ξ^i, H^i)
    Q = _mtv(B, Pi)

    DdXi = D @ dXi  # (..., s, d, n)
    dOm = D @ dH + JH @ dXi
    dF = A11 @ DdXi + A12 @ dOm
    if extra_force is not None:
        dFg, dFl = extra_force()
        dF = dF + dFg @ DdXi
        dF[..., nh:] += dFl
    dP = A21 @ DdXi + A22 @ dOm
    Dt = np.swapaxes(D, -1, -2)
    dN = Dt @ dF + T(Jd, F) @ dXi
    dPi = Dt @ dP + T(Jd, P) @ dXi
    dNt = np.swapaxes(E, -1, -2) @ dN - T(JbmX, N) @ dXi
    dQ = np.swapaxes(B, -1, -2) @ dPi + T(JbX, Pi) @ dXi
    # ∇²_Ξ ⟨Q, D(Ξ) H⟩: rows k = dL_hess(Ξ, H, e_k)ᵀ Q
    Hs = tau.dL_hess(Xi[..., None, :], H[..., None, :], eye, check=False)  # (..., s, k, d, d)
    hessQ = np.einsum("...kij,...i->...kj", Hs, Q)
    dddl = hessQ @ dXi + np.swapaxes(T(Jd, Q), -1, -2) @ dH + np.swapaxes(JH, -1, -2) @ dQ
    ddl = _mtv(JH, Q)
    S = Pi + h * (wmat @ ddl)
    dS = dPi + h * np.einsum("ij,...jpn->...ipn", wmat, dddl)
    dlhs = (np.swapaxes(C, -1, -2)[..., None, :, :] @ dS
            + (T(JbXi[..., None, :, :, :], S) @ dxi))
    W = wmat @ N
    dW = np.einsum("ij,...jpn->...ipn", wmat, dN)
    dcorr = (np.swapaxes(Cm, -1, -2)[..., None, :, :] @ dW
             - T(Jbmxi[..., None, :, :, :], W) @ dxi)
    dsumN = np.einsum("j,...jpn->...pn", b, dNt)
    dinner = h * (dsumN[..., None, :, :] - dcorr)
    AdT = ev.Ad_tau_xi_T
    inner = (ev.mu + h * (b @ ev.Nt))[..., None, :] - h * _mtv(Cm[..., None, :, :], W)
    rhs = _mv(AdT[..., None, :, :], inner)  # (..., s, d)
    # ad(z)ᵀ y = Σ_l z_l ad(e_l)ᵀ y: matrix with columns ad(e_l)ᵀ y
    adE = G_.ad(eye)  # (l, m, k): ad(e_l)
    Cad = np.einsum("lmk,...m->...kl", adE, rhs)  # (..., s, k, l)
    drhs = AdT[..., None, :, :] @ dinner + Cad @ (Dxi @ dxi)[..., None, :, :]
    return {"dR": dlhs - drhs, "dxi": dxi, "dXi": dXi, "dNt": dNt, "dL_xi": Dxi,
            "Cad": lambda y: np.einsum("lmk,...m->...kl", adE, y)}


def solve_lie_stages(x0, g, mu, h, coeffs, system, tau, hooks, options, state,
                     lam_fixed=None):
    """Solve :func:`lie_prk_residual` = 0 by Newton: analytic Jacobian
    (:func:`lie_prk_jacobian`) without hooks for systems with closed-form second derivatives,
    else finite differences of the residual in one broadcast call.

    Returns ``(x, ev, iterations, residual, rate)``; raises :class:`ConvergenceError`.
    """
    from .._util._errors import ConvergenceError
    from ._solver import newton_solve

    last: list = [None, None]

    def fun(x):
        R, ev = lie_prk_residual(x, g, mu, h, coeffs, system, tau, hooks, lam_fixed)
        last[0], last[1] = x, ev
        return R

    scale = 1.0 + np.max(np.abs(mu), axis=-1)
    hook_jac = getattr(hooks, "stage_jacobian", None) if hooks is not None else None
    if hook_jac is not None and not (lam_fixed is None and hooks.analytic_stage_jacobian()):
        hook_jac = None
    if (hooks is None or hook_jac is not None) and _has_analytic_second_derivatives(system):
        cache: dict = {}

        def fun_jac(x, want):
            # lazy: Newton asks for the Jacobian only when it needs another update, at the
            # point whose residual it already has (reuse that evaluation)
            if last[0] is not None and last[0].shape == x.shape and np.array_equal(last[0], x):
                R, ev = cache["R"], last[1]
            else:
                R, ev = lie_prk_residual(x, g, mu, h, coeffs, system, tau, hooks, lam_fixed)
                last[0], last[1], cache["R"] = np.array(x), ev, R
            if not want:
                return R, None
            if hook_jac is None:
                return R, lie_prk_jacobian(ev, system, tau)
            return R, hook_jac(ev, tau)

        fun_jac.lazy = True

        res = newton_solve(None, x0, options=options, scale=scale, fun_jac=fun_jac)
    else:
        res = newton_solve(fun, x0, None, options=options, scale=scale)
    if not res.all_converged:
        bad = ~res.converged
        raise ConvergenceError(
            step=state.n, t=state.t, residual=float(np.max(res.residual[bad])),
            tol=float(np.min(res.tol[bad])), iterations=res.iterations,
            hint="halve h, or increase NewtonOptions(max_iter=...)",
        )
    if last[0] is not None and last[0].shape == res.x.shape and np.array_equal(last[0], res.x):
        ev = last[1]
    else:
        _, ev = lie_prk_residual(res.x, g, mu, h, coeffs, system, tau, hooks, lam_fixed)
    return res.x, ev, res.iterations, float(np.max(res.residual)), res.rate
