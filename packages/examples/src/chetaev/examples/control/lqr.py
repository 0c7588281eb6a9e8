"""Discrete LQR of the inverted spherical pendulum from exact step linearizations (issue 20).

The spherical pendulum in Cartesian coordinates (:mod:`chetaev.examples.models.spherical_pendulum`,
``q ∈ R³``, ``Φ(q) = ½(|q|² − ℓ²)``, unit mass, potential ``V = g q_z``) is actuated by a
horizontal torque ``τ = (u₁, u₂, 0)`` about the pivot (a two-axis gimbal motor at the pivot).
The generalized force on the bob is the torque's tangential force::

    F(q, u) = τ × q / ℓ²,      τ = (u₁, u₂, 0),

which is tangent to the sphere (F·q = 0) and enters the forced (Lagrange–d'Alembert) equations
d/dt ∂L/∂v − ∂L/∂q = F + Φ_qᵀλ as the stage force of ``ConstrainedPRK`` (forced RATTLE for
``s = 2``; Ober-Blöbaum, Junge & Marsden 2011).

The upright state x* = (q*, p*) = ((0, 0, ℓ), 0) is a fixed point of the discrete flow (an
unstable one). One step is linearized there with
:meth:`~chetaev.discrete_lagrangian.Method.step_linearization`: the Jacobians A, B of
(q_k, p_k, u) ↦ (q_{k+1}, p_{k+1}) in the returned orthonormal basis E (6 × 4) of the tangent
space of the constraint manifold {Φ = 0, Φ_q ∂H/∂p = 0} at x* (the same space at both nodes of a
fixed point), ``A_E = Eᵀ A E``, ``B_E = Eᵀ B``. The discrete algebraic Riccati equation::

    X = A_Eᵀ X A_E − A_Eᵀ X B_E (R + B_Eᵀ X B_E)⁻¹ B_Eᵀ X A_E + Q

(:func:`scipy.linalg.solve_discrete_are`) gives the gain K = (R + B_Eᵀ X B_E)⁻¹ B_Eᵀ X A_E, and
the feedback ``u_k = −K Eᵀ(x_k − x*)`` is applied to the *nonlinear* integrator from a perturbed
start (:func:`stabilize_upright`).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedPRK,
    ConstrainedSystem,
    InputError,
    MechanicalSystem,
)
from chetaev.rktableaux import lobatto_iiia_iiib
from scipy.linalg import solve_discrete_are

from ..models import spherical_pendulum as _sp

__all__ = [
    "T_FINAL",
    "H",
    "LQRResult",
    "gimbal_force",
    "gimbal_force_derivatives",
    "initial_tilt",
    "inverted_pendulum_system",
    "stabilize_upright",
    "upright_gain",
    "upright_state",
]

#: Step size of the example (the project's choice).
H = 0.05
#: Horizon of the closed-loop simulation (the project's choice).
T_FINAL = 6.0


def gimbal_force(q: Any, v: Any, u: Any, length: float = _sp.LENGTH) -> np.ndarray:
    """F(q, u) = τ × q / ℓ² with τ = (u₁, u₂, 0): ``(..., 3)``, broadcasting over leading axes
    (``v`` is unused: the torque does not depend on the velocity)."""
    q, u = np.asarray(q, dtype=float), np.asarray(u, dtype=float)
    tau = np.concatenate([u, np.zeros((*u.shape[:-1], 1))], axis=-1)
    return np.cross(tau, q) / length**2


def gimbal_force_derivatives(q: Any, v: Any, u: Any, length: float = _sp.LENGTH
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(F_q, F_v, F_u)`` of :func:`gimbal_force`: ``F_q = [τ]ₓ/ℓ²`` (the cross-product
    matrix), ``F_v = 0``, ``F_u = (e₁ × q, e₂ × q)/ℓ²`` (columns)."""
    q, u = np.asarray(q, dtype=float), np.asarray(u, dtype=float)
    batch = np.broadcast_shapes(q.shape[:-1], u.shape[:-1])
    q = np.broadcast_to(q, (*batch, 3))
    u = np.broadcast_to(u, (*batch, 2))
    Fq = np.zeros((*batch, 3, 3))
    Fq[..., 0, 2], Fq[..., 1, 2] = u[..., 1], -u[..., 0]
    Fq[..., 2, 0], Fq[..., 2, 1] = -u[..., 1], u[..., 0]
    Fu = np.zeros((*batch, 3, 2))
    Fu[..., 1, 0], Fu[..., 2, 0] = -q[..., 2], q[..., 1]
    Fu[..., 0, 1], Fu[..., 2, 1] = q[..., 2], -q[..., 0]
    return Fq / length**2, np.zeros((*batch, 3, 3)), Fu / length**2


