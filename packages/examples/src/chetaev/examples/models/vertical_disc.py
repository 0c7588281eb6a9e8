"""Vertical rolling disc (unicycle) with an elastic spring (high-order paper §7.4, Fig. 7).

Two formulations of the same mechanical system:

* **Lie group** SE(2), left trivialization, η = (v₁, v₂, ω) (body velocities)::

      ℓ(g, η) = ½[m(v₁² + v₂²) + I_z ω²] − ½(x² + y²),     φ(η) = v₂ = 0

  (:func:`lie_system`, integrated with ``LieNonholonomicPRK``, retraction cay or exp; the
  model is ``chetaev.nh_integrators.testing.vertical_disc``).
* **Coordinates** q = (x, y, θ) on R³::

      L = ½[m(ẋ² + ẏ²) + I_z θ̇²] − ½(x² + y²),     Φ = ẏ cos θ − ẋ sin θ = 0

  (:func:`coordinate_system`, integrated with ``NonholonomicPRK`` or the GNI).

The constraint covectors agree (the body e₂ is (−sin θ, cos θ) in the plane), so both forms
have the same multiplier λ = m ω v₁ − x sin θ + y cos θ. Exact reduced dynamics (paper §7.4):
θ = θ₀ + ωt, ẋ = v₁ cos θ, ẏ = v₁ sin θ, m v̇₁ = −(x cos θ + y sin θ); the energy
½(m v₁² + I_z ω²) + ½(x² + y²) is conserved.

Parameters and initial data are NOT in the paper (the project's choice, not in the paper): m = 1,
I_z = 0.5,
(x₀, y₀, θ₀) = (1, 0.5, 0.3), η₀ = (0.8, 0, 1.2), T = 3.
"""

from __future__ import annotations

import functools

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
)
from chetaev.discrete_lagrangian import testing as dl_testing
from chetaev.discrete_lagrangian.symbolic import from_lagrangian, from_trivialized_lagrangian
from chetaev.nh_integrators import testing as nh_testing

from ._nh_common import row

__all__ = [
    "ETA0",
    "INERTIA_Z",
    "MASS",
    "POSE0",
    "T_FINAL",
    "body_velocity",
    "coordinate_system",
    "coordinates",
    "energy",
    "group_element",
    "hand_coordinate_system",
    "hand_lie_system",
    "initial_coordinates",
    "initial_group",
    "lie_system",
    "multiplier",
    "reference",
    "reference_coordinates",
    "spatial_velocity",
]

#: Mass (the project's choice, not in the paper, not from the paper).
MASS = 1.0
#: Moment of inertia about the vertical axis (the project's choice, not in the paper, not from the
# paper).
INERTIA_Z = 0.5
#: Initial pose (x₀, y₀, θ₀) (the project's choice, not in the paper).
POSE0 = np.array([1.0, 0.5, 0.3])
#: Initial body velocity (v₁, v₂, ω) (the project's choice, not in the paper).
ETA0 = np.array([0.8, 0.0, 1.2])
#: Horizon of the convergence study (the project's choice, not in the paper).
T_FINAL = 3.0


@functools.lru_cache(maxsize=16)
def _generated(mass: float, inertia_z: float, lie: bool) -> ConstrainedSystem:
    import sympy as sp  # only when a model is built, never at import

    m, i_z = sp.symbols("m I_z")
    params = {m: mass, i_z: inertia_z}
    if lie:  # SE(2), g = [[cos θ, −sin θ, x], [sin θ, cos θ, y], [0, 0, 1]]
        from chetaev.liegroups import SE2

        g = sp.MatrixSymbol("g", 3, 3)
        v1, v2, w = sp.symbols("v_1 v_2 omega")
        ell = (m * (v1**2 + v2**2) + i_z * w**2) / 2 - (g[0, 2] ** 2 + g[1, 2] ** 2) / 2
        return from_trivialized_lagrangian(SE2, ell, [v1, v2, w], g=g, nonholonomic=[v2],
                                           params=params)
    x, y, th, vx, vy, w = sp.symbols("x y theta v_x v_y omega")
    L = (m * (vx**2 + vy**2) + i_z * w**2) / 2 - (x**2 + y**2) / 2
    return from_lagrangian(L, [x, y, th], [vx, vy, w], params=params,
                           nonholonomic=[vy * sp.cos(th) - vx * sp.sin(th)])


