"""Pure per-step kernels of the discretization-map integrators on vector spaces.

Everything here is a module-level function of arrays and callables (no system objects, no
state), so the equations can be tested on their own.  Notation follows the paper (Thm. 4.5,
§5.1–5.2) and the docs' discretization_maps page:

* ``Q = R^m`` with the mechanical Lagrangian ``L̃(q, v) = ½ vᵀ M v − V(q)``, ``M`` constant;
* ``φ: R^m → R^k`` with Jacobian ``G(q) = Dφ(q)`` of shape ``(k, m)``;
* the discrete Lagrangian induced by a discretization map ``R_d``,
  ``L_d^h(q0, q1) = h L̃((R_d^h)^{-1}(q0, q1))``, always has the form
  ``L_d = ΔᵀMΔ/(2h) − h V_d(q0, q1)`` with ``Δ = q1 − q0`` and a *potential quadrature*
  ``V_d`` (``V(q_θ)`` for the θ-map, ``½(V(q0) + V(q1))`` for RATTLE).

Then the generic constrained step (the docs' discretization-maps page, the paper's (4.4)–(4.5))
reads

    p0 = MΔ/h + h ∂V_d/∂q0 − h G(q0)ᵀ λ,      φ(q1) = 0          (Phase 1, unknowns q1, λ)
    p1 = MΔ/h − h ∂V_d/∂q1 + h G(q1)ᵀ λ̃,      G(q1) M⁻¹ p1 = 0   (Phase 2, linear in λ̃)

Phase 1 is solved for ``x = (q1, ν)`` with the scaled multiplier ``ν = h² λ`` (good
conditioning: the residual is the p0-equation multiplied by h).

All arrays may carry leading batch axes ``(..., m)``; callables must broadcast.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "ThetaQuadrature",
    "TrapezoidQuadrature",
    "nullspace_basis",
    "nullspace_momentum",
    "phase1_jacobian",
    "phase1_nullspace_jacobian",
    "phase1_nullspace_residual",
    "phase1_residual",
    "project_momentum",
    "project_momentum_jacobian",
    "right_momentum",
    "stage_phase1_jacobian",
    "stage_phase1_residual",
    "theta_map_cotangent_lift",
    "theta_map_forward",
    "theta_map_inverse",
]

Array = np.ndarray
Fn = Callable[[Array], Array]


# --------------------------------------------------------------------------------------------
# The θ discretization map and its cotangent lift (paper §3; Prop. 3.3, Cor. 3.4)
# --------------------------------------------------------------------------------------------
def theta_map_forward(theta: float, q: Array, v: Array) -> tuple[Array, Array]:
    """``R_d(q, v) = (q − θ v, q + (1 − θ) v)`` (paper Ex. 3.2 with restored signs)."""
    return q - theta * v, q + (1.0 - theta) * v


def theta_map_inverse(theta: float, q0: Array, q1: Array) -> tuple[Array, Array]:
    """``R_d^{-1}(q0, q1) = ((1 − θ) q0 + θ q1, q1 − q0)``."""
    return (1.0 - theta) * q0 + theta * q1, q1 - q0


def theta_map_cotangent_lift(
    theta: float, q: Array, p: Array, qdot: Array, pdot: Array
) -> tuple[Array, Array, Array, Array]:
    """Cotangent lift ``R_d^{T*} = Φ^{-1}∘R̂_d∘α_Q`` of the θ-map (paper Prop. 3.3, Cor. 3.4, Prop.
    3.3).

    ``(q, p, q̇, ṗ) ↦ (q − θq̇, p − (1−θ)ṗ ; q + (1−θ)q̇, p + θṗ)``.
    """
    return (
        q - theta * qdot,
        p - (1.0 - theta) * pdot,
        q + (1.0 - theta) * qdot,
        p + theta * pdot,
    )


# --------------------------------------------------------------------------------------------
# Potential quadratures V_d(q0, q1)
# --------------------------------------------------------------------------------------------
class ThetaQuadrature:
    """``V_d(q0, q1) = V((1−θ) q0 + θ q1)``: the θ-map discrete Lagrangian (paper (1.1))."""

    def __init__(self, theta: float) -> None:
        self.theta = float(theta)

    def point(self, q0: Array, q1: Array) -> Array:
        return (1.0 - self.theta) * q0 + self.theta * q1

    def value(self, V: Fn, q0: Array, q1: Array) -> Array:
        return V(self.point(q0, q1))

    def forces(self, grad_V: Fn, q0: Array, q1: Array) -> tuple[Array, Array]:
        """Return ``(∂V_d/∂q0, ∂V_d/∂q1)``."""
        g = grad_V(self.point(q0, q1))
        return (1.0 - self.theta) * g, self.theta * g

    def dforce0_dq1(self, hess_V: Fn, q0: Array, q1: Array) -> Array:
        """``∂²V_d/∂q1∂q0`` of shape ``(..., m, m)`` (row index: q0 component)."""
        if self.theta == 0.0:
            return np.zeros(q0.shape + q0.shape[-1:])
        return (1.0 - self.theta) * self.theta * hess_V(self.point(q0, q1))


class TrapezoidQuadrature:
    """``V_d(q0, q1) = ½ (V(q0) + V(q1))``: RATTLE's discrete Lagrangian (paper (5.16)–(5.18))."""

    theta = None

    def value(self, V: Fn, q0: Array, q1: Array) -> Array:
        return 0.5 * (V(q0) + V(q1))

    def forces(self, grad_V: Fn, q0: Array, q1: Array) -> tuple[Array, Array]:
        return 0.5 * grad_V(q0), 0.5 * grad_V(q1)

    def dforce0_dq1(self, hess_V: Fn, q0: Array, q1: Array) -> Array:
        return np.zeros(q0.shape + q0.shape[-1:])


