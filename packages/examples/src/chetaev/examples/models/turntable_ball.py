"""Homogeneous ball rolling on a rotating turntable, SO(3)×R² (high-order paper §7.5, Fig. 8).

Left-trivialized, η = (ω_b, v) (body angular velocity, centre velocity), mass 1,
𝕀 = diag(a r², a r², a r², 1, 1), V = 0, constant table rate Ω. Two constraint variants
(see the errata on the docs' theory page of the high-order paper):

* ``"physical"`` (default; :func:`system`): rolling without slipping constrains the spatial
  ω = R ω_b: φ₁ = v_x + Ω y − r ω₂, φ₂ = v_y − Ω x + r ω₁ (affine, depends on R);
* ``"literal"`` (:func:`literal_system`): the paper's formula read on the body components ω_b
  (no R dependence). For a = b = c it gives the same (x, y, v) motion.

First integrals (homogeneous case, ω the components entering the constraint):
I₁ = ω_ζ, I₂ = r ω_ξ − Ω x/(1 + a), I₃ = r ω_η − Ω y/(1 + a) and the moving energy
E_mov = ½|v|² + (a r²/2)|ω|² + rΩ(x ω_ξ + y ω_η) − Ω²(x² + y²). The plain energy is not
conserved (affine constraints). Closed form (paper §7.5): v̇ = κ J v, κ = aΩ/(1 + a).

[paper]: homogeneous ball a = b = c, Lobatto-3, cay. Not in the paper (the project's choice, not in
the paper):
r = 1, a = 2/5 (solid sphere), Ω = 1, R₀ = I, (x₀, y₀) = (1, 0), ω_s0 = (0.3, −0.2, 0.5),
v₀ = (−0.2, 0.7), h = 0.1, T = 100.
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    TrivializedMechanicalSystem,
)
from chetaev.nh_integrators import testing as nh_testing

__all__ = [
    "A_INERTIA",
    "RADIUS",
    "TABLE_RATE",
    "T_FINAL",
    "first_integrals",
    "initial",
    "literal_system",
    "multiplier",
    "position",
    "reference",
    "symbolic_system",
    "system",
]

#: Ball radius (the project's choice, not in the paper, not from the paper).
RADIUS = 1.0
#: Rescaled moment of inertia a = b = c (solid sphere 2/5; the project's proposal).
A_INERTIA = 0.4
#: Table angular velocity Ω (the project's proposal).
TABLE_RATE = 1.0
#: Horizon of the first-integral experiment (the project's proposal).
T_FINAL = 100.0


def system(radius: float = RADIUS, a: float = A_INERTIA,
           table_rate: float = TABLE_RATE) -> ConstrainedSystem:
    """Physical variant (constraint on the spatial ω = R ω_b), ``Product(SO3, Rn(2))``."""
    return nh_testing.turntable_ball(radius, a, table_rate)


def symbolic_system(radius: float = RADIUS, a: float = A_INERTIA,
                    table_rate: float = TABLE_RATE) -> ConstrainedSystem:
    """:func:`system` from its symbolic ℓ and constraints
    (:func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian`: exact
    derivatives and, with numba installed, the compiled backend's kernels; needs sympy)."""
    return nh_testing.turntable_ball(radius, a, table_rate, symbolic=True)


def literal_system(radius: float = RADIUS, a: float = A_INERTIA,
                   table_rate: float = TABLE_RATE) -> ConstrainedSystem:
    """Literal variant: φ₁ = v_x + Ω y − r ω_b2, φ₂ = v_y − Ω x + r ω_b1 (the paper's form)."""
    from chetaev.liegroups import SO3, Product, Rn

    G = Product(SO3, Rn(2))
    r, Om = float(radius), float(table_rate)
    A = np.array([[0.0, -r, 0.0, 1.0, 0.0], [r, 0.0, 0.0, 0.0, 1.0]])

    def a_aff(g):
        g = np.asarray(g)
        return np.stack([Om * g[..., 4, 5], -Om * g[..., 3, 5]], axis=-1)

    def dA(g):
        return np.zeros((*np.shape(g)[:-2], 2, 5, 5))

    def da(g):  # left-trivialized: d/dε of the translation part is R₂ₓ₂ = I on R²
        out = np.zeros((*np.shape(g)[:-2], 2, 5))
        out[..., 0, 4] = Om
        out[..., 1, 3] = -Om
        return out

    def zero(g):
        return np.zeros(np.shape(g)[:-2])

    def zero_grad(g):
        return np.zeros((*np.shape(g)[:-2], 5))

    def zero_hess(g):
        return np.zeros((*np.shape(g)[:-2], 5, 5))

    inertia = np.diag([a * r * r] * 3 + [1.0, 1.0])
    sysm = TrivializedMechanicalSystem(G, inertia, zero, zero_grad, zero_hess)
    return ConstrainedSystem(sysm, LinearVelocityConstraint(A, a_aff, dA, da))


def initial(radius: float = RADIUS, table_rate: float = TABLE_RATE
            ) -> tuple[np.ndarray, np.ndarray]:
    """(g₀, η₀): R₀ = I, (x₀, y₀) = (1, 0), ω₀ = (0.3, −0.2, 0.5), v₀ = (−0.2, 0.7) (both
    variants, since R₀ = I)."""
    return nh_testing.ball_initial(radius, table_rate)


def position(g) -> np.ndarray:
    """(x, y) of the centre, ``(..., 6, 6) -> (..., 2)``."""
    g = np.asarray(g, dtype=float)
    return g[..., 3:5, 5]


def first_integrals(g, eta, radius: float = RADIUS, a: float = A_INERTIA,
                    table_rate: float = TABLE_RATE, variant: str = "physical") -> np.ndarray:
    """(I₁, I₂, I₃, E_mov), shape ``(..., 4)``; ω = R ω_b ("physical") or ω_b ("literal")."""
    if variant == "physical":
        return nh_testing.ball_first_integrals(g, eta, radius, a, table_rate)
    if variant != "literal":
        raise ValueError(f"`variant` must be 'physical' or 'literal', got {variant!r}.")
    g = np.asarray(g, dtype=float)
    eye = np.zeros_like(g)
    eye[..., :3, :3] = np.eye(3)
    eye[..., 3:, 3:] = g[..., 3:, 3:]
    return nh_testing.ball_first_integrals(eye, eta, radius, a, table_rate)


def multiplier(eta, a: float = A_INERTIA, table_rate: float = TABLE_RATE) -> np.ndarray:
    """Exact λ = (−κ v_y, κ v_x), κ = aΩ/(1 + a) (homogeneous ball, paper §7.5)."""
    eta = np.asarray(eta, dtype=float)
    k = a * table_rate / (1.0 + a)
    return np.stack([-k * eta[..., 4], k * eta[..., 3]], axis=-1)


def reference(t, radius: float = RADIUS, a: float = A_INERTIA, table_rate: float = TABLE_RATE
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Closed-form (g(t), η(t), λ(t)) of the physical variant from :func:`initial` (R(t) by
    DOP853 at rtol 1e-13)."""
    g0, eta0 = initial(radius, table_rate)
    return nh_testing.ball_reference(g0, eta0, np.asarray(t, dtype=float), radius, a,
                                       table_rate)