def lie_system(mass: float = MASS, inertia_z: float = INERTIA_Z) -> ConstrainedSystem:
    """The disc on SE(2) (left-trivialized), constraint φ = v₂.

    Generated from ℓ and φ of the module docstring by
    :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (built once per
    parameter set and cached); :func:`hand_lie_system` is the hand-written twin.
    """
    return _generated(float(mass), float(inertia_z), True)


def coordinate_system(mass: float = MASS, inertia_z: float = INERTIA_Z) -> ConstrainedSystem:
    """The disc in coordinates (x, y, θ): M = diag(m, m, I_z), A(q) = (−sin θ, cos θ, 0).

    Generated from L and Φ of the module docstring by
    :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (built once per parameter
    set and cached); :func:`hand_coordinate_system` is the hand-written twin.
    """
    return _generated(float(mass), float(inertia_z), False)


def hand_lie_system(mass: float = MASS, inertia_z: float = INERTIA_Z) -> ConstrainedSystem:
    """The hand-written twin of :func:`lie_system`:
    :func:`chetaev.nh_integrators.testing.vertical_disc`, reused."""
    return nh_testing.vertical_disc(mass, inertia_z)


def hand_coordinate_system(mass: float = MASS, inertia_z: float = INERTIA_Z
                           ) -> ConstrainedSystem:
    """The hand-written twin of :func:`coordinate_system`.

    The spring potential ½(x² + y²) is the one of
    :func:`chetaev.discrete_lagrangian.testing.harmonic_nonholonomic_particle` (reused, with
    its gradient and Hessian).
    """
    spring = dl_testing.harmonic_nonholonomic_particle().system

    def A(q):
        th = q[..., 2]
        return row(-np.sin(th), np.cos(th), np.zeros_like(th))

    def dA(q):
        th = q[..., 2]
        D = np.zeros((*np.shape(q)[:-1], 1, 3, 3))
        D[..., 0, 0, 2] = -np.cos(th)
        D[..., 0, 1, 2] = -np.sin(th)
        return D

    return ConstrainedSystem(
        MechanicalSystem(np.diag([mass, mass, inertia_z]), spring.V, spring.gradV,
                         potential_hess=spring.hessV),
        LinearVelocityConstraint(A, dA=dA),
    )


def group_element(pose) -> np.ndarray:
    """SE(2) matrix of (x, y, θ), ``(..., 3) -> (..., 3, 3)``."""
    pose = np.asarray(pose, dtype=float)
    x, y, th = pose[..., 0], pose[..., 1], pose[..., 2]
    g = np.zeros((*pose.shape[:-1], 3, 3))
    c, s = np.cos(th), np.sin(th)
    g[..., 0, 0], g[..., 0, 1], g[..., 0, 2] = c, -s, x
    g[..., 1, 0], g[..., 1, 1], g[..., 1, 2] = s, c, y
    g[..., 2, 2] = 1.0
    return g


def coordinates(g, unwrap: bool = True) -> np.ndarray:
    """(x, y, θ) of SE(2) matrices ``(T, ..., 3, 3)``; with ``unwrap`` θ is made continuous
    along the first axis (a trajectory)."""
    g = np.asarray(g, dtype=float)
    th = np.arctan2(g[..., 1, 0], g[..., 0, 0])
    if unwrap and th.ndim >= 1:
        th = np.unwrap(th, axis=0)
    return np.stack([g[..., 0, 2], g[..., 1, 2], th], axis=-1)