def inverted_pendulum_system(g: float = _sp.G, length: float = _sp.LENGTH) -> ConstrainedSystem:
    """The spherical pendulum (linear potential ``V = g q_z``) with the gimbal torque
    (``n_controls = 2``); its upright position ``q = (0, 0, ℓ)`` is an unstable equilibrium."""
    V, dV, d2V = _sp.potential("linear", g)
    mech = MechanicalSystem(
        np.eye(3), V, dV, d2V,
        force=lambda q, v, u: gimbal_force(q, v, u, length),
        force_derivatives=lambda q, v, u: gimbal_force_derivatives(q, v, u, length),
        n_controls=2,
    )
    return ConstrainedSystem(mech, _sp.cartesian_system("linear", g, length).constraint)


def upright_state(length: float = _sp.LENGTH) -> np.ndarray:
    """x* = (q*, p*) = (0, 0, ℓ, 0, 0, 0), the upright equilibrium stacked as (q, p)."""
    return np.array([0.0, 0.0, length, 0.0, 0.0, 0.0])


def initial_tilt(tilt: float, azimuth: float = 0.7, spin=(0.3, -0.2, 0.0),
                 length: float = _sp.LENGTH) -> tuple[np.ndarray, np.ndarray]:
    """A perturbed start ``(q0, v0)``: the rod tilted by ``tilt`` (rad) from the upward vertical
    towards the azimuth ``azimuth``, with the angular velocity ``spin`` (``v0 = spin × q0``, so
    that v0 is tangent to the sphere)."""
    q0 = length * np.array([np.sin(tilt) * np.cos(azimuth), np.sin(tilt) * np.sin(azimuth),
                            np.cos(tilt)])
    return q0, np.cross(np.asarray(spin, dtype=float), q0)


def _default_method() -> Any:
    return ConstrainedPRK(lobatto_iiia_iiib(2))


def upright_gain(h: float = H, Q: Any = None, R: Any = None, *, g: float = _sp.G,
                 length: float = _sp.LENGTH, method: Any = None) -> dict[str, Any]:
    """The discrete LQR gain about the upright equilibrium (module docstring).

    Parameters
    ----------
    h : float
        Step size.
    Q, R : array_like, optional
        Riccati weights, ``(4, 4)`` on the tangent coordinates Eᵀ(x − x*) and ``(2, 2)`` on
        the torque (default identities).
    g, length : float
        Gravity and rod length of :func:`inverted_pendulum_system`.
    method : Method, optional
        Default ``ConstrainedPRK(lobatto_iiia_iiib(2))`` (forced RATTLE); any method whose
        ``step_linearization`` returns the constraint tangent basis.

    Returns
    -------
    dict
        ``K`` (2, 4) the gain, ``basis`` E (6, 4), ``next_basis`` the basis the step returns
        at the next node (the same space at the fixed point), ``A``, ``B`` the linearization
        in the tangent coordinates (4, 4), (4, 2), ``X`` the Riccati solution, ``rho_open`` and
        ``rho_closed`` the spectral radii of A and A − BK, ``system`` and ``method``.

    Raises
    ------
    InputError
        ``Q`` or ``R`` of the wrong shape.
    """
    Q = np.eye(4) if Q is None else np.asarray(Q, dtype=float)
    R = np.eye(2) if R is None else np.asarray(R, dtype=float)
    if Q.shape != (4, 4) or R.shape != (2, 2):
        raise InputError(f"`Q` must have shape (4, 4) and `R` shape (2, 2) (weights on the "
                         f"4 tangent coordinates and the 2 torques), got {Q.shape} and "
                         f"{R.shape}.")
    system = inverted_pendulum_system(g, length)
    method = _default_method() if method is None else method
    x_star = upright_state(length)
    u0 = np.zeros(2)
    state = method.initial_state(system, x_star[:3], np.zeros(3), u=u0)
    lin = method.step_linearization(system, state, h, u=u0)
    if lin.basis is None:
        raise InputError(f"`method` ({method.name}) must return the constraint tangent basis "
                         "from step_linearization; use ConstrainedPRK.")
    E = lin.basis
    A, B = E.T @ lin.A @ E, E.T @ lin.B
    X = solve_discrete_are(A, B, Q, R)
    K = np.linalg.solve(R + B.T @ X @ B, B.T @ X @ A)
    return {"K": K, "basis": E, "next_basis": lin.next_basis, "A": A, "B": B, "X": X,
            "rho_open": float(np.max(np.abs(np.linalg.eigvals(A)))),
            "rho_closed": float(np.max(np.abs(np.linalg.eigvals(A - B @ K)))),
            "system": system, "method": method}


