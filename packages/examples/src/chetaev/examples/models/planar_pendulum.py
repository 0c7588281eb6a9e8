"""Planar pendulum for the holonomic methods (the project's benchmark).

Two formulations of the same motion:

* :func:`angle_system` — minimal coordinate θ (from the downward vertical),
  ``L = ½ m ℓ² θ̇² + m g ℓ cos θ`` (a ``MechanicalSystem``);
* :func:`cartesian_system` — ``q = (x, y) ∈ R²``, ``L = ½ m |q̇|² − m g y`` with the holonomic
  constraint ``Φ(q) = ½(|q|² − ℓ²)`` (a ``ConstrainedSystem``).

The paper (Barbero Liñán, Martín de Diego, Sato Martín de Almagro 2024) has no numerical
example; the parameters below are the project's **proposed** defaults: m = ℓ = 1,
g = 9.81, θ(0) = 1, θ̇(0) = 0.5.  The Cartesian model reuses
:func:`chetaev.discrete_lagrangian.testing.cartesian_pendulum` (unit mass).
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import ConstrainedSystem, MechanicalSystem
from chetaev.discrete_lagrangian.testing import cartesian_pendulum, pendulum_angle
from scipy.integrate import solve_ivp
from scipy.special import ellipj, ellipkinc

__all__ = [
    "LENGTH",
    "OMEGA0",
    "THETA0",
    "G",
    "angle_from_cartesian",
    "angle_system",
    "cartesian_from_angle",
    "cartesian_system",
    "energy_angle",
    "energy_cartesian",
    "exact_angle",
    "initial_angle",
    "initial_cartesian",
    "reference_angle",
]

#: Gravity (the project's planar-pendulum benchmark, proposed).
G = 9.81
#: Length ℓ (the project's planar-pendulum benchmark, proposed); the mass is 1.
LENGTH = 1.0
#: Initial angle from the downward vertical and angular velocity (the project's
#: planar-pendulum benchmark, proposed).
THETA0 = 1.0
OMEGA0 = 0.5


def angle_system(g: float = G, length: float = LENGTH) -> MechanicalSystem:
    """θ-formulation: ``L = ½ ℓ² θ̇² + g ℓ cos θ`` (unit mass), configuration shape (1,)."""
    return pendulum_angle(g, length)


def cartesian_system(g: float = G, length: float = LENGTH) -> ConstrainedSystem:
    """Cartesian formulation in R² with ``Φ = ½(|q|² − ℓ²)`` (unit mass)."""
    return cartesian_pendulum(2, g, length)


def cartesian_from_angle(theta, omega, length: float = LENGTH):
    """``(q, v)`` in R² of the angle state (θ, θ̇): ``q = ℓ(sin θ, −cos θ)``."""
    theta = np.asarray(theta, dtype=float)
    omega = np.asarray(omega, dtype=float)
    q = length * np.stack([np.sin(theta), -np.cos(theta)], axis=-1)
    v = length * omega[..., None] * np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    return q, v


def angle_from_cartesian(q, v):
    """``(θ, θ̇)`` of a Cartesian state (inverse of :func:`cartesian_from_angle`)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    theta = np.arctan2(q[..., 0], -q[..., 1])
    r2 = np.sum(q * q, axis=-1)
    omega = (q[..., 0] * v[..., 1] - q[..., 1] * v[..., 0]) / r2
    return theta, omega


def initial_angle(theta0: float = THETA0, omega0: float = OMEGA0):
    """Standard initial data of the θ-formulation, shapes (1,), (1,)."""
    return np.array([theta0]), np.array([omega0])


def initial_cartesian(theta0: float = THETA0, omega0: float = OMEGA0, length: float = LENGTH):
    """Standard initial data of the Cartesian formulation (on the constraint, tangent)."""
    return cartesian_from_angle(theta0, omega0, length)


def energy_angle(theta, omega, g: float = G, length: float = LENGTH):
    """``E = ½ ℓ² θ̇² − g ℓ cos θ``."""
    return 0.5 * length**2 * np.asarray(omega) ** 2 - g * length * np.cos(theta)


def energy_cartesian(q, v, g: float = G):
    """``E = ½|v|² + g y`` (equal to :func:`energy_angle` on the constraint set)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    return 0.5 * np.sum(v * v, axis=-1) + g * q[..., -1]


def reference_angle(t, theta0: float = THETA0, omega0: float = OMEGA0, g: float = G,
                    length: float = LENGTH, rtol: float = 1e-13, atol: float = 1e-13):
    """Reference solution of ``θ̈ = −(g/ℓ) sin θ`` (scipy DOP853) at the times ``t``.

    Returns ``(θ(t), θ̇(t))``, each of shape ``(len(t),)``; ``t[0]`` is the initial time.
    """
    t = np.asarray(t, dtype=float).reshape(-1)

    def rhs(_t, y):
        return [y[1], -(g / length) * np.sin(y[0])]

    sol = solve_ivp(rhs, (t[0], t[-1]), [theta0, omega0], method="DOP853", t_eval=t,
                    rtol=rtol, atol=atol)
    if not sol.success:  # pragma: no cover - scipy failure
        raise RuntimeError(f"reference solve failed: {sol.message}")
    return sol.y[0], sol.y[1]


def exact_angle(t, theta0: float = THETA0, omega0: float = OMEGA0, g: float = G,
                length: float = LENGTH):
    """Exact libration of the pendulum by Jacobi elliptic functions.

    With ``w² = g/ℓ``, ``E = ½θ̇² − w² cos θ`` and modulus ``k = sin(θ_max/2)``
    (``cos θ_max = −E/w²``): ``sin(θ/2) = k sn(w t + u0 | k²)``, ``θ̇ = 2kw cn(·) dn(·)/cos(θ/2)``,
    where ``sn(u0) = sin(θ0/2)/k`` and ``cn(u0)`` has the sign of θ̇0.

    Raises
    ------
    ValueError
        If the motion is not a libration (``E ≥ w²``: the pendulum goes over the top).
    """
    w2 = g / length
    E = 0.5 * omega0**2 - w2 * np.cos(theta0)
    if E >= w2:
        raise ValueError(f"exact_angle covers librations only (energy {E:g} < g/ℓ = {w2:g}); "
                         "use reference_angle for rotations")
    w = np.sqrt(w2)
    # k² = sin²(θ_max/2) = (1 + E/w²)/2, written so that ω0 = 0 gives k = |sin(θ0/2)| exactly
    m = np.sin(theta0 / 2) ** 2 + omega0**2 / (4.0 * w2)
    k = np.sqrt(m)
    u0 = ellipkinc(np.arcsin(np.clip(np.sin(theta0 / 2) / k, -1.0, 1.0)), m)
    if omega0 < 0:  # cn(u0) < 0: the mirror point in the half period
        u0 = 2.0 * ellipkinc(np.pi / 2, m) - u0
    sn, cn, dn, _ = ellipj(w * np.asarray(t, dtype=float) + u0, m)
    theta = 2.0 * np.arcsin(k * sn)
    omega = 2.0 * k * w * cn * dn / np.cos(theta / 2)
    return theta, omega
