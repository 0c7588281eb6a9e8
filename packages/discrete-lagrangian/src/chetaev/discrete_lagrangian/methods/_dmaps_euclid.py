"""Constrained symplectic integrators from discretization maps on vector spaces.

Paper: M. Barbero Liñán, D. Martín de Diego, R. T. Sato Martín de Almagro, "A new
perspective on symplectic integration of constrained mechanical systems via discretization
maps" (2024), §3–§5 (Thm. 4.5 and §5.1–5.2); the docs' pages discretization_maps and
theory/discretization_maps_theory explain the methods.

Every method here is the constrained discrete Hamiltonian map of a discrete Lagrangian
``L_d`` with the holonomic constraint imposed at the two step points and the momenta
projected onto ``Leg(TN)`` (see the docs' discretization-maps page); the per-step kernels are in
``_dmaps_kernels``.

External forces (issue 20). On the Hamiltonian side the force is added to ṗ,
``ṗ = −∇V + F(q, q̇, u) + Gᵀλ``, and evaluated like the rest of the map's equations: through
the cotangent lift of the θ-map (Prop. 3.3), at ``(q_θ, Δ/h)`` with the split ``(1−θ, θ)``
between the two momentum equations (at the endpoints with ``(½, ½)`` for RATTLE, at the
stage point for the baseline). These are the left and right discrete forces
``f_d⁻, f_d⁺`` of :meth:`~chetaev.discrete_lagrangian.DiscreteLagrangian.forces` for the
α = θ (trapezoidal, midpoint) rule, i.e. the forced discrete Euler–Lagrange equations of
``L_d`` (Marsden & West 2001 §3.2), with the control ``u`` held over the step::

    p0 = MΔ/h + h ∂V_d/∂q0 − f_d⁻ − h G(q0)ᵀλ,   φ(q1) = 0
    p1 = MΔ/h − h ∂V_d/∂q1 + f_d⁺ + h G(q1)ᵀλ̃,   G(q1)M⁻¹p1 = 0

``info["work"]`` is the discrete work ``(f_d⁻ + f_d⁺)·Δ/h`` of the step (summed over the
sub-steps of a composition), and ``State.lam`` the multiplier of the forced continuous
equations.

Step linearizations (issue 20): every method here has ``step_linearization`` in the
coordinates (q, p), from its converged Newton matrix by the implicit function theorem
(:func:`node_step_jacobians` for the θ-maps and RATTLE, the joint solve of
:class:`ExtrinsicEulerBA`, the stage solve of :class:`StageConstrainedBaseline`), with the
tangent bases of {φ = 0, G M⁻¹p = 0} for the methods whose nodes lie on that set; a
composition chains its members' linearizations (:class:`ComposedSteps`).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError
from ..core import _dmaps_kernels as K
from ..core._backend import resolve_backend
from ..core._compiled_prk import compiled_step
from ..core._dmaps_problem import euclidean_interface, initial_euclidean_state
from ..core._interface import SystemInterface
from ..core._linearization import (
    LinearizationNotSupportedError,
    StepLinearization,
    tangent_fields,
    tangent_linearization,
)
from ..core._method import Method
from ..core._solver import NewtonOptions, newton_solve, raise_unless_converged
from ..core._state import State
from ._checks import is_newton_options
from ._constrained_prk import _forced_multiplier
from ._del import DiscreteLagrangian

__all__ = [
    "ComposedSteps",
    "Composition",
    "DiscretizationMap",
    "DiscretizationMapMethod",
    "ExtrinsicEulerBA",
    "Rattle",
    "StageConstrainedBaseline",
    "compose",
    "euler_ba",
    "rattle",
    "triple_jump",
]

# Newton tolerance (relative to max(1, |M||q|)): the constraint residual φ(q1) is one of the
# Phase-1 equations, so this is the accuracy to which the points lie on N (paper §5.1–5.2).
_TOL = 1e-14
_HINT = "halve h, or increase NewtonOptions(max_iter=...)"


def _theta_converter(value: Any) -> float:
    if isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value):
        raise InputError(f"`theta` must be a real number in [0, 1], got {value!r}.")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"`theta` must be a real number in [0, 1], got {value!r}.") from None


def _theta_validator(_inst: Any, _attr: Any, value: float) -> None:
    if not (np.isfinite(value) and 0.0 <= value <= 1.0):
        raise InputError(
            f"`theta` must be a number in [0, 1] (0: Euler A, 1: Euler B, 0.5: midpoint), "
            f"got {value!r}."
        )


# --------------------------------------------------------------------------------------------
# The θ discretization map (paper §3; Prop. 3.3, Cor. 3.4)
# --------------------------------------------------------------------------------------------
@attrs.frozen
class DiscretizationMap:
    """The θ-family of discretization maps on a vector space (paper Ex. 3.2, paper §3).

    ``R_d(q, v) = (q − θ v, q + (1 − θ) v)``: θ = 0 is the explicit-Euler map of the
    constrained symplectic Euler A method, θ = 1 that of Euler B, θ = ½ the midpoint map.
    It satisfies ``R_d(0_q) = (q, q)`` and ``T R² − T R¹ = Id`` at the zero section (the
    definition in §3 of the paper, with the minus sign lost by the OCR restored).

    Parameters
    ----------
    theta : float
        The parameter θ ∈ [0, 1] (called α in the paper).
    """

    theta: float = attrs.field(converter=_theta_converter, validator=_theta_validator)

    def forward(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``R_d(q, v)`` → ``(q0, q1)``."""
        return K.theta_map_forward(self.theta, np.asarray(q, float), np.asarray(v, float))

    def inverse(self, q0: np.ndarray, q1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``R_d^{-1}(q0, q1) = ((1 − θ) q0 + θ q1, q1 − q0)``."""
        return K.theta_map_inverse(self.theta, np.asarray(q0, float), np.asarray(q1, float))

    def scaled(self, h: float):
        """The scaled map ``R_d^h(q, v) = R_d(q, h v)`` as a callable."""
        return lambda q, v: self.forward(q, h * np.asarray(v, float))

    def adjoint(self) -> DiscretizationMap:
        """``R_d^*(v) = I_M(R_d(−v))``; for the θ-family θ ↦ 1 − θ."""
        return DiscretizationMap(1.0 - self.theta)

    @property
    def is_symmetric(self) -> bool:
        """Whether ``R_d^* = R_d`` (only θ = ½)."""
        return self.theta == 0.5

    def cotangent_lift(self, q, p, qdot, pdot):
        """Cotangent lift ``R_d^{T*}: TT*Q → T*Q × T*Q`` (Prop. 3.3, Cor. 3.4).

        ``(q, p, q̇, ṗ) ↦ (q − θq̇, p − (1−θ)ṗ ; q + (1−θ)q̇, p + θṗ)``; a symplectomorphism
        from ``(TT*Q, d_Tω_Q)`` to ``(T*Q × T*Q, Ω₁₂)``.
        """
        args = (np.asarray(a, float) for a in (q, p, qdot, pdot))
        return K.theta_map_cotangent_lift(self.theta, *args)

    def cotangent_lift_inverse(self, q0, p0, q1, p1, h: float = 1.0):
        """``(1/h)(R_d^{T*})^{-1}(q0, p0; q1, p1)`` (paper Prop. 3.3, Cor. 3.4) → ``(q, p, q̇,
        ṗ)``."""
        q0, p0, q1, p1 = (np.asarray(a, float) for a in (q0, p0, q1, p1))
        t = self.theta
        return (
            (1.0 - t) * q0 + t * q1,
            t * p0 + (1.0 - t) * p1,
            (q1 - q0) / h,
            (p1 - p0) / h,
        )

    def discrete_lagrangian(self, lagrangian, h: float):
        """``L_d^h(q0, q1) = h L̃((R_d^h)^{-1}(q0, q1))`` (see the docs' discretization-maps page)
        for
        ``lagrangian(q, v)``."""

        def Ld(q0, q1):
            q, w = self.inverse(q0, q1)
            return h * lagrangian(q, w / h)

        return Ld


# --------------------------------------------------------------------------------------------
# The generic node-constrained step (see the docs' discretization-maps page)
# --------------------------------------------------------------------------------------------
def _solve(fun, jac, x0, options, state, scale=None):
    res = newton_solve(fun, x0, jac=jac, options=options, scale=scale)
    return raise_unless_converged(res, state, _HINT)


def _node_multiplier(iface, q1, v1, forcing=None):
    """The multiplier reported for node k: the consistent continuous λ(q_k, v_k).

    The discrete multipliers of the paper carry arbitrary factors h, h/2 and a split between the two
    nodes (their sign and scale are a convention); they are kept in ``State.info`` (``lam_left``,
    ``lam_right``), while ``State.lam`` is the O(h^p)-accurate continuous multiplier at the discrete
    point, comparable across methods. With ``forcing``, that of the forced equations at the
    step's control.
    """
    lam = np.asarray(iface.multiplier(q1, v1), dtype=float)
    if forcing is not None:
        lam = _forced_multiplier(forcing.system, q1, v1, lam, forcing.u)
    return lam


@attrs.frozen
class _Forcing:
    """The discrete forces of one step (module docstring): the system (a forced
    ``ConstrainedSystem``), the step's control and the quadrature's discrete Lagrangian."""

    system: Any
    u: Any
    ld: DiscreteLagrangian

    def forces(self, q0, q1, h):
        """``(f_d⁻, f_d⁺)`` ``(..., m)``."""
        return self.ld.forces(self.system, q0, q1, h, self.u)

    def minus_dq1(self, q0, q1, h):
        """``∂f_d⁻/∂q1`` ``(..., m, m)``."""
        return self.ld.force_minus_dq1(self.system, q0, q1, h, self.u)

    def work(self, q0, q1, h):
        """``(f_d⁻ + f_d⁺)·(q1 − q0)/h`` ``(...)``."""
        fm, fp = self.forces(q0, q1, h)
        return np.einsum("...i,...i->...", fm + fp, (q1 - q0) / h)


def _forcing(system, u, ld: DiscreteLagrangian):
    """The step's :class:`_Forcing`, or None for an unforced system."""
    if getattr(system, "has_force", False) is not True:
        return None
    return _Forcing(system, u, ld)


def _ld_of(quad) -> DiscreteLagrangian:
    """The discrete Lagrangian whose force quadrature matches the potential quadrature."""
    if quad.theta is None:
        return DiscreteLagrangian("trapezoidal")
    return DiscreteLagrangian("alpha", quad.theta)


def _scale(iface, q0: np.ndarray) -> np.ndarray:
    """Residual scale of Phase 1: ``max(1, |M|·|q0|)`` per batch entry."""
    return np.maximum(1.0, np.max(np.abs(iface.mass)) * np.max(np.abs(q0), axis=-1))


def _info(res) -> dict:
    return {
        "newton_iterations": int(np.max(res.iterations)),
        "residual": float(np.max(res.residual)),
    }


def node_step(
    iface: SystemInterface, quad, state: State, h: float, options: NewtonOptions,
    nullspace: bool = False, forcing: _Forcing | None = None,
) -> State:
    """One step of the constrained discrete Hamiltonian map of ``L_d = ΔᵀMΔ/2h − h V_d``.

    Phase 1 solves ``p0 = MΔ/h + h ∂V_d/∂q0 − h G(q0)ᵀλ``, ``φ(q1) = 0`` for ``(q1, λ)``
    (or, with ``nullspace=True``, the multiplier-free form (4.7) for ``q1``); Phase 2 sets
    ``p1 = MΔ/h − h ∂V_d/∂q1 + h G(q1)ᵀλ̃`` with ``G(q1)M⁻¹p1 = 0`` (the docs' discretization-maps
    page;
    paper §5.1–5.2). ``forcing``: the forced equations (module docstring).
    """
    q0, p0 = state.q, state.p
    M, Minv = iface.mass, iface.mass_inv
    grad_V, hess_V = iface.potential_grad, iface.potential_hess
    phi, jac = iface.holonomic_phi, iface.holonomic_jacobian
    G0 = jac(q0)
    q_guess = q0 + h * K._mv(Minv, p0)
    scale = _scale(iface, q0)
    m = q0.shape[-1]
    if nullspace:
        P0 = K.nullspace_basis(G0)

        def fun(x):
            r = K.phase1_nullspace_residual(x, q0, p0, h, M, quad, grad_V, P0, phi)
            if forcing is not None:  # r1 − h f_d⁻, projected by P0ᵀ
                fm = forcing.forces(q0, x, h)[0]
                r = r - np.concatenate([np.einsum("...ia,...i->...a", P0, h * fm),
                                        np.zeros_like(r[..., P0.shape[-1]:])], axis=-1)
            return r

        def jac1(x):
            J = K.phase1_nullspace_jacobian(x, q0, h, M, quad, hess_V, P0, jac)
            if forcing is not None:
                dF = np.einsum("...ia,...ij->...aj", P0, h * forcing.minus_dq1(q0, x, h))
                J = J.copy()
                J[..., : P0.shape[-1], :] -= dF
            return J

        res = _solve(fun, jac1, q_guess, options, state, scale)
        q1 = res.x
        D2 = K.right_momentum(q0, q1, h, M, quad, grad_V)
        if forcing is not None:
            D2 = D2 + forcing.forces(q0, q1, h)[1]
        p1 = K.nullspace_momentum(D2, K.nullspace_basis(jac(q1)), M)
        lam = None
    else:
        k = G0.shape[-2]
        x0 = np.concatenate([q_guess, np.zeros((*q0.shape[:-1], k))], axis=-1)

        def fun(x):
            r = K.phase1_residual(x, q0, p0, h, M, quad, grad_V, G0, phi)
            if forcing is not None:  # r1 − h f_d⁻
                fm = forcing.forces(q0, x[..., :m], h)[0]
                r = r - np.concatenate([h * fm, np.zeros_like(r[..., m:])], axis=-1)
            return r

        def jac1(x):
            J = K.phase1_jacobian(x, q0, h, M, quad, hess_V, G0, jac)
            if forcing is not None:
                J = J.copy()
                J[..., :m, :m] -= h * forcing.minus_dq1(q0, x[..., :m], h)
            return J

        res = _solve(fun, jac1, x0, options, state, scale)
        q1 = res.x[..., :m]
        lam_left = res.x[..., m:] / (h * h)
        p1s = K.right_momentum(q0, q1, h, M, quad, grad_V)
        if forcing is not None:
            p1s = p1s + forcing.forces(q0, q1, h)[1]
        p1, mu = K.project_momentum(p1s, jac(q1), Minv)
        lam = (lam_left, mu / h)
    info = _info(res)
    if lam is not None:
        info["lam_left"], info["lam_right"] = lam
    if forcing is not None:
        info["work"] = forcing.work(q0, q1, h)
    v1 = K._mv(Minv, p1)
    return attrs.evolve(state, t=state.t + h, q=q1, p=p1, v=v1, n=state.n + 1, info=info,
                        lam=_node_multiplier(iface, q1, v1, forcing))


def _batch_eye(batch: tuple, n: int) -> np.ndarray:
    return np.broadcast_to(np.eye(n), (*batch, n, n))


def _force_partials(system: Any, ld: DiscreteLagrangian, q0, q1, h: float, u: Any,
                    batch: tuple, n: int) -> tuple:
    """The discrete forces' partials ``(dm0, dm1, dmu, dp0, dp1, dpu)``
    (:meth:`DiscreteLagrangian.force_partials`), zeros for an unforced system."""
    nu = int(getattr(system, "n_controls", 0) or 0)
    if getattr(system, "has_force", False) is not True:
        z, zu = np.zeros((*batch, n, n)), np.zeros((*batch, n, nu))
        return z, z, zu, z, z, zu
    return ld.force_partials(system, q0, q1, h, u)


def node_step_jacobians(iface: SystemInterface, system: Any, quad, state: State, new: State,
                        h: float, u: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)`` of :func:`node_step` in (q, p) by the implicit function theorem (issue 20).

    Phase 1 is R(q1, ν; q0, p0, u) = 0 with R = [h(−D1 L_d − f_d⁻ − p0) − G(q0)ᵀν, φ(q1)]
    (paper (4.4), :func:`~chetaev.discrete_lagrangian.core._dmaps_kernels.phase1_residual`,
    the forced form of the module docstring), J = ∂R/∂(q1, ν) its Newton matrix
    (:func:`~chetaev.discrete_lagrangian.core._dmaps_kernels.phase1_jacobian` with the
    force's ∂f_d⁻/∂q1), and

        ∂R/∂q0 = [−h(D11 L_d + ∂f_d⁻/∂q0) − Σ_a ν_a ∇²φ_a(q0), 0],
        ∂R/∂p0 = [−h I, 0],   ∂R/∂u = [−h ∂f_d⁻/∂u, 0],

    so d(q1, ν) = −J⁻¹ ∂R/∂(q0, p0, u). The null-space form (4.7) solves the same map; its
    multiplier is recovered from G(q0)ᵀν = h(−D1 L_d − f_d⁻ − p0) (least squares, exact at
    the solution). Phase 2: p1* = D2 L_d + f_d⁺, chained through
    :func:`~chetaev.discrete_lagrangian.core._dmaps_kernels.project_momentum_jacobian`.
    L_d is the method's quadrature as a
    :class:`DiscreteLagrangian` (θ rule or trapezoidal, :func:`_ld_of`).
    """
    q0, p0 = np.asarray(state.q, dtype=float), np.asarray(state.p, dtype=float)
    q1 = np.asarray(new.q, dtype=float)
    n = q0.shape[-1]
    ld = _ld_of(quad)
    batch = np.broadcast_shapes(q0.shape[:-1], p0.shape[:-1], q1.shape[:-1])
    dm0, dm1, dmu, dp0, dp1, dpu = _force_partials(system, ld, q0, q1, h, u, batch, n)
    nu = dmu.shape[-1]
    G0 = iface.holonomic_jacobian(q0)
    k = G0.shape[-2]
    r1 = -h * (ld.D1(system, q0, q1, h) + p0)
    if getattr(system, "has_force", False) is True:
        r1 = r1 - h * ld.forces(system, q0, q1, h, u)[0]
    G0T = np.swapaxes(G0, -1, -2)
    nu_ = np.linalg.solve(G0 @ G0T, G0 @ r1[..., None])[..., 0]  # G0ᵀν = r1 (least squares)
    x = np.concatenate([q1, np.broadcast_to(nu_, (*batch, k))], axis=-1)
    J = K.phase1_jacobian(x, q0, h, iface.mass, quad, iface.potential_hess, G0,
                          iface.holonomic_jacobian)
    J = np.array(np.broadcast_to(J, (*batch, n + k, n + k)))
    J[..., :n, :n] -= h * dm1
    H0 = np.asarray(iface.holonomic_hessian(q0), dtype=float)
    Rq0 = -h * (ld.D11(system, q0, q1, h) + dm0) - np.einsum("...aij,...a->...ij", H0, nu_)
    top = np.concatenate([np.broadcast_to(Rq0, (*batch, n, n)), -h * _batch_eye(batch, n),
                          np.broadcast_to(-h * dmu, (*batch, n, nu))], axis=-1)
    rhs = np.concatenate([top, np.zeros((*batch, k, 2 * n + nu))], axis=-2)
    dq1 = -np.linalg.solve(J, rhs)[..., :n, :]  # (..., n, 2n + nu)
    p1s = ld.D2(system, q0, q1, h)
    d12 = ld.D12(system, q0, q1, h)
    dp1s = (ld.D22(system, q0, q1, h) + dp1) @ dq1
    dp1s[..., :n] += np.swapaxes(d12, -1, -2) + dp0
    if getattr(system, "has_force", False) is True:
        p1s = p1s + ld.forces(system, q0, q1, h, u)[1]
        dp1s[..., 2 * n:] += dpu
    _, dp1 = K.project_momentum_jacobian(p1s, iface.holonomic_jacobian(q1),
                                         np.asarray(iface.holonomic_hessian(q1), dtype=float),
                                         iface.mass_inv, dq1, dp1s)
    full = np.concatenate([dq1, dp1], axis=-2)
    return full[..., : 2 * n], full[..., 2 * n:]


def _compiled_step(method: Method, system: Any, state: State, h: float,
                   u: Any) -> State | None:
    """The compiled step of ``method`` (issue 17; :mod:`._compiled_dmaps`) when it runs
    compiled on ``system`` (unforced, ``resolve_backend``), else None (the numpy step)."""
    if u is not None or getattr(system, "has_force", False) is True:
        return None
    plan = resolve_backend(method, system)
    return None if plan is None else compiled_step(plan, state, h)


class _EuclideanMethod(Method):
    """Shared ``initial_state`` for the vector-space methods."""

    __slots__ = ()
    supports_forces = True

    def _initial_state_impl(self, system, q0, v0, t0: float = 0.0, u: Any = None) -> State:
        """Check ``(q0, v0) ∈ TN`` and return the state with ``p0 = M v0 ∈ Leg(TN)`` (and
        λ₀ of the forced equations at the control ``u`` for a forced system)."""
        state = initial_euclidean_state(system, q0, v0, t0)
        if getattr(system, "has_force", False) is True and (
                u is not None or not system.n_controls):
            lam = _forced_multiplier(system, state.q, state.v, state.lam, u)
            state = attrs.evolve(state, lam=lam)
        return state

    @property
    def guarantees(self) -> dict[str, float]:
        """Constraint levels held at every node and the tolerance they are solved to (the
        post-condition :func:`~chetaev.discrete_lagrangian.integrate` checks)."""
        return {"position": self.newton.tol, "velocity": self.newton.tol}

    def _linearization(self, system: Any, state: State, new: State, A: np.ndarray,
                       B: np.ndarray) -> StepLinearization:
        """``StepLinearization`` in (q, p) with the tangent bases of {φ = 0, G M⁻¹p = 0}
        (:func:`~chetaev.discrete_lagrangian.core._linearization.tangent_linearization`)."""
        return StepLinearization(state=new, A=A, B=B,
                                 **tangent_linearization(system, state, new, A, B))


@attrs.frozen
class DiscretizationMapMethod(_EuclideanMethod):
    """Constrained symplectic integrator from the θ discretization map (paper Thm. 4.5).

    The discrete points lie exactly on N (``φ(q_k) = 0`` is an equation of every step), the
    momenta are projected onto ``Leg(TN)`` (``G(q_k)M⁻¹p_k = 0``), and the map is symplectic
    on ``Leg(TN) ≅ T*N``.  Order 1 for θ ≠ ½ (θ = 0: constrained symplectic Euler A, §5.1.1;
    θ = 1: Euler B, (5.1)–(5.6), the "order-1 RATTLE"), order 2 and symmetric for θ = ½
    (constrained midpoint, §5.1.3).  Euler A and B are mutually adjoint.

    Equations (paper §5.1; paper (4.4)–(4.5))::

        p0 = MΔ/h + h(1−θ)∇V(q_θ) − h G(q0)ᵀλ,   φ(q1) = 0
        p1 = MΔ/h − hθ∇V(q_θ) + h G(q1)ᵀλ̃,       G(q1)M⁻¹p1 = 0

    with ``q_θ = (1−θ)q0 + θq1``.  ``nullspace=True`` solves the multiplier-free form
    (4.7)–(4.9) of §4.2 instead (same result to solver tolerance).

    Compiled backend (``backend=``, issue 17; :mod:`._compiled_dmaps`): on an unforced
    system from ``symbolic.from_lagrangian`` with a holonomic constraint and a constant mass
    matrix, the whole step runs in numba, both forms: Phase 1 ((4.4), or (4.7) with a
    Householder basis of ``ker G(q0)``) with the same unknowns, initial guess
    ``q0 + hM⁻¹p0`` and stopping rule as the numpy step, then the projection onto
    ``Leg(TN)`` ((4.5); (4.9) gives the same momentum) and the continuous multiplier.
    Forced systems and ``NewtonOptions(finite_differences=True)`` run on numpy.

    Parameters
    ----------
    theta : float
        θ ∈ [0, 1].
    nullspace : bool
        Use the discrete null-space form (no multipliers).
    newton : NewtonOptions
        Options of the Phase-1 Newton solve.
    """

    theta: float = attrs.field(converter=_theta_converter, validator=_theta_validator)
    nullspace: bool = False
    newton: NewtonOptions = attrs.field(factory=lambda: NewtonOptions(tol=_TOL),
                                        validator=is_newton_options)

    @property
    def map(self) -> DiscretizationMap:
        return DiscretizationMap(self.theta)

    @property
    def order(self) -> int:
        return 2 if self.theta == 0.5 else 1

    @property
    def symmetric(self) -> bool:
        return self.theta == 0.5

    @property
    def name(self) -> str:
        base = {0.0: "constrained Euler A", 1.0: "constrained Euler B",
                0.5: "constrained midpoint"}.get(self.theta, f"constrained theta={self.theta:g}")
        return base + (" (null space)" if self.nullspace else "")

    def adjoint(self) -> DiscretizationMapMethod:
        """The adjoint method, from the adjoint map θ ↦ 1 − θ."""
        return self.evolve(theta=1.0 - self.theta)

    #: A compiled (numba) step of both forms (issue 17; :mod:`._compiled_dmaps`).
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: SystemInterface) -> tuple[str, Any]:
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled_dmaps`)."""
        from ._compiled_dmaps import compiled_plan

        return compiled_plan("node", self.theta, self.nullspace, self.newton, system, iface)

    def _step_impl(self, system, state: State, h: float, u: Any = None) -> State:
        compiled = _compiled_step(self, system, state, h, u)
        if compiled is not None:
            return compiled
        iface = euclidean_interface(system)
        quad = K.ThetaQuadrature(self.theta)
        return node_step(iface, quad, state, h, self.newton, nullspace=self.nullspace,
                         forcing=_forcing(system, u, _ld_of(quad)))

    def _step_linearization_impl(self, system, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) in (q, p) and in the tangent bases (:func:`node_step_jacobians`)."""
        A, B = node_step_jacobians(euclidean_interface(system), system,
                                   K.ThetaQuadrature(self.theta), state, new, h, u)
        return self._linearization(system, state, new, A, B)


@attrs.frozen
class Rattle(_EuclideanMethod):
    """RATTLE (paper (5.16)–(5.18), Ex. 5.1; Andersen 1983).

    Symmetric, order 2, symplectic on ``Leg(TN)``, constraints exact at the step points.
    It is Euler A(h/2) followed by Euler B(h/2) with the *intermediate constraint dropped*
    (paper §5.2, Ex. 5.1), i.e. the constrained Hamiltonian map of the trapezoidal
    ``L_d = ΔᵀMΔ/2h − (h/2)(V(q0) + V(q1))``::

        p0 = MΔ/h + (h/2)∇V(q0) − (h/2)G(q0)ᵀλ,   φ(q1) = 0
        p1 = MΔ/h − (h/2)∇V(q1) + (h/2)G(q1)ᵀλ̄,   G(q1)M⁻¹p1 = 0

    It equals the constrained Lobatto IIIA–IIIB 2-stage method (Jay 1996).  The literal
    composition of the paper's Euler A and B submanifolds is a different method: see
    :func:`euler_ba`.

    Compiled backend (``backend=``, issue 17; :mod:`._compiled_dmaps`): the step
    (5.16)–(5.18) runs in numba on the configurations of :class:`DiscretizationMapMethod`'s
    compiled step (the same node step with the trapezoidal ``V_d``), ``nullspace`` either
    way.
    """

    nullspace: bool = False
    newton: NewtonOptions = attrs.field(factory=lambda: NewtonOptions(tol=_TOL),
                                        validator=is_newton_options)
    order = 2
    symmetric = True
    name = "RATTLE"

    #: A compiled (numba) step of both forms (issue 17; :mod:`._compiled_dmaps`).
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: SystemInterface) -> tuple[str, Any]:
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled_dmaps`)."""
        from ._compiled_dmaps import compiled_plan

        return compiled_plan("node", None, self.nullspace, self.newton, system, iface)

    def _step_impl(self, system, state: State, h: float, u: Any = None) -> State:
        compiled = _compiled_step(self, system, state, h, u)
        if compiled is not None:
            return compiled
        iface = euclidean_interface(system)
        quad = K.TrapezoidQuadrature()
        return node_step(iface, quad, state, h, self.newton, nullspace=self.nullspace,
                         forcing=_forcing(system, u, _ld_of(quad)))

    def _step_linearization_impl(self, system, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) in (q, p) and in the tangent bases (:func:`node_step_jacobians`)."""
        A, B = node_step_jacobians(euclidean_interface(system), system,
                                   K.TrapezoidQuadrature(), state, new, h, u)
        return self._linearization(system, state, new, A, B)


def rattle(newton: NewtonOptions | None = None) -> Rattle:
    """RATTLE (5.16)–(5.18): see :class:`Rattle`."""
    return Rattle(newton=newton if newton is not None else NewtonOptions(tol=_TOL))


# --------------------------------------------------------------------------------------------
# Composition (paper §5.2, Ex. 5.1)
# --------------------------------------------------------------------------------------------
_TRIPLE_JUMP = (
    1.0 / (2.0 - 2.0 ** (1.0 / 3.0)),
    -(2.0 ** (1.0 / 3.0)) / (2.0 - 2.0 ** (1.0 / 3.0)),
    1.0 / (2.0 - 2.0 ** (1.0 / 3.0)),
)


def _has_newton(method: Method) -> bool:
    """Whether ``method`` is an attrs class with a ``newton`` field."""
    return attrs.has(type(method)) and "newton" in attrs.fields_dict(type(method))


class ComposedSteps(Method):
    """The step and the step linearization of a composition ``Ψ_{c_r h} ∘ … ∘ Ψ_{c_1 h}``
    (paper (5.7)–(5.10); HLW §II.4), written once for :class:`Composition` and
    ``chetaev.gni.Composition``: a subclass supplies its ``methods`` and their step
    fractions as :meth:`_factors`.

    Step: the members are applied in order, the j-th with step ``c_j h`` and the control ``u``
    of the step (held over the whole step); ``info`` sums the Newton iterations and the
    discrete works (``"work"``), keeps the largest residual, and has ``"backend": "numba"``
    when every sub-step ran compiled (so ``integrate`` reports ``stats["backend"] ==
    "numba"`` for a composition of compiled members).

    Linearization (issue 20): the chain rule over the sub-steps,
    ``A = A_r ⋯ A_1``, ``B = Σ_j A_r ⋯ A_{j+1} B_j`` (u held over the step), each ``(A_j,
    B_j)`` the member's own ``step_linearization`` at its sub-step (implicit function
    theorem on its Newton matrix), in the members' common ``coordinates`` (which cover the
    whole state the step reads: e.g. the GNI's "(q, v, lam)", its carried multiplier
    included). With a constraint, ``basis`` is the first member's and ``next_basis`` the last
    member's.
    """

    __slots__ = ()

    def _factors(self) -> tuple:
        """``((method, fraction), ...)`` in the order of application: the subclass's
        ``_members()``, each member with the composition's ``newton`` options when given
        (members without a ``newton`` field keep theirs) and its own ``backend``."""
        newton = getattr(self, "newton", None)
        if newton is None:
            return self._members()
        return tuple((m.evolve(newton=newton) if _has_newton(m) else m, c)
                     for m, c in self._members())

    @abc.abstractmethod
    def _members(self) -> tuple:
        """``((method, fraction), ...)`` as constructed."""

    @property
    def supports_forces(self) -> bool:  # type: ignore[override]
        """True when every factor takes external forces (the control of the step is passed
        to every factor, held constant over the whole step)."""
        return all(m.supports_forces for m, _ in self._factors())

    def _initial_state_impl(self, system, q0, v0, t0: float = 0.0, u: Any = None) -> State:
        return self._factors()[0][0].initial_state(system, q0, v0, t0, u=u)

    def _step_impl(self, system, state: State, h: float, u: Any = None) -> State:
        s = state
        iters = 0
        resid = None
        work = None
        compiled = True
        for method, c in self._factors():
            s = method.step(system, attrs.evolve(s, n=state.n), c * h, u=u)
            compiled = compiled and s.info.get("backend") == "numba"
            iters += int(np.max(s.info.get("newton_iterations", 0)))
            r = s.info.get("residual")
            if r is not None:
                resid = float(r) if resid is None else max(resid, float(r))
            if "work" in s.info:
                work = s.info["work"] if work is None else work + s.info["work"]
        info = dict(s.info)
        info["newton_iterations"] = iters
        if resid is not None:
            info["residual"] = resid
        if work is not None:
            info["work"] = work
        # "numba" when every sub-step ran compiled (the driver's stats["backend"])
        info.pop("backend", None)
        if compiled:
            info["backend"] = "numba"
        return attrs.evolve(s, t=state.t + h, n=state.n + 1, info=info)

    def _step_linearization_impl(self, system, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) of the composed step by the chain rule (class docstring)."""
        s = state
        A = B = E0 = E1 = coords = None
        kinds = set()
        for method, c in self._factors():
            sub = attrs.evolve(s, n=state.n)
            lin = method.step_linearization(system, sub, c * h, u=u)
            kinds.add(lin.coordinates)
            if len(kinds) > 1:
                raise LinearizationNotSupportedError(
                    f"{self.name}: the members linearize in different coordinates "
                    f"({sorted(kinds)}); compose methods of one state type."
                )
            Aj, Bj = lin.A, lin.B
            if A is None:
                A, B, coords, E0 = Aj, Bj, lin.coordinates, lin.basis
            else:
                A, B = Aj @ A, Aj @ B + Bj
            E1 = lin.next_basis
            s = lin.state
        fields = {} if E0 is None or E1 is None else tangent_fields(E0, E1, A, B)
        return StepLinearization(state=new, A=A, B=B, coordinates=coords, **fields)


@attrs.frozen
class Composition(ComposedSteps):
    """Composition ``Ψ_{γ_s h} ∘ … ∘ Ψ_{γ_1 h}`` of one-step methods (paper (5.7)–(5.10)).

    The methods are applied in the order given, the i-th with step ``weights[i]·h``.  Each
    factor projects its momentum onto ``Leg(TN)``; by Lemma 4.3 this makes the extrinsic
    composition (5.7) and the intrinsic one (5.8) the same map (paper §5.2, Ex. 5.1), so a
    single mechanism serves both. Step and linearization: :class:`ComposedSteps`.

    ``newton``: Newton options given to every member (each member's ``newton`` replaced;
    None, the default: the members' own).
    """

    methods: tuple = attrs.field(converter=tuple)
    weights: tuple = attrs.field(converter=lambda w: tuple(float(x) for x in w))
    order: int | None = None
    symmetric: bool = False
    name: str = "composition"
    newton: NewtonOptions | None = attrs.field(default=None, validator=attrs.validators.optional(
        is_newton_options))

    def __attrs_post_init__(self) -> None:
        if len(self.methods) == 0:
            raise InputError("compose() needs at least one method, got none.")
        if len(self.weights) != len(self.methods):
            raise InputError(
                f"compose(): got {len(self.methods)} methods but {len(self.weights)} weights; "
                f"pass one weight per method (or weights=None for equal weights)."
            )
        if not np.all(np.isfinite(self.weights)) or abs(sum(self.weights) - 1.0) > 1e-12:
            raise InputError(
                f"compose(): the weights must be finite and sum to 1 (consistency), got "
                f"{self.weights} with sum {sum(self.weights)!r}."
            )

    def _members(self) -> tuple:
        return tuple(zip(self.methods, self.weights))

    @property
    def guarantees(self) -> dict[str, float]:
        """The levels every factor guarantees, at the loosest of their tolerances."""
        claims = [m.guarantees or {} for m in self.methods]
        return {level: max(c[level] for c in claims)
                for level in ("position", "velocity") if all(level in c for c in claims)}


def compose(*methods, weights: Sequence[float] | None = None, order: int | None = None,
            name: str | None = None) -> Composition:
    """Compose methods: apply them in the order given, the i-th with step ``weights[i]·h``.

    Parameters
    ----------
    *methods
        Integrators (:class:`~chetaev.discrete_lagrangian.Method` instances).
    weights : sequence of float, optional
        Step fractions (summing to 1); equal weights ``1/len(methods)`` by default.
    order : int, optional
        The order of the composition, if known (reported as ``.order``).
    name : str, optional
        A display name.
    """
    if weights is None:
        weights = [1.0 / max(len(methods), 1)] * len(methods)
    w = tuple(float(x) for x in weights)
    palindromic = len(methods) > 0 and all(
        a == b for a, b in zip(methods, reversed(methods))
    ) and np.allclose(w, w[::-1])
    symmetric = bool(palindromic and all(m.symmetric for m in methods))
    return Composition(methods=methods, weights=w, order=order, symmetric=symmetric,
                       name=name or "composition(" + ", ".join(
                           m.name for m in methods) + ")")


def triple_jump(method) -> Composition:
    """Triple-jump composition ``Ψ_{γ1 h}∘Ψ_{γ2 h}∘Ψ_{γ1 h}`` (paper §5.2; HLW §II.4).

    ``γ1 = 1/(2 − 2^{1/3})``, ``γ2 = −2^{1/3}/(2 − 2^{1/3})``.  Lifts a symmetric method of
    order 2 to order 4 (paper §5.2, Ex. 5.1, "Higher order").  The sub-steps run compiled
    where ``method`` does (e.g. ``triple_jump(rattle())`` on a system with kernels).

    Raises
    ------
    InputError
        If ``method`` declares ``symmetric = False`` (the triple jump of a non-symmetric
        method such as Euler A does not reach order 4).
    """
    if method.symmetric is False:
        raise InputError(
            f"triple_jump() needs a symmetric method of order 2 (midpoint, RATTLE, euler_ba()), "
            f"but {method.name!r} is not symmetric; its triple jump would "
            f"not reach order 4."
        )
    base = method.order
    return Composition(
        methods=(method, method, method), weights=_TRIPLE_JUMP,
        order=(base + 2) if base == 2 else None, symmetric=True,
        name=f"triple jump of {method.name}",
    )


def euler_ba(nullspace: bool = False, newton: NewtonOptions | None = None) -> Composition:
    """The literal composition Euler B(h/2) ∘ Euler A(h/2) of Ex. 5.1 (paper §5.2, Ex. 5.1, "B∘A").

    Symmetric, order 2, with the intermediate point ``q_{1/2}`` on N; each half step runs
    compiled where its member does (``backend=`` of the members, issue 17; the composition
    then reports ``"backend": "numba"``).  It is *not* RATTLE
    (RATTLE drops the intermediate constraint, see :class:`Rattle`); it is the Euclidean case
    of the paper's Lie "2-stage Lobatto IIIA–IIIB" method (6.4)–(6.7).  Its extrinsic form,
    one joint solve without the intermediate projection, is :class:`ExtrinsicEulerBA`.
    """
    opts = newton if newton is not None else NewtonOptions(tol=_TOL)
    A = DiscretizationMapMethod(0.0, nullspace=nullspace, newton=opts)
    B = DiscretizationMapMethod(1.0, nullspace=nullspace, newton=opts)
    return Composition(methods=(A, B), weights=(0.5, 0.5), order=2, symmetric=True,
                       name="Euler B(h/2) o Euler A(h/2) (literal composition)")


@attrs.frozen
class ExtrinsicEulerBA(_EuclideanMethod):
    """Euler B(h/2)∘Euler A(h/2) as the extrinsic composition (5.7): one joint solve.

    Unknowns ``(q_{1/2}, q1, λ, μ)``; equations (paper §5.2, Ex. 5.1, the "B∘A" system)::

        p0 = M(q_{1/2}−q0)/(h/2) + (h/2)∇V(q0) − (h/2)G(q0)ᵀλ
        M(2q_{1/2} − q0 − q1)/(h/2) = −(h/2) G(q_{1/2})ᵀμ,   φ(q_{1/2}) = 0,   φ(q1) = 0

    then ``p1 = M(q1−q_{1/2})/(h/2) − (h/2)∇V(q1)`` projected onto ``Leg(TN)``.  No momentum
    is formed (or projected) at ``q_{1/2}``.  Equal to :func:`euler_ba` (Lemma 4.3; see
    the errata on the docs' theory page: (5.7) and (5.8) coincide on T*N).

    Compiled backend (``backend=``, issue 17; :mod:`._compiled_dmaps`): on an unforced
    system from ``symbolic.from_lagrangian`` with a holonomic constraint and a constant mass
    matrix, the joint solve of (5.7) (same unknowns, analytic Jacobian, initial guess and
    stopping rule as the numpy step) and the projection onto ``Leg(TN)`` run in numba.
    """

    newton: NewtonOptions = attrs.field(factory=lambda: NewtonOptions(tol=_TOL),
                                        validator=is_newton_options)
    order = 2
    symmetric = True
    name = "Euler B(h/2) o Euler A(h/2) (extrinsic joint solve)"

    def _equations(self, system: Any, iface: SystemInterface, q0, p0, h: float, u: Any):
        """``(fun, jac, fa, fb)``: the residual of the joint solve (class docstring) in
        x = (q_{1/2}, q1, λ, μ), its Jacobian and the forcings of the two half steps.

        Jacobian (rows r1, r2, φ(q_{1/2}), φ(q1); columns q_{1/2}, q1, λ, μ)::

            [[M − (h/2)∂f_a⁻/∂q_{1/2}, 0, −G0ᵀ, 0],
             [2M + Σ_a μ_a ∇²φ_a(q_{1/2}), −M, 0, G(q_{1/2})ᵀ],
             [G(q_{1/2}), 0, 0, 0], [0, G(q1), 0, 0]]
        """
        m = q0.shape[-1]
        G0 = iface.holonomic_jacobian(q0)
        k = G0.shape[-2]
        M = iface.mass
        hh = 0.5 * h
        f0 = iface.potential_grad(q0)
        jac_phi, phi = iface.holonomic_jacobian, iface.holonomic_phi
        # the forces of Euler A (θ = 0) on [q0, q_{1/2}] and Euler B (θ = 1) on [q_{1/2}, q1]:
        # f_d⁺ of A and f_d⁻ of B vanish, so the middle equation has no force
        fa = _forcing(system, u, DiscreteLagrangian("alpha", 0.0))
        fb = _forcing(system, u, DiscreteLagrangian("alpha", 1.0))

        def fun(x):
            qm, q1 = x[..., :m], x[..., m:2 * m]
            lam, mu = x[..., 2 * m:2 * m + k], x[..., 2 * m + k:]
            r1 = K._mv(M, qm - q0) + hh * hh * f0 - K._mtv(G0, lam) - hh * p0
            if fa is not None:
                r1 = r1 - hh * fa.forces(q0, qm, hh)[0]
            r2 = K._mv(M, 2.0 * qm - q0 - q1) + K._mtv(jac_phi(qm), mu)
            return np.concatenate([r1, r2, phi(qm), phi(q1)], axis=-1)

        def jac(x):
            qm, q1, mu = x[..., :m], x[..., m:2 * m], x[..., 2 * m + k:]
            batch = np.broadcast_shapes(x.shape[:-1], q0.shape[:-1])
            J = np.zeros((*batch, 2 * m + 2 * k, 2 * m + 2 * k))
            J[..., :m, :m] = M
            if fa is not None:
                J[..., :m, :m] -= hh * fa.minus_dq1(q0, qm, hh)
            J[..., :m, 2 * m:2 * m + k] = -np.swapaxes(G0, -1, -2)
            Gm = jac_phi(qm)
            J[..., m:2 * m, :m] = 2.0 * M + np.einsum(
                "...aij,...a->...ij", iface.holonomic_hessian(qm), mu)
            J[..., m:2 * m, m:2 * m] = -M
            J[..., m:2 * m, 2 * m + k:] = np.swapaxes(Gm, -1, -2)
            J[..., 2 * m:2 * m + k, :m] = Gm
            J[..., 2 * m + k:, m:2 * m] = jac_phi(q1)
            return J

        return fun, jac, fa, fb

    #: A compiled (numba) joint solve (issue 17; :mod:`._compiled_dmaps`).
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: SystemInterface) -> tuple[str, Any]:
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled_dmaps`)."""
        from ._compiled_dmaps import compiled_plan

        return compiled_plan("extrinsic", None, False, self.newton, system, iface)

    def _step_impl(self, system, state: State, h: float, u: Any = None) -> State:
        compiled = _compiled_step(self, system, state, h, u)
        if compiled is not None:
            return compiled
        iface = euclidean_interface(system)
        q0, p0 = state.q, state.p
        m = q0.shape[-1]
        k = iface.holonomic_jacobian(q0).shape[-2]
        M = iface.mass
        hh = 0.5 * h
        fun, jac, fa, fb = self._equations(system, iface, q0, p0, h, u)
        qg = q0 + hh * K._mv(iface.mass_inv, p0)
        x0 = np.concatenate([qg, q0 + h * K._mv(iface.mass_inv, p0),
                             np.zeros((*q0.shape[:-1], 2 * k))], axis=-1)
        res = _solve(fun, jac, x0, self.newton, state, _scale(iface, q0))
        qm, q1 = res.x[..., :m], res.x[..., m:2 * m]
        p1s = K._mv(M, q1 - qm) / hh - hh * iface.potential_grad(q1)
        info = _info(res)
        if fb is not None:
            p1s = p1s + fb.forces(qm, q1, hh)[1]
            info["work"] = fa.work(q0, qm, hh) + fb.work(qm, q1, hh)
        p1, _ = K.project_momentum(p1s, iface.holonomic_jacobian(q1), iface.mass_inv)
        v1 = K._mv(iface.mass_inv, p1)
        return attrs.evolve(state, t=state.t + h, q=q1, p=p1, v=v1, n=state.n + 1,
                            info=info, lam=_node_multiplier(iface, q1, v1, fb),
                            carry={"x": res.x})

    def _step_linearization_impl(self, system, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) in (q, p) by the implicit function theorem on the joint solve's Newton
        matrix (:meth:`_equations`), and in the tangent bases.

        Parameter columns of the residual: ∂r1/∂q0 = −M + (h/2)²∇²V(q0) − Σ_a λ_a ∇²φ_a(q0)
        − (h/2)∂f_a⁻/∂q0, ∂r1/∂p0 = −(h/2)I, ∂r1/∂u = −(h/2)∂f_a⁻/∂u, ∂r2/∂q0 = −M; then
        p1* = M(q1 − q_{1/2})/(h/2) − (h/2)∇V(q1) + f_b⁺ projected onto Leg(TN)
        (:func:`~chetaev.discrete_lagrangian.core._dmaps_kernels.project_momentum_jacobian`).
        """
        iface = euclidean_interface(system)
        q0, p0 = np.asarray(state.q, dtype=float), np.asarray(state.p, dtype=float)
        x = np.asarray(new.carry["x"], dtype=float)
        m = q0.shape[-1]
        k = iface.holonomic_jacobian(q0).shape[-2]
        M = iface.mass
        hh = 0.5 * h
        _, jac, _, _ = self._equations(system, iface, q0, p0, h, u)
        J = jac(x)
        batch = J.shape[:-2]
        qm, q1, lam = x[..., :m], x[..., m:2 * m], x[..., 2 * m:2 * m + k]
        fa, fb = (DiscreteLagrangian("alpha", a) for a in (0.0, 1.0))
        am0, _, amu, _, _, _ = _force_partials(system, fa, q0, qm, hh, u, batch, m)
        _, _, _, bp0, bp1, bpu = _force_partials(system, fb, qm, q1, hh, u, batch, m)
        nu = amu.shape[-1]
        R = np.zeros((*batch, 2 * m + 2 * k, 2 * m + nu))
        R[..., :m, :m] = (-M + hh * hh * iface.potential_hess(q0) - np.einsum(
            "...aij,...a->...ij", iface.holonomic_hessian(q0), lam) - hh * am0)
        R[..., :m, m:2 * m] = -hh * np.eye(m)
        R[..., :m, 2 * m:] = -hh * amu
        R[..., m:2 * m, :m] = -M
        dx = -np.linalg.solve(J, R)
        dqm, dq1 = dx[..., :m, :], dx[..., m:2 * m, :]
        p1s = K._mv(M, q1 - qm) / hh - hh * iface.potential_grad(q1)
        dp1s = (M / hh - hh * iface.potential_hess(q1) + bp1) @ dq1 + (-M / hh + bp0) @ dqm
        if getattr(system, "has_force", False) is True:
            p1s = p1s + DiscreteLagrangian("alpha", 1.0).forces(system, qm, q1, hh, u)[1]
            dp1s[..., 2 * m:] += bpu
        _, dp1 = K.project_momentum_jacobian(
            p1s, iface.holonomic_jacobian(q1), np.asarray(iface.holonomic_hessian(q1), float),
            iface.mass_inv, dq1, dp1s)
        full = np.concatenate([dq1, dp1], axis=-2)
        return self._linearization(system, state, new, full[..., : 2 * m], full[..., 2 * m:])


# --------------------------------------------------------------------------------------------
# The stage-constrained baseline (paper (1.2))
# --------------------------------------------------------------------------------------------
@attrs.frozen
class StageConstrainedBaseline(_EuclideanMethod):
    """BASELINE, criticised by the paper: constraint imposed at the *stage* point.

    The midpoint discrete Lagrangian with ``φ((q0 + q1)/2) = 0`` (paper (1.2); Johnson and
    Murphey 2009) and forces ``½G(q_m)ᵀλ`` in both momentum equations::

        p0 = MΔ/h + (h/2)∇V(q_m) − ½G(q_m)ᵀλ·h,   φ(q_m) = 0
        p1 = MΔ/h − (h/2)∇V(q_m) + ½G(q_m)ᵀλ·h

    The step points ``q_k`` are *not* on N: ``|φ(q_k)| = O(h²)``, and the tangency
    ``G(q_k)M⁻¹p_k = 0`` is not imposed.  Provided to demonstrate that defect; do not use it
    for simulation.
    """

    newton: NewtonOptions = attrs.field(factory=lambda: NewtonOptions(tol=_TOL),
                                        validator=is_newton_options)
    order = 2
    symmetric = True
    name = "stage-constrained midpoint (baseline, paper (1.2))"

    @property
    def guarantees(self) -> dict[str, float]:
        """Nothing: its step points leave the constraint set at O(h²) (the defect it shows)."""
        return {}

    def _step_impl(self, system, state: State, h: float, u: Any = None) -> State:
        iface = euclidean_interface(system)
        q0, p0 = state.q, state.p
        m = q0.shape[-1]
        k = iface.holonomic_jacobian(q0).shape[-2]
        x0 = np.concatenate([q0 + h * K._mv(iface.mass_inv, p0), np.zeros((*q0.shape[:-1], k))],
                            axis=-1)
        M, grad_V, jac = iface.mass, iface.potential_grad, iface.holonomic_jacobian
        # the midpoint rule's discrete forces ½hF(q_m, Δ/h, u) in both momentum equations
        forcing = _forcing(system, u, DiscreteLagrangian("midpoint"))

        def fun(x):
            r = K.stage_phase1_residual(x, q0, p0, h, M, grad_V, jac, iface.holonomic_phi)
            if forcing is not None:
                fm = forcing.forces(q0, x[..., :m], h)[0]
                r = r - np.concatenate([h * fm, np.zeros_like(r[..., m:])], axis=-1)
            return r

        def jac1(x):
            J = K.stage_phase1_jacobian(x, q0, h, M, iface.potential_hess, jac,
                                        iface.holonomic_hessian)
            if forcing is not None:
                J = J.copy()
                J[..., :m, :m] -= h * forcing.minus_dq1(q0, x[..., :m], h)
            return J

        res = _solve(fun, jac1, x0, self.newton, state, _scale(iface, q0))
        q1, nu = res.x[..., :m], res.x[..., m:]
        qm = 0.5 * (q0 + q1)
        p1 = (K._mv(iface.mass, q1 - q0) / h - 0.5 * h * iface.potential_grad(qm)
              + 0.5 * K._mtv(iface.holonomic_jacobian(qm), nu) / h)
        info = _info(res)
        if forcing is not None:
            p1 = p1 + forcing.forces(q0, q1, h)[1]
            info["work"] = forcing.work(q0, q1, h)
        return attrs.evolve(state, t=state.t + h, q=q1, p=p1, v=K._mv(iface.mass_inv, p1),
                            n=state.n + 1, info=info, lam=nu / (h * h),  # stage multiplier
                            carry={"x": res.x})

    def _step_linearization_impl(self, system, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) in (q, p) by the implicit function theorem on the step's Newton matrix
        (:func:`~chetaev.discrete_lagrangian.core._dmaps_kernels.stage_phase1_jacobian`
        with the midpoint force's ∂f_d⁻/∂q1); no tangent bases (the nodes are off the
        constraint set, the defect the baseline shows).

        With S = (h²/4)∇²V(q_m) − ¼Σ_a ν_a ∇²φ_a(q_m) (so ∂r1/∂q1 = M + S − h∂f_d⁻/∂q1):
        ∂r1/∂q0 = −M + S − h∂f_d⁻/∂q0, ∂r2/∂q0 = ½G(q_m), ∂r1/∂p0 = −hI,
        ∂r1/∂u = −h∂f_d⁻/∂u; p1 = MΔ/h − (h/2)∇V(q_m) + G(q_m)ᵀν/(2h) + f_d⁺ gives
        ∂p1/∂q1 = (M − S)/h + ∂f_d⁺/∂q1, ∂p1/∂q0 = −(M + S)/h + ∂f_d⁺/∂q0,
        ∂p1/∂ν = G(q_m)ᵀ/(2h), ∂p1/∂u = ∂f_d⁺/∂u.
        """
        iface = euclidean_interface(system)
        q0 = np.asarray(state.q, dtype=float)
        x = np.asarray(new.carry["x"], dtype=float)
        m = q0.shape[-1]
        M = iface.mass
        q1, nu = x[..., :m], x[..., m:]
        k = nu.shape[-1]
        qm = 0.5 * (q0 + q1)
        J = K.stage_phase1_jacobian(x, q0, h, M, iface.potential_hess,
                                    iface.holonomic_jacobian, iface.holonomic_hessian)
        batch = np.broadcast_shapes(J.shape[:-2], q0.shape[:-1])
        J = np.array(np.broadcast_to(J, (*batch, m + k, m + k)))
        S = J[..., :m, :m] - M
        dm0, dm1, dmu, dp0, dp1, dpu = _force_partials(
            system, DiscreteLagrangian("midpoint"), q0, q1, h, u, batch, m)
        n_u = dmu.shape[-1]
        J[..., :m, :m] -= h * dm1
        R = np.zeros((*batch, m + k, 2 * m + n_u))
        R[..., :m, :m] = -M + S - h * dm0
        R[..., m:, :m] = J[..., m:, :m]
        R[..., :m, m:2 * m] = -h * np.eye(m)
        R[..., :m, 2 * m:] = -h * dmu
        dx = -np.linalg.solve(J, R)
        dq1, dnu = dx[..., :m, :], dx[..., m:, :]
        dp = ((M - S) / h + dp1) @ dq1 + np.swapaxes(iface.holonomic_jacobian(qm), -1, -2) \
            @ dnu / (2.0 * h)
        dp[..., :m] += -(M + S) / h + dp0
        dp[..., 2 * m:] += dpu
        full = np.concatenate([dq1, dp], axis=-2)
        return StepLinearization(state=new, A=full[..., : 2 * m], B=full[..., 2 * m:])