def spatial_velocity(pose, eta) -> np.ndarray:
    """(ẋ, ẏ, θ̇) = (v₁ cos θ − v₂ sin θ, v₁ sin θ + v₂ cos θ, ω)."""
    pose, eta = np.asarray(pose, dtype=float), np.asarray(eta, dtype=float)
    c, s = np.cos(pose[..., 2]), np.sin(pose[..., 2])
    return np.stack([c * eta[..., 0] - s * eta[..., 1], s * eta[..., 0] + c * eta[..., 1],
                     eta[..., 2]], axis=-1)


def body_velocity(pose, v) -> np.ndarray:
    """Inverse of :func:`spatial_velocity`: η = (v₁, v₂, ω)."""
    pose, v = np.asarray(pose, dtype=float), np.asarray(v, dtype=float)
    c, s = np.cos(pose[..., 2]), np.sin(pose[..., 2])
    return np.stack([c * v[..., 0] + s * v[..., 1], -s * v[..., 0] + c * v[..., 1], v[..., 2]],
                    axis=-1)


def initial_group() -> tuple[np.ndarray, np.ndarray]:
    """(g₀, η₀) for the SE(2) formulation."""
    return group_element(POSE0), ETA0.copy()


def initial_coordinates() -> tuple[np.ndarray, np.ndarray]:
    """(q₀, v₀) for the coordinate formulation (the same physical state)."""
    return POSE0.copy(), spatial_velocity(POSE0, ETA0)


def energy(pose, v, mass: float = MASS, inertia_z: float = INERTIA_Z) -> np.ndarray:
    """E = ½[m(ẋ² + ẏ²) + I_z θ̇²] + ½(x² + y²) (coordinates; body velocities give the same
    value since |v| is frame independent)."""
    pose, v = np.asarray(pose, dtype=float), np.asarray(v, dtype=float)
    return (0.5 * (mass * (v[..., 0] ** 2 + v[..., 1] ** 2) + inertia_z * v[..., 2] ** 2)
            + 0.5 * (pose[..., 0] ** 2 + pose[..., 1] ** 2))


def multiplier(pose, eta, mass: float = MASS) -> np.ndarray:
    """Exact λ = m ω v₁ − x sin θ + y cos θ (both formulations), shape ``(..., 1)``."""
    pose, eta = np.asarray(pose, dtype=float), np.asarray(eta, dtype=float)
    th = pose[..., 2]
    return (mass * eta[..., 2] * eta[..., 0] - pose[..., 0] * np.sin(th)
            + pose[..., 1] * np.cos(th))[..., None]


def reference(t, g0=None, eta0=None, mass: float = MASS
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(g(t), η(t), λ(t)) from the exact reduced ODE (DOP853, rtol 1e-13), from (g₀, η₀)
    (default :func:`initial_group`; η₀ must have v₂ = 0)."""
    if g0 is None or eta0 is None:
        g0, eta0 = initial_group()
    eta0 = np.asarray(eta0, dtype=float)
    if abs(eta0[1]) > 1e-12:
        raise ValueError(f"η₀ must satisfy the constraint v₂ = 0, got v₂ = {eta0[1]:g}.")
    return nh_testing.disc_reference(np.asarray(g0, dtype=float), eta0,
                                       np.asarray(t, dtype=float), mass=mass)


def reference_coordinates(t, q0=None, v0=None, mass: float = MASS
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact motion in the coordinate formulation: (q(t), v(t), λ(t)) with q = (x, y, θ)
    and v = (ẋ, ẏ, θ̇), from (q₀, v₀) (default :func:`initial_coordinates`)."""
    if q0 is None or v0 is None:
        q0, v0 = initial_coordinates()
    g, eta, lam = reference(t, group_element(q0), body_velocity(q0, v0), mass)
    q = coordinates(g)
    return q, spatial_velocity(q, eta), lam
