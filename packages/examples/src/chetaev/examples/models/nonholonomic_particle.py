"""Nonholonomic particle in a harmonic potential (high-order paper §7.1, Fig. 3).

Q = R³, q = (x, y, z)::

    L = ½|v|² − ½(x² + y²),     Φ(q, v) = v_z − y v_x = 0     (A(q) = (−y, 0, 1))

Equations (high-order paper §7.1): ẍ = −x − λy, ÿ = −y, z̈ = λ with
λ(q, v) = (v_x v_y − x y)/(1 + y²) (sign convention d/dt ∂L/∂v − ∂L/∂q = Aᵀλ). y(t) is an exact
harmonic oscillator; the energy ½|v|² + ½(x² + y²) is conserved.

Formulations: :func:`system` (``chetaev.gni.testing.harmonic_particle``, reused) runs in the
Lagrangian form (eq. 14) and the Hamiltonian form (eq. 15, p = v) of ``NonholonomicPRK``,
and with the GNI (linear constraint on a vector space);
:func:`lie_system` is the same model on the group R³ for ``LieNonholonomicPRK``.
:func:`reference` integrates the index-reduced ODE with the
closed-form λ, written here independently of ``chetaev.discrete_lagrangian.reference_solution``.

Initial data and horizon are NOT from the paper (it gives none): the the project's choice, not in
the paper
q0 = (1, 0.5, 0), v0 = (0.5, 1, 0.25) (so that v_z = y v_x), T = 2.
"""

from __future__ import annotations

import functools

import numpy as np
from chetaev.discrete_lagrangian import ConstrainedSystem, LinearVelocityConstraint
from chetaev.discrete_lagrangian.symbolic import from_lagrangian
from chetaev.gni.testing import harmonic_particle

from ._nh_common import dop853

__all__ = ["Q0", "T_FINAL", "V0", "energy", "exact_y", "hand_system", "lie_system", "multiplier",
           "reference", "system"]

#: Initial configuration (the project's choice, not in the paper, not from the paper).
Q0 = np.array([1.0, 0.5, 0.0])
#: Initial velocity, v_z = y v_x (the project's choice, not in the paper, not from the paper).
V0 = np.array([0.5, 1.0, 0.25])
#: Horizon of the convergence study (the project's choice, not in the paper).
T_FINAL = 2.0


@functools.lru_cache(maxsize=1)
def _generated() -> ConstrainedSystem:
    import sympy as sp  # only when a model is built, never at import

    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    L = (vx**2 + vy**2 + vz**2) / 2 - (x**2 + y**2) / 2
    return from_lagrangian(L, [x, y, z], [vx, vy, vz], nonholonomic=[vz - y * vx])


def system() -> ConstrainedSystem:
    """The particle as a ``ConstrainedSystem`` (M = I, V = ½(x² + y²), A = (−y, 0, 1)).

    Generated from L and Φ of the module docstring by
    :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (exact derivatives; built
    once and cached). :func:`hand_system` is the hand-written twin; the reference below
    stays independent of both.
    """
    return _generated()


def hand_system() -> ConstrainedSystem:
    """The hand-written twin of :func:`system`: :func:`chetaev.gni.testing.harmonic_particle`
    (the method packages' public test problem), reused rather than written a second time."""
    return harmonic_particle().system


def lie_system() -> ConstrainedSystem:
    """The same model on the abelian group R³ (``TrivializedMechanicalSystem(Rn(3), …)``), for
    ``LieNonholonomicPRK``; on Rⁿ that method is exactly the vector-space NH-PRK."""
    from chetaev.discrete_lagrangian import TrivializedMechanicalSystem
    from chetaev.liegroups import Rn

    cs = system()
    mech, con = cs.system, cs.constraint
    return ConstrainedSystem(
        TrivializedMechanicalSystem(Rn(3), np.eye(3), mech.V, mech.gradV, mech.hessV),
        LinearVelocityConstraint(con.A, dA=con.dA),
    )


def energy(q, v) -> np.ndarray:
    """E = ½|v|² + ½(x² + y²), a first integral."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    return 0.5 * np.sum(v * v, axis=-1) + 0.5 * (q[..., 0] ** 2 + q[..., 1] ** 2)


def multiplier(q, v) -> np.ndarray:
    """Exact λ(q, v) = (v_x v_y − x y)/(1 + y²), shape ``(..., 1)``."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    y = q[..., 1]
    return ((v[..., 0] * v[..., 1] - q[..., 0] * y) / (1.0 + y * y))[..., None]


def exact_y(t, q0=Q0, v0=V0) -> np.ndarray:
    """The exact y(t) = y₀ cos t + ẏ₀ sin t (the constraint force has no y component)."""
    t = np.asarray(t, dtype=float)
    return q0[1] * np.cos(t) + v0[1] * np.sin(t)


def _rhs(_t: float, z: np.ndarray) -> np.ndarray:
    q, v = z[:3], z[3:]
    lam = multiplier(q, v)[0]
    acc = np.array([-q[0] - lam * q[1], -q[1], lam])
    return np.concatenate([v, acc])


def reference(t, q0=Q0, v0=V0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q(t), v(t), λ(t)) of the index-reduced ODE, DOP853 at rtol = atol = 1e-13."""
    z = dop853(_rhs, np.concatenate([q0, v0]), t)
    q, v = z[:, :3], z[:, 3:]
    return q, v, multiplier(q, v)
