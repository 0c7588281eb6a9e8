"""Shared pieces of the S² models: the ambient (Cartesian) formulation, conversions between
the lift (g, η) on SO(3) and the ambient state (x, ẋ) on TS², and the ambient reference ODE."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from chetaev.discrete_lagrangian import ConstrainedSystem, MechanicalSystem
from chetaev.discrete_lagrangian import testing as _dl_testing
from chetaev.nh_integrators import sphere_point, sphere_velocity

from ._nh_common import dop853

__all__ = ["ambient_reference", "ambient_rhs", "cartesian_system", "lift_state",
           "sphere_constraint", "to_ambient"]

E3 = np.array([0.0, 0.0, 1.0])


def to_ambient(g, eta) -> tuple[np.ndarray, np.ndarray]:
    """(x, ẋ) = (g x₀, g(η × x₀)) with x₀ = e₃."""
    return sphere_point(g), sphere_velocity(g, eta)


def lift_state(x, xdot) -> tuple[np.ndarray, np.ndarray]:
    """A lift (g, η) of (x, ẋ) ∈ TS²: g the rotation about x₀ × x taking x₀ = e₃ to x, and
    η = x₀ × (gᵀẋ) (so η ⊥ x₀ and g(η × x₀) = ẋ). Shapes ``(..., 3)`` → ``(..., 3, 3), (..., 3)``.
    """
    x, xdot = np.asarray(x, dtype=float), np.asarray(xdot, dtype=float)
    if np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0)) > 1e-12:
        raise ValueError("`x` must lie on the unit sphere (|x| = 1); normalize it.")
    if np.max(np.abs(np.sum(x * xdot, axis=-1))) > 1e-12:
        raise ValueError("`xdot` must be tangent to the sphere at x (x·ẋ = 0).")
    c = x[..., 2]
    k = np.cross(E3, x)  # sin φ · axis
    K = np.zeros((*x.shape[:-1], 3, 3))
    K[..., 0, 1], K[..., 0, 2] = -k[..., 2], k[..., 1]
    K[..., 1, 0], K[..., 1, 2] = k[..., 2], -k[..., 0]
    K[..., 2, 0], K[..., 2, 1] = -k[..., 1], k[..., 0]
    if np.any(c <= -1.0 + 1e-12):
        raise ValueError("`x` is the antipode of x₀ = e₃; the lift used here is singular there.")
    g = np.eye(3) + K + (K @ K) / (1.0 + c)[..., None, None]  # Rodrigues, axis-angle e₃ → x
    eta = np.cross(E3, np.einsum("...ji,...j->...i", g, xdot))
    return g, eta


def ambient_rhs(potential_grad: Callable[[np.ndarray], np.ndarray], mass: float = 1.0
                ) -> Callable[[float, np.ndarray], np.ndarray]:
    """Ambient ODE of L = (m/2)|ẋ|² − V(x) on S² ⊂ R³ (holonomic constraint |x| = 1 eliminated):
    m ẍ = f − (x·f) x − m|ẋ|² x, f = −∇V(x); state z = (x, ẋ)."""

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        x, v = z[:3], z[3:]
        f = -np.asarray(potential_grad(x), dtype=float) / mass
        return np.concatenate([v, f - (x @ f) * x - (v @ v) * x])

    return rhs


def ambient_reference(potential_grad: Callable[[np.ndarray], np.ndarray], x0, v0, t,
                      mass: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(x(t), ẋ(t)) of :func:`ambient_rhs`, DOP853 at rtol = atol = 1e-13."""
    z = dop853(ambient_rhs(potential_grad, mass), np.concatenate([x0, v0]), t)
    return z[:, :3], z[:, 3:]


def cartesian_system(potential: Callable, potential_grad: Callable, potential_hess: Callable,
                     mass: float = 1.0) -> ConstrainedSystem:
    """Holonomic Cartesian formulation on R³: L = (m/2)|ẋ|² − V(x), Φ(x) = ½(|x|² − 1) = 0
    (analytic constraint Jacobian and Hessian); integrate with the holonomic
    ``chetaev.discrete_lagrangian.ConstrainedPRK`` (eq. 13 of the high-order paper)."""
    return ConstrainedSystem(
        MechanicalSystem(mass * np.eye(3), potential, potential_grad,
                         potential_hess=potential_hess),
        sphere_constraint(1.0),
    )


def sphere_constraint(length: float = 1.0):
    """``Φ(x) = ½(|x|² − ℓ²)`` with analytic Jacobian and Hessian: the constraint of
    ``chetaev.discrete_lagrangian.testing.spherical_pendulum``, reused."""
    return _dl_testing.spherical_pendulum(1.0, length).constraint
