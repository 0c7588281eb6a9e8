"""Pendulum-driven continuously variable transmission (high-order paper §7.2, Figs. 4–5).

From Modin–Verdier. Q = R³, q = (x, y, z)::

    L = ½|v|² − ½(x² + z² − 2 cos y + ε sin 2y),     Φ = v_z + sin(y) v_x = 0

Equations (spec §5.2): ẍ = −x + λ sin y, ÿ = −sin y − ε cos 2y (the driver gets no constraint
force), z̈ = −z + λ, λ = (x sin y + z − v_x v_y cos y)/(1 + sin² y) (sign convention
d/dt ∂L/∂v − ∂L/∂q = Aᵀλ, A = (sin y, 0, 1)). Subsystem energies E_d (driver), E_p (passenger) and
E_T = E_d + E_p are exact first integrals.

Parameters [paper]: ε = ½ (the figures), Lobatto-2. Initial data [paper]: q0 = (1, 0, 1) and
v0 = (0, 3√10/5, 0) (low energy, oscillating driver: E_T = 9/5) or v0 = (0, √8, 0) (high
energy, rotating driver: E_T = 4). Step sizes [paper]: h = 0.1 and h = π/10. The horizon is
not in the paper: T = 500 (spec §5.2 proposal).
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
)

from ._nh_common import dop853, row

__all__ = [
    "EPS",
    "Q0",
    "T_FINAL",
    "V0_HIGH",
    "V0_LOW",
    "energies",
    "lie_system",
    "multiplier",
    "reference",
    "system",
]

#: ε of the paper's figures.
EPS = 0.5
#: Initial configuration [paper].
Q0 = np.array([1.0, 0.0, 1.0])
#: Low-energy initial velocity (oscillating driver) [paper].
V0_LOW = np.array([0.0, 3.0 * np.sqrt(10.0) / 5.0, 0.0])
#: High-energy initial velocity (rotating driver) [paper].
V0_HIGH = np.array([0.0, np.sqrt(8.0), 0.0])
#: Horizon (spec §5.2 proposal, not from the paper).
T_FINAL = 500.0


def _pieces(eps: float):

    def V(q):
        x, y, z = q[..., 0], q[..., 1], q[..., 2]
        return 0.5 * (x**2 + z**2 - 2.0 * np.cos(y) + eps * np.sin(2.0 * y))

    def gV(q):
        x, y, z = q[..., 0], q[..., 1], q[..., 2]
        return np.stack([x, np.sin(y) + eps * np.cos(2.0 * y), z], axis=-1)

    def hV(q):
        y = q[..., 1]
        H = np.zeros((*np.shape(q)[:-1], 3, 3))
        H[..., 0, 0] = H[..., 2, 2] = 1.0
        H[..., 1, 1] = np.cos(y) - 2.0 * eps * np.sin(2.0 * y)
        return H

    def A(q):
        y = q[..., 1]
        return row(np.sin(y), np.zeros_like(y), np.ones_like(y))

    def dA(q):
        D = np.zeros((*np.shape(q)[:-1], 1, 3, 3))
        D[..., 0, 0, 1] = np.cos(q[..., 1])
        return D

    return np.eye(3), V, gV, hV, A, dA


def system(eps: float = EPS) -> ConstrainedSystem:
    """The CVT as a ``ConstrainedSystem`` (M = I, A(q) = (sin y, 0, 1)); Lagrangian or
    Hamiltonian form of ``NonholonomicPRK``, or the GNI."""
    M, V, gV, hV, A, dA = _pieces(eps)
    return ConstrainedSystem(
        MechanicalSystem(M, V, gV, potential_hess=hV), LinearVelocityConstraint(A, dA=dA)
    )


def lie_system(eps: float = EPS) -> ConstrainedSystem:
    """The same model on the abelian group R³, for ``LieNonholonomicPRK``."""
    from chetaev.discrete_lagrangian import TrivializedMechanicalSystem
    from chetaev.liegroups import Rn

    M, V, gV, hV, A, dA = _pieces(eps)
    return ConstrainedSystem(TrivializedMechanicalSystem(Rn(3), M, V, gV, hV),
                             LinearVelocityConstraint(A, dA=dA))


def energies(q, v, eps: float = EPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E_d, E_p, E_T): driver ½v_y² − cos y + (ε/2) sin 2y, passenger ½(v_x² + v_z²) +
    ½(x² + z²), and their sum (all exact first integrals, spec §5.2)."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    vx, vy, vz = v[..., 0], v[..., 1], v[..., 2]
    Ed = 0.5 * vy**2 - np.cos(y) + 0.5 * eps * np.sin(2.0 * y)
    Ep = 0.5 * (vx**2 + vz**2) + 0.5 * (x**2 + z**2)
    return Ed, Ep, Ed + Ep


def multiplier(q, v, eps: float = EPS) -> np.ndarray:
    """Exact λ(q, v), shape ``(..., 1)``.

    From d/dt(v_z + sin(y) v_x) = 0 with ẍ = −x + λ sin y, z̈ = −z + λ:
    λ = (x sin y + z − v_x v_y cos y)/(1 + sin² y) (spec §5.2).
    """
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    s = np.sin(y)
    return ((x * s + z - v[..., 0] * v[..., 1] * np.cos(y)) / (1.0 + s * s))[..., None]


def reference(t, q0=Q0, v0=V0_LOW, eps: float = EPS
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q(t), v(t), λ(t)) of the index-reduced ODE, DOP853 at rtol = atol = 1e-13."""

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        q, v = z[:3], z[3:]
        lam = multiplier(q, v, eps)[0]
        s = np.sin(q[1])
        acc = np.array([-q[0] + lam * s, -s - eps * np.cos(2.0 * q[1]), -q[2] + lam])
        return np.concatenate([v, acc])

    z = dop853(rhs, np.concatenate([q0, v0]), t)
    q, v = z[:, :3], z[:, 3:]
    return q, v, multiplier(q, v, eps)
