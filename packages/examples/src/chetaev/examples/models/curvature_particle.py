"""Particle with prescribed signed curvature (DSOCS paper §4.1, eqs. (6)–(7)).

A second-order constraint ``ẋÿ − ẏẍ = k|q̇|³`` on a free particle in the plane, ``L = ½m|q̇|²``.
Thin wrapper of ``chetaev.dsocs``: :func:`dsocs` is
:func:`chetaev.dsocs.curvature_particle_dsocs`, the exact solution for constant k is
:func:`chetaev.dsocs.particle_exact_solution`, the reference ODE
``ẍ = −k|v|ẏ, ÿ = k|v|ẋ`` is :func:`chetaev.dsocs.particle_ode_rhs`.

Paper data: k ≡ 1, q(0) = (0, 0), q̇(0) = (1, 1), horizon [0, 500], discrete start
``q1 = q0 + h q̇0``. The mass is not given in the paper (it does not affect the motion);
m = 1 is the project's **proposed** default. Invariants of the continuous motion: the speed
|q̇| (hence the energy) and the circle (centre, radius 1/k).
"""

from __future__ import annotations

import numpy as np
from chetaev.dsocs import (
    DSOCSIntegrator,
    curvature_particle_dsocs,
    curvature_particle_solver,
    particle_exact_solution,
    particle_ode_rhs,
    particle_trajectory,
)

__all__ = [
    "CURVATURE",
    "MASS",
    "Q0",
    "T_FINAL",
    "V0",
    "dsocs",
    "energy",
    "exact",
    "method",
    "ode_rhs",
    "start",
    "trajectory",
]

CURVATURE = 1.0
MASS = 1.0
Q0 = np.array([0.0, 0.0])
V0 = np.array([1.0, 1.0])
T_FINAL = 500.0


def dsocs(h: float, k=CURVATURE, mass: float = MASS, closed_form: bool = True):
    """The DSOCS of §4.1.2 (``closed_form=False``: the generic Newton step)."""
    return curvature_particle_dsocs(k, h, mass=mass, closed_form=closed_form)


def method(k=CURVATURE, closed_form: bool = True, **options) -> DSOCSIntegrator:
    """The method: ``DSOCSIntegrator`` with the closed-form step at the step's ``h``
    (:func:`chetaev.dsocs.curvature_particle_solver`; ``closed_form=False``: the generic
    Newton step); ``options`` are the other ``DSOCSIntegrator`` keywords."""
    return DSOCSIntegrator(solver=curvature_particle_solver(k) if closed_form else None,
                           **options)


def exact(t, k: float = CURVATURE, q0=Q0, v0=V0):
    """Exact motion for constant k: ``(q (T, 2), v (T, 2))``."""
    return particle_exact_solution(t, k, q0, v0)


def ode_rhs(k=CURVATURE):
    """Right-hand side of the continuous SOCS for ``y = (x, y, ẋ, ẏ)`` (any k(x, y))."""
    return particle_ode_rhs(k)


def start(h: float, kind: str = "paper", k: float = CURVATURE, q0=Q0, v0=V0):
    """Discrete start ``q1``: ``"paper"`` ``q0 + h v0``; ``"second_order"`` adds ``½h²a0`` with
    ``a0 = k|v0|Jv0`` (J = rotation by +90°); ``"exact"`` is ``q(h)``."""
    q0 = np.asarray(q0, float)
    v0 = np.asarray(v0, float)
    if kind == "paper":
        return q0 + h * v0
    if kind == "second_order":
        a0 = k * np.hypot(*v0) * np.array([-v0[1], v0[0]])
        return q0 + h * v0 + 0.5 * h**2 * a0
    if kind == "exact":
        return exact(np.array([h]), k, q0, v0)[0][0]
    raise ValueError(f"start kind must be 'paper', 'second_order' or 'exact'; got {kind!r}")


def trajectory(h: float, n_steps: int, kind: str = "paper", k=CURVATURE):
    """Nodes ``q_0 … q_N`` (N+1, 2) from the paper's data (fast closed-form loop)."""
    k0 = float(k(Q0)) if callable(k) else float(k)  # curvature at q0 for the start
    return particle_trajectory(Q0, start(h, kind, k0), h, n_steps, k)


def energy(v, mass: float = MASS):
    """``½m|v|²`` (constant along the continuous motion)."""
    v = np.asarray(v, float)
    return 0.5 * mass * np.sum(v * v, axis=-1)