# --------------------------------------------------------------------------------------------
# Phase 1: multiplier form (the docs' discretization-maps page; paper §5.1–5.2)
# --------------------------------------------------------------------------------------------
def _mv(M: Array, x: Array) -> Array:
    return np.einsum("...ij,...j->...i", M, x)


def _mtv(G: Array, y: Array) -> Array:
    """``Gᵀ y`` for ``G`` of shape (..., k, m) and ``y`` of shape (..., k)."""
    return np.einsum("...ki,...k->...i", G, y)


def phase1_residual(
    x: Array, q0: Array, p0: Array, h: float, M: Array, quad, grad_V: Fn, G0: Array, phi: Fn
) -> Array:
    """Residual of Phase 1 in ``x = (q1, ν)``, ``ν = h² λ``; shape ``(..., m + k)``.

    ``r1 = M(q1 − q0) + h² ∂V_d/∂q0 − G(q0)ᵀ ν − h p0`` (the p0-equation of the docs'
    discretization-maps page times
    h) and ``r2 = φ(q1)``.
    """
    m = q0.shape[-1]
    q1, nu = x[..., :m], x[..., m:]
    f0, _ = quad.forces(grad_V, q0, q1)
    r1 = _mv(M, q1 - q0) + h * h * f0 - _mtv(G0, nu) - h * p0
    return np.concatenate([r1, phi(q1)], axis=-1)


def phase1_jacobian(
    x: Array, q0: Array, h: float, M: Array, quad, hess_V: Fn, G0: Array, jac: Fn
) -> Array:
    """Jacobian of :func:`phase1_residual`: ``[[M + h² ∂²V_d/∂q1∂q0, −G0ᵀ], [G(q1), 0]]``."""
    m = q0.shape[-1]
    k = G0.shape[-2]
    q1 = x[..., :m]
    top_left = M + h * h * quad.dforce0_dq1(hess_V, q0, q1)
    top = np.concatenate([top_left, -np.swapaxes(G0, -1, -2)], axis=-1)
    G1 = jac(q1)
    bottom = np.concatenate([G1, np.zeros((*G1.shape[:-2], k, k))], axis=-1)
    return np.concatenate([np.broadcast_to(top, bottom.shape[:-2] + top.shape[-2:]), bottom],
                          axis=-2)


# --------------------------------------------------------------------------------------------
# Phase 1: null-space form (paper (4.7)–(4.9), the docs' discretization-maps page)
# --------------------------------------------------------------------------------------------
def nullspace_basis(G: Array) -> Array:
    """Orthonormal basis ``P`` (..., m, m−k) of ``ker G`` for ``G`` of shape (..., k, m).

    Computed from a complete QR factorization of ``Gᵀ``; any basis gives the same step
    (the multiplier-free equations are invariant under ``P ↦ P T``).
    """
    k = G.shape[-2]
    Qf, _ = np.linalg.qr(np.swapaxes(G, -1, -2), mode="complete")
    return Qf[..., :, k:]


def phase1_nullspace_residual(
    q1: Array, q0: Array, p0: Array, h: float, M: Array, quad, grad_V: Fn, P0: Array, phi: Fn
) -> Array:
    """Multiplier-free Phase 1 (paper (4.7)).

    ``P0ᵀ(M Δ + h² ∂V_d/∂q0 − h p0) = 0`` and ``φ(q1) = 0``; unknown ``q1``.
    """
    f0, _ = quad.forces(grad_V, q0, q1)
    r1 = _mv(M, q1 - q0) + h * h * f0 - h * p0
    return np.concatenate([np.einsum("...ia,...i->...a", P0, r1), phi(q1)], axis=-1)


def phase1_nullspace_jacobian(
    q1: Array, q0: Array, h: float, M: Array, quad, hess_V: Fn, P0: Array, jac: Fn
) -> Array:
    """Jacobian of :func:`phase1_nullspace_residual` with respect to ``q1``, shape (..., m, m)."""
    A = M + h * h * quad.dforce0_dq1(hess_V, q0, q1)
    top = np.einsum("...ia,...ij->...aj", P0, A)
    G1 = jac(q1)
    return np.concatenate([np.broadcast_to(top, G1.shape[:-2] + top.shape[-2:]), G1], axis=-2)


