"""Spherical Kepler problem on S² (homogeneous-spaces paper §5.2, Figs. 6–7).

L(x, ẋ) = (m/2)|ẋ|² + ρ (X·x)/√(1 − (X·x)²), i.e. V = −ρ cot ϑ with ϑ the angle to the
centre X. Two formulations:

* **Lift** to SO(3) (:func:`lift_system`, ``chetaev.nh_integrators.spherical_kepler``), 𝔪-constraint
  φ(η) = η₃, integrated with ``LieNonholonomicPRK``; λ ≡ 0;
* **Ambient** on R³ with |x| = 1: the reference ODE (:func:`ambient_rhs`, :func:`reference`) and
  the holonomically constrained system Φ(x) = ½(|x|² − 1) (:func:`cartesian_system`, for
  ``ConstrainedPRK``).

Energy E = (m/2)|ẋ|² − ρ cot ϑ. Closed (Bertrand-type) orbits; radial period ≈ 3.573.

Initial data [paper, verbatim]: g₀ = Tait–Bryan (0.940125174120388, −0.693184358892293,
3.007331043590061), η₀ = (1.534184084268850, 0, 0); h = 0.01, τ = exp. Not in the paper
(paper §5.2; the docs' theory page): X = e₃ (inferred: ϑ₀ = 1.1, φ₀ = 1.0 exactly), m = M = ρ = 1
(E₀ = 0.66789229697286), T = 36 (about 10 radial periods) for the long runs.
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import ConstrainedSystem
from chetaev.nh_integrators import spherical_kepler, tait_bryan

from . import _sphere_common as _sc

__all__ = ["CENTER", "E0", "ETA0", "G0", "MASS", "REGULARIZATION", "RHO", "ambient_rhs",
           "cartesian_system", "energy", "initial_ambient", "lift_state", "lift_system",
           "potential_grad", "reference", "to_ambient"]

#: m, M, ρ (the project's proposals, not from the paper).
MASS, REGULARIZATION, RHO = 1.0, 1.0, 1.0
#: Centre X = e₃ (inferred in paper §5.2).
CENTER = np.array([0.0, 0.0, 1.0])
#: g₀ [paper, verbatim].
G0 = tait_bryan(0.940125174120388, -0.693184358892293, 3.007331043590061)
#: η₀ [paper, verbatim].
ETA0 = np.array([1.534184084268850, 0.0, 0.0])
#: Energy of the paper's initial data with m = ρ = 1, X = e₃ (paper §5.2).
E0 = 0.6678922969728607

to_ambient = _sc.to_ambient
lift_state = _sc.lift_state


def lift_system(mass: float = MASS, regularization: float = REGULARIZATION,
                rho: float = RHO) -> ConstrainedSystem:
    """The nonholonomic lift to SO(3) (left-trivialized, φ(η) = η₃), centre X = e₃."""
    return spherical_kepler(mass, regularization, rho, CENTER)


def potential_grad(x, rho: float = RHO) -> np.ndarray:
    """Ambient ∇V = −ρ (1 − c²)^{−3/2} X, c = X·x."""
    c = np.asarray(x, dtype=float) @ CENTER
    return (-rho * (1.0 - c * c) ** -1.5)[..., None] * CENTER


def _potential(x, rho: float = RHO) -> np.ndarray:
    c = np.asarray(x, dtype=float) @ CENTER
    return -rho * c / np.sqrt(1.0 - c * c)


def _potential_hess(x, rho: float = RHO) -> np.ndarray:
    c = np.asarray(x, dtype=float) @ CENTER
    return (-3.0 * rho * c * (1.0 - c * c) ** -2.5)[..., None, None] * np.outer(CENTER, CENTER)


def cartesian_system(mass: float = MASS, rho: float = RHO) -> ConstrainedSystem:
    """Holonomic Cartesian formulation: q = x ∈ R³, V = −ρ cot ϑ, Φ(x) = ½(|x|² − 1)."""
    return _sc.cartesian_system(lambda x: _potential(x, rho), lambda x: potential_grad(x, rho),
                                lambda x: _potential_hess(x, rho), mass)


def energy(x, xdot, mass: float = MASS, rho: float = RHO) -> np.ndarray:
    """E = (m/2)|ẋ|² − ρ c/√(1 − c²), c = X·x."""
    xdot = np.asarray(xdot, dtype=float)
    return 0.5 * mass * np.sum(xdot * xdot, axis=-1) + _potential(x, rho)


def initial_ambient() -> tuple[np.ndarray, np.ndarray]:
    """(x₀, ẋ₀) = (g₀e₃, g₀(η₀ × e₃))."""
    return to_ambient(G0, ETA0)


def ambient_rhs(mass: float = MASS, rho: float = RHO):
    """Right-hand side of the ambient ODE on TS² ⊂ R⁶."""
    return _sc.ambient_rhs(lambda x: potential_grad(x, rho), mass)


def reference(t, x0=None, v0=None, mass: float = MASS, rho: float = RHO
              ) -> tuple[np.ndarray, np.ndarray]:
    """(x(t), ẋ(t)) of the ambient ODE (DOP853, rtol 1e-13), from the paper's data by default."""
    if x0 is None or v0 is None:
        x0, v0 = initial_ambient()
    return _sc.ambient_reference(lambda x: potential_grad(x, rho), x0, v0, t, mass)