@attrs.frozen(eq=False)
class LQRResult:
    """The closed-loop (or open-loop) run of :func:`stabilize_upright`.

    Attributes
    ----------
    K : ndarray (2, 4)
        The LQR gain on the tangent coordinates.
    basis : ndarray (6, 4)
        E, the orthonormal tangent basis at the upright state.
    rho_open, rho_closed : float
        Spectral radii of the linearized step A_E and of A_E − B_E K.
    t : ndarray (N + 1,)
        Times.
    q, p : ndarray (N + 1, 3)
        Positions and momenta of the nonlinear integrator.
    u : ndarray (N, 2)
        The torques applied over the steps.
    deviation : ndarray (N + 1,)
        |x_k − x*|, the distance of (q_k, p_k) from the upright state.
    tilt : ndarray (N + 1,)
        The angle of the rod from the upward vertical (rad).
    """

    K: np.ndarray
    basis: np.ndarray
    rho_open: float
    rho_closed: float
    t: np.ndarray
    q: np.ndarray
    p: np.ndarray
    u: np.ndarray
    deviation: np.ndarray
    tilt: np.ndarray


def stabilize_upright(q0: Any = None, v0: Any = None, *, h: float = H,
                      t_final: float = T_FINAL, Q: Any = None, R: Any = None,
                      feedback: bool = True, g: float = _sp.G, length: float = _sp.LENGTH,
                      method: Any = None) -> LQRResult:
    """Simulate the LQR feedback ``u_k = −K Eᵀ(x_k − x*)`` on the nonlinear integrator.

    Parameters
    ----------
    q0, v0 : array_like (3,), optional
        The perturbed start on the sphere (default :func:`initial_tilt` ``(0.5)``).
    h, t_final : float
        Step size and horizon.
    Q, R, g, length, method
        As for :func:`upright_gain`.
    feedback : bool
        False: the open loop (u = 0), which falls.

    Returns
    -------
    LQRResult
        The gain, the spectral radii and the trajectory.

    Raises
    ------
    InputError
        ``t_final`` shorter than one step; bad ``Q`` or ``R``.
    """
    design = upright_gain(h, Q, R, g=g, length=length, method=method)
    system, method, K, E = design["system"], design["method"], design["K"], design["basis"]
    if q0 is None or v0 is None:
        q0, v0 = initial_tilt(0.5, length=length)
    n_steps = round(float(t_final) / h)
    if n_steps < 1:
        raise InputError(f"`t_final` must be at least one step h = {h:g}, got {t_final!r}.")
    x_star = upright_state(length)
    state = method.initial_state(system, q0, v0, u=np.zeros(2))
    qs, ps, us = [state.q], [state.p], []
    for _ in range(n_steps):
        z = E.T @ (np.concatenate([state.q, state.p]) - x_star)
        u = -K @ z if feedback else np.zeros(2)
        state = method.step(system, state, h, u=u)
        qs.append(state.q)
        ps.append(state.p)
        us.append(u)
    q, p = np.array(qs), np.array(ps)
    deviation = np.linalg.norm(np.concatenate([q, p], axis=-1) - x_star, axis=-1)
    tilt = np.arctan2(np.linalg.norm(q[:, :2], axis=-1), q[:, 2])
    return LQRResult(K=K, basis=E, rho_open=design["rho_open"],
                     rho_closed=design["rho_closed"], t=h * np.arange(n_steps + 1), q=q, p=p,
                     u=np.array(us), deviation=deviation, tilt=tilt)