# --------------------------------------------------------------------------------------------
# Phase 2: right momentum and projection onto Leg(TN)
# --------------------------------------------------------------------------------------------
def right_momentum(q0: Array, q1: Array, h: float, M: Array, quad, grad_V: Fn) -> Array:
    """Unconstrained right momentum ``p1* = D2 L_d = MΔ/h − h ∂V_d/∂q1``."""
    _, f1 = quad.forces(grad_V, q0, q1)
    return _mv(M, q1 - q0) / h - h * f1


def project_momentum(p: Array, G: Array, Minv: Array) -> tuple[Array, Array]:
    """Project ``p`` onto ``{G M⁻¹ p = 0}`` along the normal covectors ``Gᵀ μ``.

    Returns ``(p + Gᵀ μ, μ)`` with ``μ = −C⁻¹ G M⁻¹ p``, ``C = G M⁻¹ Gᵀ`` (paper §5.1–5.2, Phase 2).
    """
    GMinv = G @ Minv
    C = GMinv @ np.swapaxes(G, -1, -2)
    mu = -np.linalg.solve(C, _mv(GMinv, p)[..., None])[..., 0]
    return p + _mtv(G, mu), mu


def project_momentum_jacobian(p: Array, G: Array, H: Array, Minv: Array, dq: Array,
                              dp: Array) -> tuple[Array, Array]:
    """:func:`project_momentum` and its derivative: ``(p⁺, dp⁺)`` (step linearizations).

    ``p⁺ = p + Gᵀμ`` with ``G M⁻¹ p⁺ = 0``; ``H[..., a, i, j] = ∂G_ai/∂q_j`` (on a group the
    left-trivialized derivative), ``dq`` ``(..., n, K)`` the variation of the point (ζ on a
    group) and ``dp`` ``(..., n, K)`` that of ``p``. Differentiating both equations:
    ``dp⁺ = T + Gᵀdμ`` with ``T = dp + (Σ_a μ_a H_a) dq`` and
    ``C dμ = −G M⁻¹ T − (Σ_i v_i H_{·i·}) dq``, ``C = G M⁻¹ Gᵀ``, ``v = M⁻¹p⁺``.
    """
    p1, mu = project_momentum(p, G, Minv)
    v1 = _mv(Minv, p1)
    T = dp + np.einsum("...aij,...a->...ij", H, mu) @ dq
    GM = G @ Minv
    W = np.einsum("...aij,...i->...aj", H, v1) @ dq
    dmu = -np.linalg.solve(GM @ np.swapaxes(G, -1, -2), GM @ T + W)
    return p1, T + np.swapaxes(G, -1, -2) @ dmu


def nullspace_momentum(D2: Array, P1: Array, M: Array) -> Array:
    """Rebuild ``p1 ∈ Leg(TN)`` from ``p1^N = P1ᵀ D2L_d`` (paper (4.9), the docs'
    discretization-maps page).

    ``v1 = P1 w`` with ``(P1ᵀ M P1) w = p1^N``; ``p1 = M v1``.
    """
    pN = np.einsum("...ia,...i->...a", P1, D2)
    A = np.einsum("...ia,ij,...jb->...ab", P1, M, P1)
    w = np.linalg.solve(A, pN[..., None])[..., 0]
    return _mv(M, np.einsum("...ia,...a->...i", P1, w))


# --------------------------------------------------------------------------------------------
# The stage-constrained baseline (paper (1.2))
# --------------------------------------------------------------------------------------------
def stage_phase1_residual(
    x: Array, q0: Array, p0: Array, h: float, M: Array, grad_V: Fn, jac: Fn, phi: Fn
) -> Array:
    """Midpoint discrete Lagrangian with the constraint at the *stage* point ``q_m``.

    ``r1 = MΔ + (h²/2)∇V(q_m) − ½ G(q_m)ᵀ ν − h p0``, ``r2 = φ(q_m)``, ``q_m = (q0+q1)/2``.
    """
    m = q0.shape[-1]
    q1, nu = x[..., :m], x[..., m:]
    qm = 0.5 * (q0 + q1)
    r1 = _mv(M, q1 - q0) + 0.5 * h * h * grad_V(qm) - 0.5 * _mtv(jac(qm), nu) - h * p0
    return np.concatenate([r1, phi(qm)], axis=-1)


def stage_phase1_jacobian(
    x: Array, q0: Array, h: float, M: Array, hess_V: Fn, jac: Fn, hess_phi: Fn
) -> Array:
    """Jacobian of :func:`stage_phase1_residual` (uses the constraint Hessian at ``q_m``)."""
    m = q0.shape[-1]
    q1, nu = x[..., :m], x[..., m:]
    qm = 0.5 * (q0 + q1)
    Gm = jac(qm)
    k = Gm.shape[-2]
    H = hess_phi(qm)  # (..., k, m, m)
    top_left = M + 0.25 * h * h * hess_V(qm) - 0.25 * np.einsum("...kij,...k->...ij", H, nu)
    top = np.concatenate([top_left, -0.5 * np.swapaxes(Gm, -1, -2)], axis=-1)
    bottom = np.concatenate([0.5 * Gm, np.zeros((*Gm.shape[:-2], k, k))], axis=-1)
    return np.concatenate([top, bottom], axis=-2)
