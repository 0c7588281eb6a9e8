"""Heavy top with a fixed pivot for the holonomic methods (discretization-maps
paper Ex. 5.3 and §6).

Three formulations of the same motion:

* :func:`so3_system` — ``R ∈ SO(3)``, body angular velocity Ω (``Ṙ = RΩ̂``),
  ``ℓ(R, Ω) = ½ Ωᵀ𝕀_p Ω − m g e₃ᵀRχ`` (a ``TrivializedMechanicalSystem``; 𝕀_p is the inertia
  about the pivot);
* :func:`constrained_system` — ``(R, x) ∈ SO(3)×R³`` (a 7×7 homogeneous matrix of
  ``chetaev.liegroups.Product(SO3, Rn(3))``), ``L = ½Ωᵀ𝕀_bodyΩ + ½m|ẋ|² − m g e₃ᵀx`` with the
  holonomic constraint ``φ(R, x) = x − Rχ`` and left-trivialized Jacobian ``[Rχ̂ | I₃]``
  (the §6 Lie methods);
* :func:`matrix_system` — ``q = vec(R) ∈ R⁹`` (row-major), ``L = ½ tr(Ṙ J Ṙᵀ) − m g e₃ᵀRχ`` with
  ``J = ½tr(𝕀_p)I − 𝕀_p`` and the 6 constraints ``½(RᵀR − I) = 0`` (Ex. 5.3).

Parameters and initial data are the project's **proposed** values (the paper has no numerical
example): 𝕀_body = diag(1, 2, 3), m = 1.5, χ = (0.1, 0.2, 0.5), g = 9.81,
``R0 = exp((0.3, −0.2, 0.4)^)``, ``Ω0 = (0.5, −1, 2)``.
Invariants: energy, the vertical angular momentum ``Γ·𝕀_pΩ`` (Γ = Rᵀe₃), ``|Γ| = 1``.
References: :func:`reference` (``reference_solution`` on the SO(3) formulation) and the
independent Euler–Poisson equations :func:`euler_poisson_rhs` in (Γ, Ω).
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    HolonomicConstraint,
    MechanicalSystem,
    TrivializedMechanicalSystem,
    reference_solution,
)
from chetaev.liegroups import SO3, Product, Rn
from scipy.integrate import solve_ivp

__all__ = [
    "CHI",
    "I_BODY",
    "I_PIVOT",
    "J_MATRIX",
    "MASS",
    "OMEGA0",
    "R0",
    "G",
    "SO3xR3",
    "constrained_system",
    "energy",
    "euler_poisson_rhs",
    "initial_constrained",
    "initial_matrix",
    "initial_so3",
    "matrix_system",
    "omega_from_matrix_state",
    "reference",
    "reference_euler_poisson",
    "so3_system",
    "vertical_momentum",
]

G = 9.81
MASS = 1.5
CHI = np.array([0.1, 0.2, 0.5])
I_BODY = np.diag([1.0, 2.0, 3.0])
#: Inertia about the pivot: 𝕀_body + m(|χ|²I − χχᵀ).
I_PIVOT = I_BODY + MASS * (CHI @ CHI * np.eye(3) - np.outer(CHI, CHI))
#: The matrix of Ex. 5.3: ½ tr(ṘJṘᵀ) = ½ Ωᵀ𝕀_pΩ.
J_MATRIX = 0.5 * np.trace(I_PIVOT) * np.eye(3) - I_PIVOT
R0 = SO3.exp(np.array([0.3, -0.2, 0.4]))
OMEGA0 = np.array([0.5, -1.0, 2.0])
E3 = np.array([0.0, 0.0, 1.0])
#: The group of the constrained formulation.
SO3xR3 = Product(SO3, Rn(3))
_IU = np.triu_indices(3)


_hat = SO3.hat  # so(3) hat map, (..., 3) -> (..., 3, 3)


def _gamma(R):
    return np.einsum("...ji,j->...i", R, E3)


def so3_system() -> TrivializedMechanicalSystem:
    """SO(3) formulation; left-trivialized gradient of V is ``m g χ × Γ``, Hessian
    ``m g χ̂ Γ̂``."""

    def V(R):
        return MASS * G * _gamma(R) @ CHI

    def dV(R):
        return MASS * G * np.cross(CHI, _gamma(R))

    def d2V(R):
        return MASS * G * np.einsum("ij,...jk->...ik", _hat(CHI), _hat(_gamma(R)))

    return TrivializedMechanicalSystem(SO3, I_PIVOT, V, dV, d2V)


def constrained_system() -> ConstrainedSystem:
    """SO(3)×R³ formulation with ``φ = x − Rχ`` (paper §6)."""
    inertia = np.zeros((6, 6))
    inertia[:3, :3] = I_BODY
    inertia[3:, 3:] = MASS * np.eye(3)

    def V(g):
        return MASS * G * np.asarray(g)[..., 5, 6]

    def dV(g):
        out = np.zeros((*np.shape(g)[:-2], 6))
        out[..., 5] = MASS * G
        return out

    def phi(g):
        g = np.asarray(g, dtype=float)
        return g[..., 3:6, 6] - np.einsum("...ij,j->...i", g[..., :3, :3], CHI)

    def ell(g):
        g = np.asarray(g, dtype=float)
        out = np.zeros((*g.shape[:-2], 3, 6))
        out[..., :, :3] = g[..., :3, :3] @ _hat(CHI)
        out[..., :, 3:] = np.eye(3)
        return out

    return ConstrainedSystem(TrivializedMechanicalSystem(SO3xR3, inertia, V, dV),
                             HolonomicConstraint(phi, ell))


def matrix_system() -> ConstrainedSystem:
    """R^{3×3} formulation (Ex. 5.3): ``q = vec(R)`` row-major, mass ``I₃ ⊗ J``."""

    def V(q):
        R = np.asarray(q, dtype=float).reshape((*np.shape(q)[:-1], 3, 3))
        return MASS * G * np.einsum("...ij,i,j->...", R, E3, CHI)

    def dV(q):
        return np.broadcast_to((MASS * G * np.outer(E3, CHI)).ravel(), np.shape(q)).copy()

    def phi(q):
        R = np.asarray(q, dtype=float).reshape((*np.shape(q)[:-1], 3, 3))
        S = 0.5 * (np.swapaxes(R, -1, -2) @ R - np.eye(3))
        return S[..., _IU[0], _IU[1]]

    def jac(q):
        R = np.asarray(q, dtype=float).reshape((*np.shape(q)[:-1], 3, 3))
        eye = np.eye(3)
        Jt = 0.5 * (np.einsum("bi,...aj->...ijab", eye, R)
                    + np.einsum("bj,...ai->...ijab", eye, R))
        return Jt[..., _IU[0], _IU[1], :, :].reshape((*np.shape(q)[:-1], 6, 9))

    return ConstrainedSystem(MechanicalSystem(np.kron(np.eye(3), J_MATRIX), V, dV),
                             HolonomicConstraint(phi, jac))


def initial_so3(R=R0, omega=OMEGA0):
    """``(R0, Ω0)`` of the SO(3) formulation."""
    return np.asarray(R, dtype=float), np.asarray(omega, dtype=float)


def initial_constrained(R=R0, omega=OMEGA0):
    """``(g0, ξ0)`` on SO(3)×R³: ``x0 = R0χ`` and ``ξ0 = (Ω0, ẋ0)`` with ``ẋ0 = R0(Ω0 × χ)``
    (the factor ``Rn(3)`` is abelian: its trivialized velocity is ẋ itself)."""
    R = np.asarray(R, dtype=float)
    omega = np.asarray(omega, dtype=float)
    g0 = SO3xR3.from_parts([R, R @ CHI])
    xi0 = np.concatenate([omega, R @ np.cross(omega, CHI)])
    return g0, xi0


def initial_matrix(R=R0, omega=OMEGA0):
    """``(vec R0, vec Ṙ0)`` of the R^{3×3} formulation, ``Ṙ0 = R0Ω̂0``."""
    R = np.asarray(R, dtype=float)
    return R.ravel(), (R @ _hat(np.asarray(omega, dtype=float))).ravel()


def omega_from_matrix_state(q, p):
    """Body angular velocity ``vee(RᵀṘ)`` with ``Ṙ = P J⁻¹`` from a matrix-formulation state."""
    R = np.asarray(q, dtype=float).reshape((*np.shape(q)[:-1], 3, 3))
    Rd = np.asarray(p, dtype=float).reshape(R.shape) @ np.linalg.inv(J_MATRIX)
    W = np.swapaxes(R, -1, -2) @ Rd
    return np.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], axis=-1)


def energy(R, omega):
    """``E = ½Ωᵀ𝕀_pΩ + m g e₃ᵀRχ``."""
    omega = np.asarray(omega, dtype=float)
    return 0.5 * np.einsum("...i,ij,...j->...", omega, I_PIVOT, omega) + MASS * G * (
        _gamma(R) @ CHI)


def vertical_momentum(R, omega):
    """``Γ·𝕀_pΩ`` (angular momentum about the vertical through the pivot)."""
    return np.einsum("...i,...i->...", _gamma(R), np.asarray(omega) @ I_PIVOT.T)


def euler_poisson_rhs():
    """Euler–Poisson equations in ``y = (Γ, Ω)``: ``Γ̇ = Γ × Ω``,
    ``𝕀_pΩ̇ = 𝕀_pΩ × Ω + m g Γ × χ``."""
    inv = np.linalg.inv(I_PIVOT)

    def rhs(_t, y):
        gam, om = y[:3], y[3:]
        return np.concatenate([np.cross(gam, om),
                               inv @ (np.cross(I_PIVOT @ om, om) + MASS * G * np.cross(gam, CHI))])

    return rhs


def reference_euler_poisson(t, R=R0, omega=OMEGA0, rtol: float = 1e-13, atol: float = 1e-13):
    """DOP853 on :func:`euler_poisson_rhs`; returns ``(Γ(t), Ω(t))``, shapes (T, 3)."""
    t = np.asarray(t, dtype=float).reshape(-1)
    y0 = np.concatenate([_gamma(np.asarray(R)), omega])
    sol = solve_ivp(euler_poisson_rhs(), (t[0], t[-1]), y0, method="DOP853", t_eval=t,
                    rtol=rtol, atol=atol)
    if not sol.success:  # pragma: no cover - scipy failure
        raise RuntimeError(f"reference solve failed: {sol.message}")
    return sol.y[:3].T, sol.y[3:].T


def reference(t, R=R0, omega=OMEGA0):
    """``reference_solution`` of the SO(3) formulation (Euler–Poincaré + reconstruction)."""
    return reference_solution(so3_system(), R, omega, t)
