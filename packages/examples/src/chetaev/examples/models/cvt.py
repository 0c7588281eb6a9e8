"""Pendulum-driven continuously variable transmission (high-order paper §7.2, Figs. 4–5).

From Modin–Verdier. Q = R³, q = (x, y, z)::

    L = ½|v|² − ½(x² + z² − 2 cos y + ε sin 2y),     Φ = v_z + sin(y) v_x = 0

Equations (paper §7.2): ẍ = −x + λ sin y, ÿ = −sin y − ε cos 2y (the driver gets no constraint
force), z̈ = −z + λ, λ = (x sin y + z − v_x v_y cos y)/(1 + sin² y) (sign convention
d/dt ∂L/∂v − ∂L/∂q = Aᵀλ, A = (sin y, 0, 1)). Subsystem energies E_d (driver), E_p (passenger) and
E_T = E_d + E_p are exact first integrals.

Parameters [paper]: ε = ½ (the figures), Lobatto-2. Initial data [paper]: q0 = (1, 0, 1) and
v0 = (0, 3√10/5, 0) (low energy, oscillating driver: E_T = 9/5) or v0 = (0, √8, 0) (high
energy, rotating driver: E_T = 4). Step sizes [paper]: h = 0.1 and h = π/10. The horizon is
not in the paper: T = 500 (the project's choice, not in the paper).
"""

from __future__ import annotations

import functools

import numpy as np
from chetaev.discrete_lagrangian import ConstrainedSystem, LinearVelocityConstraint
from chetaev.discrete_lagrangian.symbolic import from_lagrangian
from chetaev.nh_integrators import testing as nh_testing

from ._nh_common import dop853

__all__ = [
    "EPS",
    "Q0",
    "T_FINAL",
    "V0_HIGH",
    "V0_LOW",
    "energies",
    "hand_system",
    "lie_system",
    "multiplier",
    "reference",
    "system",
]

#: ε of the paper's figures.
EPS = 0.5
#: Initial configuration [paper] (a copy of ``nh_integrators.testing.CVT_Q0``).
Q0 = np.array(nh_testing.CVT_Q0, dtype=float)
#: Low-energy initial velocity (oscillating driver) [paper]: (0, 3√10/5, 0).
V0_LOW = np.array(nh_testing.CVT_V0_LOW, dtype=float)
#: High-energy initial velocity (rotating driver) [paper]: (0, √8, 0).
V0_HIGH = np.array(nh_testing.CVT_V0_HIGH, dtype=float)
#: Horizon (the project's choice, not in the paper, not from the paper).
T_FINAL = 500.0


@functools.lru_cache(maxsize=16)
def _generated(eps: float) -> ConstrainedSystem:
    import sympy as sp  # only when a model is built, never at import

    x, y, z, vx, vy, vz, e = sp.symbols("x y z v_x v_y v_z epsilon")
    L = (vx**2 + vy**2 + vz**2) / 2 - (x**2 + z**2 - 2 * sp.cos(y) + e * sp.sin(2 * y)) / 2
    return from_lagrangian(L, [x, y, z], [vx, vy, vz], nonholonomic=[vz + sp.sin(y) * vx],
                           params={e: eps})


def system(eps: float = EPS) -> ConstrainedSystem:
    """The CVT as a ``ConstrainedSystem`` (M = I, A(q) = (sin y, 0, 1)); Lagrangian or
    Hamiltonian form of ``NonholonomicPRK``, or the GNI.

    Generated from L and Φ of the module docstring by
    :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (exact derivatives; built
    once per ``eps`` and cached). :func:`hand_system` is the hand-written twin,
    :func:`multiplier` and :func:`reference` below stay independent of both.
    """
    return _generated(float(eps))


def hand_system(eps: float = EPS) -> ConstrainedSystem:
    """The hand-written twin of :func:`system`:
    :func:`chetaev.nh_integrators.testing.cvt_system` (the method package's public test
    problem), reused rather than written a second time."""
    return nh_testing.cvt_system(eps)


def lie_system(eps: float = EPS) -> ConstrainedSystem:
    """The same model on the abelian group R³, for ``LieNonholonomicPRK``."""
    from chetaev.discrete_lagrangian import TrivializedMechanicalSystem
    from chetaev.liegroups import Rn

    cs = system(eps)
    mech, con = cs.system, cs.constraint
    return ConstrainedSystem(
        TrivializedMechanicalSystem(Rn(3), np.eye(3), mech.V, mech.gradV, mech.hessV),
        LinearVelocityConstraint(con.A, dA=con.dA),
    )


def energies(q, v, eps: float = EPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E_d, E_p, E_T): driver ½v_y² − cos y + (ε/2) sin 2y, passenger ½(v_x² + v_z²) +
    ½(x² + z²), and their sum (all exact first integrals, paper §7.2)."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    return nh_testing.cvt_energies(q, v, eps)


def multiplier(q, v, eps: float = EPS) -> np.ndarray:
    """Exact λ(q, v), shape ``(..., 1)``.

    From d/dt(v_z + sin(y) v_x) = 0 with ẍ = −x + λ sin y, z̈ = −z + λ:
    λ = (x sin y + z − v_x v_y cos y)/(1 + sin² y) (paper §7.2).
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
