"""Residual builder of Lie-group variational PRK steps (VPRKMK), with hooks.

Paper Theorem 6.1, eqs. (24)–(27) (spec §2.8), its holonomic version §6.3 (spec §2.9),
and — through the hooks — the nonholonomic Lie-group PRK of §6.4 / App. F (spec §2.10),
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

The Jacobian is formed by central finite differences in ONE broadcast call (the second
derivatives of the retraction terms, d(ddLτ*)/dξ, are not available in closed form);
Newton then converges linearly with a contraction ~1e-9 and the residual itself is exact.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ._prk import PRKCoefficients, unpack

__all__ = ["LieStageEvaluation", "lie_prk_residual", "solve_lie_stages"]


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
    tX = tau(Xx)
    tXi = tX[(Ellipsis, slice(0, s)) + (slice(None),) * gnd]
    t_xi = tX[(Ellipsis, s) + (slice(None),) * gnd]
    dLinv = tau.dL_inv(np.concatenate([Xx, -Xx], axis=-2))  # (..., 2s+2, d, d)
    dLinv_Xi, dLinv_xi = dLinv[..., :s, :, :], dLinv[..., s, :, :]
    dLinv_mXi, dLinv_mxi = dLinv[..., s + 1: 2 * s + 1, :, :], dLinv[..., 2 * s + 1, :, :]
    gk = np.expand_dims(g, axis=-gnd - 1)
    G = G_.compose(gk, tXi)
    dL_Xi = tau.dL(Xi)  # (..., s, d, d)
    Omega = _mv(dL_Xi, H)
    F = system.D1L(G, Omega)
    if hooks is not None:
        extra_force = hooks.force(G, Omega, Lam)
        if extra_force is not None:
            F = F + extra_force
    N = _mtv(dL_Xi, F)
    Pi = _mtv(dL_Xi, system.D2L(G, Omega))
    Nt = _mtv(dLinv_mXi, N)  # dLτ⁻¹(−Ξ^j)ᵀ N^j
    AdT = np.swapaxes(G_.Ad(t_xi), -1, -2)
    # (ddLτ_Ξ)*(H, Π) = (dLτ⁻¹(Ξ) dL_deriv(Ξ, H))ᵀ Π
    ddl = _mtv(tau.dL_deriv(Xi, H), _mtv(dLinv_Xi, Pi))  # (..., s, d)
    wmat = (b[None, :] * a.T) / b[:, None]  # [i, j] = b_j a_ji / b_i
    lhs = _mtv(dLinv_xi[..., None, :, :], Pi + h * (wmat @ ddl))
    sumN = b @ Nt  # Σ_j b_j Nt^j
    corr = _mtv(dLinv_mxi[..., None, :, :], wmat @ N)
    inner = (mu + h * sumN)[..., None, :] - h * corr
    rhs = _mv(AdT[..., None, :, :], inner)
    R = (lhs - rhs).reshape((*lhs.shape[:-2], s * d))
    mu1 = _mv(AdT, mu + h * sumN)
    g1 = G_.compose(g, t_xi)
    ev = LieStageEvaluation(g=g, mu=mu, h=h, coeffs=coeffs, H=H, Xi=Xi, xi=xi, G=G,
                            tau_Xi=tXi, Omega=Omega, Lam=Lam, N=N, Nt=Nt, Pi=Pi, g1=g1,
                            mu1=mu1, Ad_tau_xi_T=AdT)
    if hooks is not None:
        R2 = hooks.equations(ev)
        if R2 is not None:
            R = np.concatenate([R, np.broadcast_to(R2, R.shape[:-1] + R2.shape[-1:])], -1)
    return R, ev


def solve_lie_stages(x0, g, mu, h, coeffs, system, tau, hooks, options, state,
                     lam_fixed=None):
    """Solve :func:`lie_prk_residual` = 0 by Newton (FD Jacobian in one broadcast call).

    Returns ``(x, ev, iterations, residual, rate)``; raises :class:`ConvergenceError`.
    """
    from ._errors import ConvergenceError
    from ._solver import newton_solve

    last: list = [None, None]

    def fun(x):
        R, ev = lie_prk_residual(x, g, mu, h, coeffs, system, tau, hooks, lam_fixed)
        last[0], last[1] = x, ev
        return R

    scale = 1.0 + np.max(np.abs(mu), axis=-1)
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
