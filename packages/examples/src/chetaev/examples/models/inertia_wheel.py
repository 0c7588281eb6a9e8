"""Inertia wheel pendulum with a Lyapunov constraint (DSOCS paper §4.2, eqs. (8)–(10)).

Thin wrapper of ``chetaev.dsocs``: configuration ``q = (θ, ψ)``, ``L = ½q̇ᵀ𝐌q̇ − M(1 + cos θ)``
(:func:`system`), the second-order constraint ``dV/dt = −F`` (:func:`chetaev.dsocs.iwp_constraint`),
the DSOCS :func:`dsocs` (physical-root branch), and the closed-loop reference ODE
(:func:`reference`, scipy DOP853).

Paper parameters (:data:`PARAMETERS`): I = 312.5, J = 2.0772, M = 37.98, d = 1, e = 1000,
χ = 100, n = −154, ρ = 2. Paper initial data: θ(0) = 0.5, ψ(0) = 0, θ̇(0) = 0, ψ̇(0) = 0.5;
discrete start ``q1 = q0 + h q̇0``; horizon [0, 2000].
The Lyapunov function V (:func:`lyapunov`) is non-increasing along the continuous motion.
"""

from __future__ import annotations

import numpy as np
from chetaev.dsocs import (
    DSOCSIntegrator,
    InertiaWheelParameters,
    inertia_wheel_dsocs,
    inertia_wheel_step_options,
    iwp_closed_loop_rhs,
    iwp_F,
    iwp_reference,
    iwp_system,
    iwp_trajectory,
    iwp_V,
)

__all__ = [
    "PARAMETERS",
    "Q0",
    "T_FINAL",
    "V0",
    "closed_loop_rhs",
    "dissipation",
    "dsocs",
    "lyapunov",
    "method",
    "reference",
    "start",
    "system",
    "trajectory",
]

PARAMETERS = InertiaWheelParameters()
Q0 = np.array([0.5, 0.0])
V0 = np.array([0.0, 0.5])
T_FINAL = 2000.0


def system(params: InertiaWheelParameters = PARAMETERS):
    """The continuous Lagrangian system (``MechanicalSystem``)."""
    return iwp_system(params)


def dsocs(h: float, params: InertiaWheelParameters = PARAMETERS, solver: str = "R-branch"):
    """The DSOCS of §4.2.2 (see :func:`chetaev.dsocs.inertia_wheel_dsocs` for ``solver``)."""
    return inertia_wheel_dsocs(h, params, solver)


def method(params: InertiaWheelParameters = PARAMETERS, solver: str = "R-branch",
           **options) -> DSOCSIntegrator:
    """The method: ``DSOCSIntegrator`` with the step ``solver`` ("R-branch", "newton",
    "newton-unsafe", "paper") at the step's ``h``
    (:func:`chetaev.dsocs.inertia_wheel_step_options`); ``options`` are the other
    ``DSOCSIntegrator`` keywords."""
    return DSOCSIntegrator(**inertia_wheel_step_options(params, solver), **options)


def closed_loop_rhs(params: InertiaWheelParameters = PARAMETERS):
    """The explicit closed-loop ODE for ``y = (θ, ψ, θ̇, ψ̇)``."""
    return iwp_closed_loop_rhs(params)


def reference(t_final: float, params: InertiaWheelParameters = PARAMETERS, rtol: float = 1e-13,
              atol: float = 1e-13):
    """Dense DOP853 solution of the closed-loop ODE: ``sol(t) → (4, ...)``."""
    return iwp_reference(t_final, params, tuple(Q0), tuple(V0), rtol=rtol, atol=atol)


def start(h: float, kind: str = "paper", params: InertiaWheelParameters = PARAMETERS):
    """Discrete start ``q1``: ``"paper"`` ``q0 + h q̇0``; ``"second_order"`` adds ``½h²a0``."""
    if kind == "paper":
        return Q0 + h * V0
    if kind == "second_order":
        a0 = np.asarray(closed_loop_rhs(params)(0.0, [*Q0, *V0])[2:])
        return Q0 + h * V0 + 0.5 * h**2 * a0
    raise ValueError(f"start kind must be 'paper' or 'second_order'; got {kind!r}")


def trajectory(h: float, n_steps: int, kind: str = "paper",
               params: InertiaWheelParameters = PARAMETERS):
    """Nodes ``q_0 … q_N`` of the physical-root branch (fast scalar loop), (N+1, 2)."""
    nodes, _ = iwp_trajectory(Q0, start(h, kind, params), h, n_steps, params)
    return nodes


def lyapunov(q, v, params: InertiaWheelParameters = PARAMETERS):
    """The Lyapunov function V(q, q̇) of the controller."""
    return iwp_V(q, v, params)


def dissipation(q, v, params: InertiaWheelParameters = PARAMETERS):
    """``F(q, q̇) ≥ 0``: the constraint imposes ``dV/dt = −F``."""
    return iwp_F(q, v, params)
