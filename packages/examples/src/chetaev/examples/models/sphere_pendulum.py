"""Spherical mathematical pendulum on S² (homogeneous-spaces paper §5.1, Figs. 1–5).

L(x, ẋ) = (m/2)|ẋ|² + γ·x, γ = (0, 0, −α) (gravity along −z, x₀ = e₃ the top). Two
formulations:

* **Lift** to SO(3) (:func:`lift_system`): ℓ_reg(g, η) = (m/2)|η × x₀|² + (M/2)(η·x₀)² +
  γ·(g x₀) with the 𝔪-constraint φ(η) = x₀·η = 0 (``chetaev.nh_integrators.spherical_pendulum``),
  integrated with ``LieNonholonomicPRK``; the continuous multiplier is λ ≡ 0.
* **Ambient** (Cartesian) on R³ with |x| = 1: the reference ODE m ẍ = f − (x·f)x − m|ẋ|²x,
  f = γ (:func:`ambient_rhs`, :func:`reference`), and the holonomically constrained system
  Φ(x) = ½(|x|² − 1) (:func:`cartesian_system`, for ``ConstrainedPRK``).

Energy E = (m/2)|ẋ|² + α x₃ (= (m/2)(η₁² + η₂²) + (M/2)η₃² + α(g x₀)₃ on the lift).

Initial data [paper]: g₀ = Tait–Bryan (0, π/3, 0), η₀ = (1/3, 0, 0), λ₀ = 0; h = 0.1, τ = cay
(Figs. 1–4), τ = exp for the convergence study (Fig. 5). Not in the paper (see the docs' theory
page):
m = M = α = 1 (E₀ = 5/9), T = 200 for the long runs, T = 2 with h = 0.2/2ʲ for convergence.

Not to be confused with :mod:`.spherical_pendulum`, the Cartesian spherical pendulum of the
discretization-maps paper (its Ex. 4.2 sphere) for the holonomic methods, with g = 9.81, a proposed
nonlinear potential and other initial data. Two modules, because the papers use different
parameters, initial data and formulations (S² lift to SO(3) here, R³ with |q| = ℓ and
minimal coordinates there); the physics is the same (see that module).
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import ConstrainedSystem
from chetaev.nh_integrators import spherical_pendulum, tait_bryan

from . import _sphere_common as _sc

__all__ = ["ALPHA", "ETA0", "G0", "MASS", "REGULARIZATION", "ambient_rhs", "cartesian_system",
           "energy",
           "initial_ambient", "lift_state", "lift_system", "potential_grad", "reference",
           "to_ambient"]

#: m, M, α (the project's proposals, not from the paper).
MASS, REGULARIZATION, ALPHA = 1.0, 1.0, 1.0
#: g₀ = R_y(π/3) [paper].
G0 = tait_bryan(0.0, np.pi / 3.0, 0.0)
#: η₀ [paper].
ETA0 = np.array([1.0 / 3.0, 0.0, 0.0])

to_ambient = _sc.to_ambient
lift_state = _sc.lift_state


def lift_system(mass: float = MASS, regularization: float = REGULARIZATION,
                alpha: float = ALPHA) -> ConstrainedSystem:
    """The nonholonomic lift to SO(3) (left-trivialized, φ(η) = η₃)."""
    return spherical_pendulum(mass, regularization, alpha)


def potential_grad(x, alpha: float = ALPHA) -> np.ndarray:
    """Ambient ∇V = (0, 0, α) of V(x) = α x₃."""
    return np.broadcast_to(np.array([0.0, 0.0, alpha]), np.shape(x)).copy()


def cartesian_system(mass: float = MASS, alpha: float = ALPHA) -> ConstrainedSystem:
    """Holonomic Cartesian formulation: q = x ∈ R³, V = α x₃, Φ(x) = ½(|x|² − 1)."""
    return _sc.cartesian_system(
        lambda x: alpha * np.asarray(x)[..., 2], lambda x: potential_grad(x, alpha),
        lambda x: np.zeros((*np.shape(x), 3)), mass)


def energy(x, xdot, mass: float = MASS, alpha: float = ALPHA) -> np.ndarray:
    """E = (m/2)|ẋ|² + α x₃ (ambient variables; use :func:`to_ambient` for a lift)."""
    x, xdot = np.asarray(x, dtype=float), np.asarray(xdot, dtype=float)
    return 0.5 * mass * np.sum(xdot * xdot, axis=-1) + alpha * x[..., 2]


def initial_ambient() -> tuple[np.ndarray, np.ndarray]:
    """(x₀, ẋ₀) = (g₀e₃, g₀(η₀ × e₃)) = ((sin π/3, 0, cos π/3), (0, −1/3, 0))."""
    return to_ambient(G0, ETA0)


def ambient_rhs(mass: float = MASS, alpha: float = ALPHA):
    """Right-hand side of the ambient ODE on TS² ⊂ R⁶."""
    return _sc.ambient_rhs(lambda x: potential_grad(x, alpha), mass)


def reference(t, x0=None, v0=None, mass: float = MASS, alpha: float = ALPHA
              ) -> tuple[np.ndarray, np.ndarray]:
    """(x(t), ẋ(t)) of the ambient ODE (DOP853, rtol 1e-13), from the paper's data by default."""
    if x0 is None or v0 is None:
        x0, v0 = initial_ambient()
    return _sc.ambient_reference(lambda x: potential_grad(x, alpha), x0, v0, t, mass)
