"""Spherical pendulum in Cartesian coordinates for the holonomic methods (the
S² of the discretization-maps paper's Ex. 4.2).

Formulations of the same motion:

* :func:`cartesian_system` — ``q ∈ R³``, ``L = ½|q̇|² − V(q)`` (unit mass), holonomic constraint
  ``Φ(q) = ½(|q|² − ℓ²)`` (a ``ConstrainedSystem``; the paper's extrinsic viewpoint §2.2);
* :func:`spherical_rhs` — minimal coordinates (θ, φ) (θ from the downward vertical,
  ``q = ℓ(sin θ cos φ, sin θ sin φ, −cos θ)``): the intrinsic Euler–Lagrange equations (2.1),
  an independent reference away from the poles.

Potentials (the project's spherical-pendulum benchmark, **proposed**; the paper has no numerical
example):
``"linear"``: ``V = g q_z``; ``"nonlinear"``: ``V = g q_z + 1.5 q_x² + 0.3 q_x q_y²``.
Initial data (proposed): ``q0 = (sin 1, 0, −cos 1)``, ``v0 = (0, 1, 0)``; g = 9.81, ℓ = 1.
Invariants: energy; for the linear potential also the vertical angular momentum
``L_z = x ẏ − y ẋ``.

Not to be confused with :mod:`.sphere_pendulum`, the same physical system as used by the
homogeneous-spaces paper (§5.1): there it is lifted to SO(3) for ``LieNonholonomicPRK`` (with
an ambient Cartesian reference), with that paper's data (α = m = 1, g₀ = R_y(π/3),
η₀ = (1/3, 0, 0)). The two modules are kept apart because the parameters, initial data,
potentials (this one adds a nonlinear term) and formulations differ, and each
reproduces its own paper's numbers; with ``potential="linear"``, g = α, m = 1 and the same
initial point and velocity they describe the same motion (tested in
``integration-tests/test_formulations_holonomic.py``).
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    MechanicalSystem,
    reference_solution,
)
from scipy.integrate import solve_ivp

from . import _sphere_common as _sc

__all__ = [
    "LENGTH",
    "POTENTIALS",
    "Q0",
    "V0",
    "G",
    "angular_momentum_z",
    "cartesian_from_spherical",
    "cartesian_system",
    "energy",
    "potential",
    "reference",
    "reference_spherical",
    "spherical_from_cartesian",
    "spherical_rhs",
]

G = 9.81
LENGTH = 1.0
POTENTIALS = ("nonlinear", "linear")
#: Standard initial data (the project's spherical-pendulum benchmark, proposed): on the sphere,
# tangent.
Q0 = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
V0 = np.array([0.0, 1.0, 0.0])


def _check(kind: str) -> None:
    if kind not in POTENTIALS:
        raise InputError(f"potential must be one of {POTENTIALS}; got {kind!r}")


def potential(kind: str = "nonlinear", g: float = G):
    """``(V, ∇V, ∇²V)`` of the chosen potential, each broadcasting over leading axes."""
    _check(kind)
    c = 0.0 if kind == "linear" else 1.0

    def V(q):
        q = np.asarray(q, dtype=float)
        return g * q[..., 2] + c * (1.5 * q[..., 0] ** 2 + 0.3 * q[..., 0] * q[..., 1] ** 2)

    def dV(q):
        q = np.asarray(q, dtype=float)
        return np.stack([c * (3.0 * q[..., 0] + 0.3 * q[..., 1] ** 2),
                         c * 0.6 * q[..., 0] * q[..., 1],
                         np.full(q.shape[:-1], g)], axis=-1)

    def d2V(q):
        q = np.asarray(q, dtype=float)
        H = np.zeros((*q.shape, 3))
        H[..., 0, 0] = 3.0 * c
        H[..., 0, 1] = H[..., 1, 0] = 0.6 * c * q[..., 1]
        H[..., 1, 1] = 0.6 * c * q[..., 0]
        return H

    return V, dV, d2V


def cartesian_system(kind: str = "nonlinear", g: float = G,
                     length: float = LENGTH) -> ConstrainedSystem:
    """The constrained Cartesian formulation (analytic constraint Hessian)."""
    V, dV, d2V = potential(kind, g)
    return ConstrainedSystem(MechanicalSystem(np.eye(3), V, dV, d2V),
                             _sc.sphere_constraint(length))


def energy(q, v, kind: str = "nonlinear", g: float = G):
    """``E = ½|v|² + V(q)``."""
    V = potential(kind, g)[0]
    v = np.asarray(v, dtype=float)
    return 0.5 * np.sum(v * v, axis=-1) + V(q)


def angular_momentum_z(q, v):
    """``L_z = x ẏ − y ẋ`` (conserved for the linear potential, which is axially symmetric)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    return q[..., 0] * v[..., 1] - q[..., 1] * v[..., 0]


