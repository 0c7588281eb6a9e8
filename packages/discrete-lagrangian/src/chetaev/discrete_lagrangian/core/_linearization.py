"""Exact step linearizations by the implicit function theorem (issue 20).

:meth:`Method.step_linearization` returns the Jacobians of one step's map
(q_k, p_k) ↦ (q_{k+1}, p_{k+1}) with respect to the current state and to the control ``u``
held over the step, for linearization about a trajectory (discrete LQR), shooting or
adjoint gradients. No finite differences of the step are taken: each step of the engine
methods solves R(x; q, p, u) = 0 for its unknowns x by Newton, so at the converged x

    dx/d(q, p, u) = −J⁻¹ ∂R/∂(q, p, u),      J = ∂R/∂x  (the Newton matrix),

and the node update is chained. For the PRK engine (:mod:`~chetaev.discrete_lagrangian.core._prk`,
paper Thm. 4.2 and eq. (13)) the residual depends on q through the stages
Q^i = q + h Σ_j a_ij V^j (and q_{k+1} = q + h Σ_j b_j V^j), on p through
P^i = p + h Σ_j â_ij W^j (and p_{k+1} = p + h Σ_j b̂_j W^j), and on u through the stage
force F(Q^i, V^i, u) of W^i (F_u from the system's ``force_jacobians``); all three partial
derivatives are analytic (:func:`prk_step_jacobians`).

Coordinates: the state's (q, p) (momenta, not velocities), stacked as x = (q, p) ∈ R²ⁿ, so
``A = ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k)`` is ``(..., 2n, 2n)`` and ``B = ∂(q_{k+1},
p_{k+1})/∂u`` is ``(..., 2n, n_controls)``. For a holonomically constrained system the map is
also given in orthonormal bases of the tangent spaces of the invariant set
{Φ(q) = 0, Φ_q(q) ∂H/∂p(q, p) = 0} at the current and at the next state
(:func:`constraint_tangent_basis`); for a velocity (nonholonomic) constraint Φ(q, v) = 0,
of {Φ(q, FL⁻¹(q, p)) = 0} (:func:`velocity_constraint_tangent_basis`, 2n − m columns).

A method whose step also reads the node multiplier λ_k carried in its state (the GNI and
ReducedGNI, the nonholonomic PRKs' ``"carry"`` rule) linearizes in the complete state, λ
stacked last (``coordinates`` ending in ``", lam)"``, :class:`StepLinearization`): the
implicit function theorem gives λ_k's columns and λ_{k+1}'s rows from the same solve, so
that a product of step Jacobians is the Jacobian of several steps.

On a Lie group (``LieVPRK``, ``LieNonholonomicPRK``; ``coordinates == "(xi, mu)"``) the
state (g, μ) is perturbed as (g τ(ε), μ + δμ) with ε ∈ 𝔤 left-trivialized and τ the
method's retraction, and the next state is read in the same chart, g_{k+1}' = g_{k+1} τ(ζ):
``A = ∂(ζ, δμ_{k+1})/∂(ε, δμ)`` ``(..., 2d, 2d)`` (:func:`lie_step_jacobians`). Since
τ(ε) = e + ε + O(|ε|²), A is the derivative in left-trivialized variations; the retraction
fixes the finite perturbations only. The bases of constrained systems on groups are in the
same coordinates.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError
from ._forcing import ForcedLieStageHooks, ForcedStageHooks
from ._interface import interface_of
from ._prk import PRKCoefficients, StageHooks, _constant_tangents, _layout, prk_residual
from ._state import State

__all__ = [
    "LinearizationNotSupportedError",
    "StepLinearization",
    "constraint_tangent_basis",
    "lie_step_jacobians",
    "prk_step_jacobians",
    "tangent_fields",
    "tangent_linearization",
    "velocity_constraint_tangent_basis",
    "with_multiplier_directions",
]


class LinearizationNotSupportedError(InputError):
    """``step_linearization`` called on a method that does not implement it."""


@attrs.frozen(eq=False)
class StepLinearization:
    """The linearization of one step about ``state`` (:meth:`Method.step_linearization`).

    Attributes
    ----------
    state : State
        The next state (the step that was linearized, as :meth:`Method.step` returns it).
    A : ndarray (..., 2n, 2n)
        ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k), the state stacked as (q, p); on a group
        ∂(ζ_{k+1}, δμ_{k+1})/∂(ε, δμ) in the retraction's tangent coordinates (module
        docstring), n the algebra dimension. Square over the whole state: with a carried
        multiplier (``coordinates`` ending in ``", lam)"``) ``(..., 2n + m, 2n + m)``.
    B : ndarray (..., 2n, n_controls)
        ∂(q_{k+1}, p_{k+1})/∂u (zero columns for a system without controls); with a carried
        multiplier also the rows of λ_{k+1}.
    coordinates : str
        The coordinates of ``A`` and ``B``, the state's entries stacked in this order:
        ``"(q, p)"``; ``"(xi, mu)"`` on a group; ``"(q, v)"`` (velocities) or
        ``"(q, q_next)"`` (a two-step state, ``DSOCSIntegrator``); ``"(q, g, v)"``
        (``chetaev.gni.ReducedGNI``: shape x, group element in the retraction's chart,
        velocity). A method whose step reads the node multiplier λ_k carried in the state
        linearizes in the complete state, λ last: ``"(q, v, lam)"`` (``chetaev.gni.GNI``
        and its compositions), ``"(q, p, lam)"``
        (``NonholonomicPRK(multiplier_rule="carry")``), ``"(xi, mu, lam)"``
        (``LieNonholonomicPRK(multiplier_rule="carry")``), ``"(q, g, v, lam)"``
        (``ReducedGNI``); a product of such A's is the Jacobian of several steps.
    basis, next_basis : ndarray (..., 2n, d) or None
        Constrained systems: orthonormal bases (columns) of the tangent space of the
        invariant set at the current and the next state, in ``coordinates``:
        {Φ(q) = 0, Φ_q ∂H/∂p = 0} for a holonomic constraint (d = 2n − 2m),
        {Φ(q, FL⁻¹(q, p)) = 0} for a velocity constraint (d = 2n − m); with a carried
        multiplier that set × Rᵐ (the basis block-diagonal with I_m: d + m columns of
        length 2n + m); None otherwise.
    A_tangent : ndarray (..., d, d) or None
        ``next_basisᵀ A basis``: the linearization in those tangent coordinates.
    B_tangent : ndarray (..., d, n_controls) or None
        ``next_basisᵀ B``.
    finite_differences : tuple of str
        The derivatives of the linearization (or of its Newton matrix) that were central
        finite differences, not exact (empty: none that the method knows of). The
        nonholonomic methods' ``"continuous"`` rule names the blocks of the multiplier's
        derivative as ``"multiplier:dG"`` etc.
        (:attr:`~chetaev.discrete_lagrangian.ConstrainedSystem.multiplier_jacobian_fd`), and
        ``"second_derivatives"`` / ``"force_jacobians"`` for a system whose second
        derivatives of L or force Jacobians are finite differences.
    """

    state: State
    A: np.ndarray
    B: np.ndarray
    coordinates: str = "(q, p)"
    basis: np.ndarray | None = None
    next_basis: np.ndarray | None = None
    A_tangent: np.ndarray | None = None
    B_tangent: np.ndarray | None = None
    finite_differences: tuple[str, ...] = ()


def _control_jacobian(hooks: Any, ev: Any) -> np.ndarray | None:
    """F_u at the stages ``(..., s, n, n_u)`` of a forced hooks object (None: no force); on a
    group (:class:`~chetaev.discrete_lagrangian.core._forcing.ForcedLieStageHooks`) the
    left-trivialized F_u(Gⁱ, Ωⁱ, u) ``(..., s, d, n_u)``."""
    if isinstance(hooks, ForcedLieStageHooks):
        X, V = ev.G, ev.Omega
    elif isinstance(hooks, ForcedStageHooks):
        X, V = ev.Q, ev.V
    else:
        return None
    return np.asarray(hooks._jac(X, V, hooks._u_at(V))[2], dtype=float)


class _QColumns:
    """The step's hooks with n more columns for ∂/∂q: n extra "unknowns" that no equation
    reads, whose tangents the caller sets to ∂Q^i/∂q = ∂q_{k+1}/∂q = I, so that the engine's
    own Jacobian (stage force, hooks' equations through ``ev.dQ_dx``, ``ev.dq1_dx``) carries
    ∂R/∂q in its last n columns. The inner hooks see their own extra unknowns only.

    ``before=True`` puts the n parameter columns before the inner hooks' extra unknowns
    (``[V, Λ, params (n), extra (e)]``), for hooks that find their extra unknowns as the last
    e columns of the Jacobian (the nonholonomic PRK's implicit v_k^i)."""

    def __init__(self, inner: Any, n: int, before: bool = False) -> None:
        self.inner = inner
        self.m = int(getattr(inner, "m", 0))
        self.free = inner.free
        self.e = int(getattr(inner, "n_extra", 0))
        self.n_extra = self.e + n
        self._keep = slice(n, None) if before else slice(0, self.e)

    def force(self, Q, V, Lam, jacobian):
        """The inner hooks' force."""
        return self.inner.force(Q, V, Lam, jacobian)

    def equations(self, ev):
        """The inner hooks' equations (their Jacobian gains the q columns through ev)."""
        ev.x_extra = ev.x_extra[..., self._keep] if self.e else None
        return self.inner.equations(ev)


def prk_step_jacobians(x: np.ndarray, q: np.ndarray, p: np.ndarray, h: float,
                       coeffs: PRKCoefficients, system: Any, hooks: Any,
                       lam_fixed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)`` of one PRK step at its converged unknowns ``x`` (module docstring).

    Parameters
    ----------
    x : ndarray (..., N)
        The converged unknowns of :func:`~chetaev.discrete_lagrangian.core._prk.prk_residual`.
    q, p : ndarray (..., n)
        The current node.
    h, coeffs, system, hooks, lam_fixed
        As for ``prk_residual`` (the same hooks object as the step's; forced hooks supply
        F_u).

    Returns
    -------
    A : ndarray (..., 2n, 2n)
        ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k).
    B : ndarray (..., 2n, n_u)
        ∂(q_{k+1}, p_{k+1})/∂u (n_u = 0 without a force).

    Notes
    -----
    ∂R/∂q is the engine's own Jacobian with n extra tangent columns (:class:`_QColumns`),
    ∂Q^i/∂q = ∂q_{k+1}/∂q = I (the hooks' equations, e.g. Φ(Q^i) and the tangency at
    q_{k+1}, see them through ``ev.dQ_dx`` and ``ev.dq1_dx``). ∂R/∂(p, u) is built from ∂P^i/∂p = I,
    ∂W^i/∂u = F_u(Q^i, V^i, u), ∂p_{k+1}/∂(p, u) = (I, h Σ b̂_j F_u^j), and the hooks' equations
    evaluated on those tangents (they are linear in the tangents they are given).
    """
    if hooks is None:
        hooks = StageHooks(coeffs.s)
    n = q.shape[-1]
    s, m, free, _, N = _layout(coeffs, n, hooks)
    n_extra = N - s * n - int(np.count_nonzero(free)) * m
    seen = _QColumns(hooks, n)
    dV, dQ, dLam, dq1 = _constant_tangents(coeffs, n, m, free, h, n_extra + n)
    eye = np.eye(n)
    dQ[:, :, N:] = eye
    dq1[:, N:] = eye
    xq = np.concatenate([x, np.zeros((*x.shape[:-1], n))], axis=-1)
    _, J, ev = prk_residual(xq, q, p, h, coeffs, system, seen, lam_fixed, True,
                            (dV, dQ, dLam, dq1))
    Jx, Rq = J[..., :N], J[..., N:]
    dp1 = ev.dp1_dx  # (..., n, N + n): through x, and directly through q
    Fu = _control_jacobian(hooks, ev)
    nu = 0 if Fu is None else Fu.shape[-1]
    K = n + nu
    batch = np.broadcast_shapes(Jx.shape[:-2], q.shape[:-1], p.shape[:-1])
    dW = np.zeros((*batch, s, n, K))
    if nu:
        dW[..., n:] = Fu
    dWf = dW.reshape((*batch, s, n * K))
    dP = (h * (coeffs.ahat @ dWf)).reshape(dW.shape)
    dP[..., :n] += eye
    dp1_pu = (h * (coeffs.bhat @ dWf)).reshape((*batch, n, K))
    dp1_pu[..., :n] += eye
    ev2 = attrs.evolve(ev, dQ_dx=np.zeros((s, n, K)), dV_dx=np.zeros((s, n, K)),
                       dLam_dx=np.zeros((s, m, K)), dW_dx=dW, dq1_dx=np.zeros((n, K)),
                       dp1_dx=dp1_pu)
    _, J2 = hooks.equations(ev2)
    parts = [-dP.reshape((*batch, s * n, K))]
    if J2 is not None:
        parts.append(np.broadcast_to(J2, (*batch, *J2.shape[-2:])))
    Rpu = np.concatenate(parts, axis=-2)
    Rtheta = np.concatenate([np.broadcast_to(Rq, (*batch, N, n)), Rpu], axis=-1)
    dx = -np.linalg.solve(np.broadcast_to(Jx, (*batch, N, N)), Rtheta)  # (..., N, 2n + nu)
    dq1_th = ev.dq1_dx[:, :N] @ dx
    dq1_th[..., :n] += eye
    dp1_th = dp1[..., :N] @ dx
    dp1_th[..., :n] += dp1[..., N:]
    dp1_th[..., n:] += dp1_pu
    full = np.concatenate([dq1_th, dp1_th], axis=-2)  # (..., 2n, 2n + nu)
    return full[..., : 2 * n], full[..., 2 * n:]


def constraint_tangent_basis(system: Any, q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Orthonormal basis ``(..., 2n, 2n − 2m)`` of T_(q,p) of {Φ(q) = 0, Φ_q(q) v(q, p) = 0}.

    ``system`` is a holonomic :class:`ConstrainedSystem`; v(q, p) = FL⁻¹(q, p) (paper §3:
    the constraint manifold and its hidden constraint, eq. (13d)). The tangent space is the
    kernel of [[Φ_q, 0], [Hv + Φ_q ∂v/∂q, Φ_q ∂v/∂p]] with ∂v/∂p = G⁻¹, ∂v/∂q = −G⁻¹ D21L,
    G = D22L(q, v), (Hv)_al = Σ_k ∂²Φ_a/∂q_k∂q_l v_k; the basis is the last right singular
    vectors of that 2m × 2n matrix (full rank 2m for regular constraints).
    """
    base = getattr(system, "system", system)
    c = system.constraint
    q = np.asarray(q, dtype=float)
    p = np.asarray(p, dtype=float)
    v = np.asarray(base.legendre_inv(q, p), dtype=float)
    G = base.D22L(q, v)
    Jq = c.jacobian(q)  # (..., m, n)
    m = Jq.shape[-2]
    Hv = np.einsum("...akl,...k->...al", c.hessian(q), v)
    JGinv = np.swapaxes(np.linalg.solve(np.swapaxes(G, -1, -2), np.swapaxes(Jq, -1, -2)),
                        -1, -2)  # Φ_q G⁻¹
    gq = Hv - JGinv @ base.D21L(q, v)
    batch = np.broadcast_shapes(Jq.shape[:-2], gq.shape[:-2])
    top = np.concatenate([np.broadcast_to(Jq, (*batch, *Jq.shape[-2:])),
                          np.zeros((*batch, *Jq.shape[-2:]))], axis=-1)
    bottom = np.concatenate([np.broadcast_to(gq, (*batch, *gq.shape[-2:])),
                             np.broadcast_to(JGinv, (*batch, *JGinv.shape[-2:]))], axis=-1)
    Cmat = np.concatenate([top, bottom], axis=-2)
    _, _, Vt = np.linalg.svd(Cmat, full_matrices=True)
    return np.swapaxes(Vt[..., 2 * m:, :], -1, -2)


def tangent_linearization(system: Any, state: State, new: State, A: np.ndarray,
                          B: np.ndarray) -> dict[str, np.ndarray]:
    """The tangent bases at ``state`` and ``new`` and (A, B) in them (``StepLinearization``
    fields ``basis``, ``next_basis``, ``A_tangent``, ``B_tangent``)."""
    E0 = constraint_tangent_basis(system, state.q, state.p)
    E1 = constraint_tangent_basis(system, new.q, new.p)
    E1t = np.swapaxes(E1, -1, -2)
    return {"basis": E0, "next_basis": E1, "A_tangent": E1t @ A @ E0, "B_tangent": E1t @ B}


def velocity_constraint_tangent_basis(system: Any, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Orthonormal basis ``(..., 2n, 2n − m)`` of T_(q,p) of {Φ(q, FL⁻¹(q, p)) = 0}.

    ``system`` is a :class:`ConstrainedSystem` with a velocity constraint Φ(q, v) (linear,
    affine or nonlinear in v; nonholonomic paper eq. (14e) at the nodes) and ``v`` the
    velocity at the node, v = FL⁻¹(q, p). The tangent space is the kernel of the m × 2n
    matrix [Φ_q − Φ_v G⁻¹ D21L, Φ_v G⁻¹] (∂v/∂p = G⁻¹, ∂v/∂q = −G⁻¹ D21L, G = D22L(q, v));
    the basis is its last 2n − m right singular vectors (rank m for independent constraints).
    """
    base = getattr(system, "system", system)
    c = system.constraint
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    G = np.asarray(base.D22L(q, v), dtype=float)
    Cv = np.asarray(c.dphi_dv(q, v), dtype=float)
    Cq = np.asarray(c.dphi_dq(q, v), dtype=float)
    m = Cv.shape[-2]
    CGinv = np.swapaxes(np.linalg.solve(np.swapaxes(G, -1, -2), np.swapaxes(Cv, -1, -2)),
                        -1, -2)  # Φ_v G⁻¹
    dq = Cq - CGinv @ np.asarray(base.D21L(q, v), dtype=float)
    batch = np.broadcast_shapes(dq.shape[:-2], CGinv.shape[:-2])
    Cmat = np.concatenate([np.broadcast_to(dq, (*batch, *dq.shape[-2:])),
                           np.broadcast_to(CGinv, (*batch, *CGinv.shape[-2:]))], axis=-1)
    _, _, Vt = np.linalg.svd(Cmat, full_matrices=True)
    return np.swapaxes(Vt[..., m:, :], -1, -2)


def tangent_fields(E0: np.ndarray, E1: np.ndarray, A: np.ndarray,
                   B: np.ndarray) -> dict[str, np.ndarray]:
    """The ``StepLinearization`` fields ``basis``, ``next_basis``, ``A_tangent``,
    ``B_tangent`` from the bases ``E0`` (current node) and ``E1`` (next node)."""
    E1t = np.swapaxes(E1, -1, -2)
    return {"basis": E0, "next_basis": E1, "A_tangent": E1t @ A @ E0, "B_tangent": E1t @ B}


def with_multiplier_directions(E: np.ndarray, m: int) -> np.ndarray:
    """The tangent basis ``E`` ``(..., k, d)`` of a state's constraint set extended by the m
    free directions of a carried multiplier λ (a state of its own, stacked last):
    ``[[E, 0], [0, I_m]]`` ``(..., k + m, d + m)``, orthonormal when E is (the ``basis`` of a
    linearization in coordinates ending in ``", lam)"``, :class:`StepLinearization`)."""
    top = np.concatenate([E, np.zeros((*E.shape[:-1], m))], -1)
    low = np.concatenate([np.zeros((*E.shape[:-2], m, E.shape[-1])),
                          np.broadcast_to(np.eye(m), (*E.shape[:-2], m, m))], -1)
    return np.concatenate([top, low], -2)


def _zero_coadjoint(f: np.ndarray) -> np.ndarray:
    """ζ ↦ 0 in place of ζ ↦ ad*_ζ f (the parameter columns do not move Ξⁱ)."""
    return np.zeros((*np.shape(f), np.shape(f)[-1]))


def lie_step_jacobians(x: np.ndarray, g: np.ndarray, mu: np.ndarray, h: float,
                       coeffs: PRKCoefficients, system: Any, tau: Any, hooks: Any = None,
                       lam_fixed: np.ndarray | None = None,
                       mu_rows: Any = None, last_multiplier: bool = False) -> tuple:
    """Jacobians of one Lie-group PRK step (paper eqs. (24)–(27), Thm. 6.1; §6.3, §6.4) by
    the implicit function theorem, in the left-trivialized tangent coordinates.

    Coordinates: the state (g, μ) is perturbed as (g τ(ε), μ + δμ), ε ∈ 𝔤 (left-trivialized,
    τ the method's retraction), and the next state is read in the same chart,
    g_{k+1}' = g_{k+1} τ(ζ), μ_{k+1}' = μ_{k+1} + δμ_{k+1}; the result is
    ``A = ∂(ζ, δμ_{k+1})/∂(ε, δμ)`` ``(..., 2d, 2d)``. Since τ(ε) = e + ε + O(|ε|²) for
    both retractions, A is the derivative in left-trivialized variations; τ fixes the
    finite perturbations only (second order).

    With Ξⁱ fixed (the unknowns H held), ε moves the stages as Gⁱ = g τ(ε) τ(Ξⁱ), i.e.
    ζⁱ = Ad_{τ(Ξⁱ)}⁻¹ ε (and ζ_ξ = Ad_{τ(ξ)}⁻¹ ε for g_{k+1}); δμ enters
    μ_{k+1} = Ad*_{τ(ξ)}[μ + h Σⱼ bⱼ Ñʲ] directly; a given multiplier Λⁱ (a non-free stage)
    and a control u enter the stage force Fⁱ. The stage chain of
    :func:`~chetaev.discrete_lagrangian.core._lie_prk.stage_derivatives` with these seeds
    gives ∂R/∂θ, and dx/dθ = −J⁻¹ ∂R/∂θ with J the Newton matrix at the converged ``x``.

    Parameters
    ----------
    x, g, mu, h, coeffs, system, tau, hooks, lam_fixed
        As for :func:`~chetaev.discrete_lagrangian.core._lie_prk.lie_prk_residual` (``x``
        converged; ``hooks`` the step's own, wrapped by
        :func:`~chetaev.discrete_lagrangian.core._forcing.forced_hooks` for a forced system:
        the force's g- and η-derivatives enter the Newton matrix through its
        ``force_jacobian`` and the control column through its F_u).
    mu_rows : callable, optional
        ``ev ↦ (..., E, d)``: the derivative of the hooks' equations in μ_k where they read
        μ_k directly (the nonholonomic IIIA momenta Mⁱ); None: they see μ_k only through
        μ_{k+1} and Ñʲ.
    last_multiplier : bool
        Also return the derivative of the last stage's multiplier Λˢ (the nonholonomic
        state's λ_{k+1}): its rows of dx/dθ if the stage is free, the unit block of its
        given value otherwise.

    Returns
    -------
    A : ndarray (..., 2d, 2d)
    dz_dlam : ndarray (..., 2d, k m)
        The derivative in the given multipliers (the non-free stages, in stage order).
    B : ndarray (..., 2d, n_u)
    dlams : ndarray (..., m, 2d + k m + n_u)
        Only with ``last_multiplier``: ∂Λˢ/∂(ε, δμ, given multipliers, u).
    """
    from ._lie_prk import _cat, _hook_shape, _pair_data, lie_prk_residual, stage_derivatives

    view = interface_of(system)
    d, s = int(view.group.dim), coeffs.s
    _, ev = lie_prk_residual(x, g, mu, h, coeffs, view, tau, hooks, lam_fixed)
    Dx = stage_derivatives(ev, view, tau, hooks)
    dR = Dx["dR"]
    Jx = dR.reshape((*dR.shape[:-3], s * d, dR.shape[-1]))
    dE = None if hooks is None else hooks.equations_jacobian(ev, Dx)
    if dE is not None:  # (a forced hooks object without inner hooks has no equations)
        Jx = _cat([Jx, dE], axis=-2)
    m, free, e = _hook_shape(hooks, s)
    fixed = [i for i in range(s) if not free[i]] if m else []
    nl = len(fixed) * m
    Fu = _control_jacobian(hooks, ev)  # (..., s, d, n_u): the stage force's F_u
    nu = 0 if Fu is None else int(Fu.shape[-1])
    K = 2 * d + nl + nu
    batch = np.broadcast_shapes(Jx.shape[:-2], ev.mu1.shape[:-1])
    eye = np.eye(d)
    zeta = np.zeros((*batch, s, d, K))
    zeta[..., :d] = np.linalg.inv(ev.AdT)  # ζⁱ = Ad_{τ(Ξⁱ)}⁻¹ ε
    zxi = np.zeros((*batch, d, K))
    zxi[..., :d] = np.linalg.inv(np.swapaxes(ev.Ad_tau_xi_T, -1, -2))
    dLam = np.zeros((s, m, K))
    for r, i in enumerate(fixed):
        dLam[i, :, 2 * d + r * m: 2 * d + (r + 1) * m] = np.eye(m)
    dOm = np.zeros((s, d, K))
    G, Om = ev.G, ev.Omega
    dF = view.D11L(G, Om) @ zeta
    dP0 = 0.0 if view.inertia is not None else view.D21L(G, Om) @ zeta
    fj = getattr(hooks, "force_jacobian", None) if hooks is not None else None
    if fj is not None:
        dFh = fj(ev, zeta, dOm, dLam)
        if dFh is not None:
            dF = dF + dFh
    if nu:
        dF = np.array(np.broadcast_to(dF, (*batch, s, d, K)))
        dF[..., 2 * d + nl:] += Fu
    D = ev.extra["dL_Xi"]
    DT = np.swapaxes(D, -1, -2)
    dPi = DT @ dP0 if view.inertia is None else 0.0
    dN = DT @ dF
    if view.inertia is None:
        dN = dN + np.swapaxes(ev.extra["J"], -1, -2) @ dP0
    dY = ev.extra["AdTinvT"] @ dF
    dnu = h * np.einsum("j,...jpU->...pU", coeffs.b, dY)
    dnu = np.array(np.broadcast_to(dnu, (*batch, d, K)))
    dnu[..., d: 2 * d] += eye
    dmu1 = ev.Ad_tau_xi_T @ dnu
    _, w = _pair_data(coeffs)
    dRt = (dPi - (np.swapaxes(ev.extra["dL_xi"], -1, -2) @ dmu1)[..., None, :, :]
           + h * np.einsum("ij,...jpU->...ipU", w, dN))
    rows = [np.broadcast_to(dRt, (*batch, s, d, K)).reshape((*batch, s * d, K))]
    if dE is not None:
        zero = np.zeros((s, d, K))
        Dt = dict(Dx, dR=dRt, dH=zero, dLam=dLam, dX=np.zeros((e, K)), dXi=zero,
                  dxi=np.zeros((d, K)), zeta=zeta, zeta_xi=zxi, dOm=dOm, dNt=dY, dmu1=dmu1,
                  P=_zero_coadjoint)
        H2 = hooks.equations_jacobian(ev, Dt)
        if mu_rows is not None:
            H2 = np.array(np.broadcast_to(H2, (*batch, *H2.shape[-2:])))
            H2[..., d: 2 * d] += mu_rows(ev)
        rows.append(H2)
    Rt = _cat(rows, axis=-2)
    N = Jx.shape[-1]
    dx = -np.linalg.solve(np.broadcast_to(Jx, (*batch, N, N)), Rt)
    z = np.concatenate([Dx["zeta_xi"] @ dx + zxi, Dx["dmu1"] @ dx + dmu1], axis=-2)
    out = (z[..., : 2 * d], z[..., 2 * d: 2 * d + nl], z[..., 2 * d + nl:])
    if not last_multiplier:
        return out
    if free[s - 1]:  # x = [H (s d), Λ of the free stages in stage order, extra]
        r = s * d + (sum(free) - 1) * m
        dlams = dx[..., r: r + m, :]
    else:  # given: the unit block of its column
        dlams = np.zeros((*batch, m, K))
        r = 2 * d + fixed.index(s - 1) * m
        dlams[..., r: r + m] = np.eye(m)
    return (*out, dlams)