def cartesian_from_spherical(y, length: float = LENGTH):
    """``(q, v)`` of the spherical state ``y = (θ, φ, θ̇, φ̇)`` (last axis)."""
    y = np.asarray(y, dtype=float)
    th, ph, dth, dph = (y[..., i] for i in range(4))
    st, ct, sp, cp = np.sin(th), np.cos(th), np.sin(ph), np.cos(ph)
    q = length * np.stack([st * cp, st * sp, -ct], axis=-1)
    dq_th = length * np.stack([ct * cp, ct * sp, st], axis=-1)
    dq_ph = length * np.stack([-st * sp, st * cp, np.zeros_like(st)], axis=-1)
    v = dq_th * dth[..., None] + dq_ph * dph[..., None]
    return q, v


def spherical_from_cartesian(q, v, length: float = LENGTH):
    """Inverse of :func:`cartesian_from_spherical` (away from the poles)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    th = np.arccos(np.clip(-q[..., 2] / length, -1.0, 1.0))
    ph = np.arctan2(q[..., 1], q[..., 0])
    st, ct, sp, cp = np.sin(th), np.cos(th), np.sin(ph), np.cos(ph)
    dth = (v[..., 0] * ct * cp + v[..., 1] * ct * sp + v[..., 2] * st) / length
    dph = (-v[..., 0] * sp + v[..., 1] * cp) / (length * st)
    return np.stack([th, ph, dth, dph], axis=-1)


def spherical_rhs(kind: str = "nonlinear", g: float = G, length: float = LENGTH):
    """Intrinsic equations in (θ, φ): for ``L = ½ℓ²(θ̇² + sin²θ φ̇²) − V(q(θ, φ))``,

    ``θ̈ = sin θ cos θ φ̇² − V_θ/ℓ²``,  ``φ̈ = −(V_φ/ℓ² + 2 sin θ cos θ θ̇ φ̇)/sin²θ``.
    """
    dV = potential(kind, g)[1]

    def rhs(_t, y):
        th, ph, dth, dph = y
        st, ct, sp, cp = np.sin(th), np.cos(th), np.sin(ph), np.cos(ph)
        q = length * np.array([st * cp, st * sp, -ct])
        grad = dV(q)
        V_th = grad @ (length * np.array([ct * cp, ct * sp, st]))
        V_ph = grad @ (length * np.array([-st * sp, st * cp, 0.0]))
        ddth = st * ct * dph**2 - V_th / length**2
        ddph = -(V_ph / length**2 + 2.0 * st * ct * dth * dph) / st**2
        return [dth, dph, ddth, ddph]

    return rhs


def reference_spherical(t, q0=Q0, v0=V0, kind: str = "nonlinear", g: float = G,
                        length: float = LENGTH, rtol: float = 1e-13, atol: float = 1e-13):
    """DOP853 on :func:`spherical_rhs`; returns Cartesian ``(q, v)`` at ``t`` (T, 3)."""
    t = np.asarray(t, dtype=float).reshape(-1)
    y0 = spherical_from_cartesian(q0, v0, length)
    sol = solve_ivp(spherical_rhs(kind, g, length), (t[0], t[-1]), y0, method="DOP853",
                    t_eval=t, rtol=rtol, atol=atol)
    if not sol.success:  # pragma: no cover - scipy failure
        raise RuntimeError(f"reference solve failed: {sol.message}")
    return cartesian_from_spherical(sol.y.T, length)


def reference(t, q0=Q0, v0=V0, kind: str = "nonlinear", g: float = G, length: float = LENGTH):
    """``reference_solution`` of the Cartesian index-1 equations (DOP853, rtol 1e-13)."""
    return reference_solution(cartesian_system(kind, g, length), q0, v0, t)
