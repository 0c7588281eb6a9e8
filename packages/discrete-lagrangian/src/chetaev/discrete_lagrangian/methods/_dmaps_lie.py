"""Lie-group discretization-map integrators (paper §6, App. A).

Left trivialization throughout (DESIGN.md): ``ġ = g·hat(ξ)``, momenta ``α ∈ 𝔤*`` as arrays,
``ℓ(g)`` the ``(k, d)`` left-trivialized constraint Jacobian, ``f(g)`` the left-trivialized
gradient of the potential (so ``∇^L_g L = −f``), ``L = ½ξᵀ𝕀ξ − V(g)``.  With a retraction
``τ`` (exp or Cayley, ``chetaev.liegroups.retraction``) and its trivialized tangents ``dL``,
``dR`` and inverses, the methods are (paper §6.2; (6.8)–(6.10); duals are matrix transposes)::

    Euler A   (g0, g0τ(hξ)):    α0 = dR⁻¹(hξ)ᵀ𝕀ξ + h f(g0) − h ℓ(g0)ᵀλ,   φ(g1) = 0
                                α1 = dL⁻¹(hξ)ᵀ𝕀ξ + h ℓ(g1)ᵀλ̃,             ℓ(g1)𝕀⁻¹α1 = 0
    Euler B   (g0τ(−ξ)…, g1):   α0 = dR⁻¹(hξ)ᵀ𝕀ξ − h ℓ(g0)ᵀλ,             φ(g1) = 0
                                α1 = dL⁻¹(hξ)ᵀ𝕀ξ − h f(g1) + h ℓ(g1)ᵀλ̃,   ℓ(g1)𝕀⁻¹α1 = 0
    lobatto2  (6.4)–(6.7):      Euler B(h/2) ∘ Euler A(h/2), g_{1/2} ∈ N
    rattle    (6.8)–(6.10):     α0 = dR⁻¹(hξ/2)ᵀ𝕀ξ + (h/2) f(g0) − (h/2) ℓ(g0)ᵀλ
                                dL⁻¹(hξ/2)ᵀ𝕀ξ = dR⁻¹(hξ̄/2)ᵀ𝕀ξ̄,   φ(g0τ(hξ/2)τ(hξ̄/2)) = 0
                                α1 = dL⁻¹(hξ̄/2)ᵀ𝕀ξ̄ − (h/2) f(g1) + (h/2) ℓ(g1)ᵀΛ̃, tangency

(using ``d^Lτ_{−x}^{-1} = d^Rτ_x^{-1}``).  Without a constraint (a bare
``TrivializedMechanicalSystem``) the multiplier terms and ``φ`` equations are dropped.

External forces (issue 20): the left-trivialized force ``F(g, ξ, u) ∈ 𝔤*`` (control ``u``
held over the step) is added to the trivialized ``α̇`` next to the potential's ``−f`` and
evaluated like it, i.e. the left and right discrete forces of the same quadrature (Marsden &
West 2001 §3.2, forced discrete Euler–Poincaré form): Euler A ``−hF(g0, ξ)`` in the α0
equation; Euler B ``+hF(g1, ξ)`` in α1; RATTLE ``−(h/2)F(g0, ξ)`` in α0 and ``+(h/2)F(g1, ξ̄)``
in α1; lobatto2 as its two Euler half steps. ``info["work"]`` is the discrete work (the same
quadrature of ``F·ξ``), and ``State.lam`` the multiplier of the forced equations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .._util._errors import ConstraintViolationError, ConvergenceError, InputError
from .._util._validation import as_float, as_group_element, as_vector
from ..core._interface import SystemInterface, interface_of
from ..core._method import Method
from ..core._solver import NewtonOptions, newton_solve
from ..core._state import State
from ._checks import is_newton_options
from ._constrained_prk import _forced_multiplier

if TYPE_CHECKING:
    from chetaev.liegroups import Retraction

__all__ = ["LieDiscretizationMapMethod"]

_KINDS = ("euler_a", "euler_b", "lobatto2", "rattle")
_RETRACTIONS = ("cayley", "exp")
_TOL = 1e-14
_INITIAL_TOL = 1e-10
_HINT = "halve h, or increase NewtonOptions(max_iter=...)"


def _mv(A, x):
    return np.einsum("...ij,...j->...i", A, x)


def _mtv(A, y):
    return np.einsum("...ki,...k->...i", A, y)


# --------------------------------------------------------------------------------------------
# The system, read through its interface
# --------------------------------------------------------------------------------------------
def lie_interface(system: Any) -> SystemInterface:
    """The interface of a left-trivialized mechanical system on a group (optionally with a
    holonomic constraint): ``inertia``, ``inertia_inv``, ``potential_grad`` (``f``),
    ``holonomic_phi`` (``φ``), ``holonomic_jacobian`` (``ℓ``), ``multiplier``.

    Raises
    ------
    InputError
        For a vector-space system, a system without constant inertia, or a velocity
        constraint; the message names the fix.
    """
    iface = interface_of(system)
    if iface.group is None or iface.inertia is None:
        raise InputError(
            "LieDiscretizationMapMethod needs a TrivializedMechanicalSystem (or a "
            "ConstrainedSystem over one with a HolonomicConstraint); got "
            f"{type(iface.system).__name__}. For vector-space systems use "
            "DiscretizationMapMethod."
        )
    if iface.is_constrained and iface.holonomic_phi is None:
        raise InputError(
            "LieDiscretizationMapMethod handles holonomic constraints only (paper §6); got "
            f"{type(iface.constraint).__name__}."
        )
    return iface


def _deriv_T(deriv, x, w):
    """Jacobian of ``x ↦ D(x)ᵀ w`` given ``deriv(x, eta, mu) = grad_x <mu, D(x) eta>``."""
    d = x.shape[-1]
    return deriv(x[..., None, :], np.eye(d), w[..., None, :])


def _momentum_jac(iface: SystemInterface, tau: Retraction, which: str, c: float, xi):
    """``∂/∂ξ [D(cξ)ᵀ 𝕀ξ] = D(cξ)ᵀ𝕀 + c·∂_x[D(x)ᵀw]|_{x=cξ}`` with ``w = 𝕀ξ`` held fixed."""
    x = c * xi
    D = getattr(tau, which)(x)
    w = _mv(iface.inertia, xi)
    Jx = _deriv_T(getattr(tau, which + "_deriv"), x, w)
    return np.swapaxes(D, -1, -2) @ iface.inertia + c * Jx


def _project(iface: SystemInterface, g, alpha):
    """Project ``α`` onto ``{ℓ(g)𝕀⁻¹α = 0}`` along ``ℓ(g)ᵀμ``; returns ``(α, μ)``."""
    if not iface.is_constrained:
        return alpha, None
    ell = iface.holonomic_jacobian(g)
    A = ell @ iface.inertia_inv
    C = A @ np.swapaxes(ell, -1, -2)
    mu = -np.linalg.solve(C, _mv(A, alpha)[..., None])[..., 0]
    return alpha + _mtv(ell, mu), mu


# --------------------------------------------------------------------------------------------
# Residuals (pure functions of arrays; x = (ξ, μ) or (ξ, ξ̄, μ), μ = scaled multiplier)
# --------------------------------------------------------------------------------------------
def euler_residual(x, iface: SystemInterface, tau: Retraction, g0, alpha0, h: float,
                   kind: str, ell0):
    """Phase 1 of Lie Euler A / B (paper §6.2) in ``x = (ξ, μ)``, ``μ = hλ``."""
    d = iface.n
    xi = x[..., :d]
    r1 = _mtv(tau.dR_inv(h * xi, check=False), _mv(iface.inertia, xi)) - alpha0
    if kind == "euler_a":
        r1 = r1 + h * iface.potential_grad(g0)
    if not iface.is_constrained:
        return r1
    mu = x[..., d:]
    g1 = iface.group.compose(g0, tau(h * xi, check=False), check=False)
    return np.concatenate([r1 - _mtv(ell0, mu), iface.holonomic_phi(g1)], axis=-1)


def euler_jacobian(x, iface: SystemInterface, tau: Retraction, g0, h: float, ell0):
    d = iface.n
    xi = x[..., :d]
    J11 = _momentum_jac(iface, tau, "dR_inv", h, xi)
    if not iface.is_constrained:
        return J11
    g1 = iface.group.compose(g0, tau(h * xi, check=False), check=False)
    J21 = h * iface.holonomic_jacobian(g1) @ tau.dL(h * xi, check=False)
    k = ell0.shape[-2]
    top = np.concatenate([J11, np.broadcast_to(-np.swapaxes(ell0, -1, -2),
                                               (*J11.shape[:-2], d, k))], axis=-1)
    bottom = np.concatenate([J21, np.zeros((*J21.shape[:-2], k, k))], axis=-1)
    return np.concatenate([top, bottom], axis=-2)


def rattle_residual(x, iface: SystemInterface, tau: Retraction, g0, alpha0, h: float, ell0):
    """Phase 1 of the Lie RATTLE (6.8), (6.10), φ(g1) = 0 in ``x = (ξ, ξ̄, μ)``, ``μ = (h/2)λ``."""
    d = iface.n
    hh = 0.5 * h
    xi, xb = x[..., :d], x[..., d:2 * d]
    w, wb = _mv(iface.inertia, xi), _mv(iface.inertia, xb)
    # one batched call: dL⁻¹(hξ/2), dR⁻¹(hξ/2) = dL⁻¹(−hξ/2), dR⁻¹(hξ̄/2) = dL⁻¹(−hξ̄/2)
    D = tau.dL_inv(np.stack([hh * xi, -hh * xi, -hh * xb]), check=False)
    r1 = _mtv(D[1], w) + hh * iface.potential_grad(g0) - alpha0
    r2 = _mtv(D[0], w) - _mtv(D[2], wb)
    if not iface.is_constrained:
        return np.concatenate([r1, r2], axis=-1)
    mu = x[..., 2 * d:]
    T = tau(np.stack([hh * xi, hh * xb]), check=False)
    g1 = iface.group.compose(iface.group.compose(g0, T[0], check=False), T[1], check=False)
    return np.concatenate([r1 - _mtv(ell0, mu), r2, iface.holonomic_phi(g1)], axis=-1)


def rattle_jacobian(x, iface: SystemInterface, tau: Retraction, g0, h: float, ell0):
    d = iface.n
    hh = 0.5 * h
    xi, xb = x[..., :d], x[..., d:2 * d]
    J11 = _momentum_jac(iface, tau, "dR_inv", hh, xi)
    J21 = _momentum_jac(iface, tau, "dL_inv", hh, xi)
    J22 = -_momentum_jac(iface, tau, "dR_inv", hh, xb)
    Z = np.zeros(J11.shape)
    top = np.concatenate([J11, Z], axis=-1)
    mid = np.concatenate([J21, J22], axis=-1)
    if not iface.is_constrained:
        return np.concatenate([top, mid], axis=-2)
    k = ell0.shape[-2]
    tb = tau(hh * xb, check=False)
    g1 = iface.group.compose(iface.group.compose(g0, tau(hh * xi, check=False), check=False), tb,
                             check=False)
    ell1 = iface.holonomic_jacobian(g1)
    # g1 = g0 τ(a) τ(b): δa ↦ g1·hat(Ad_{τ(−b)} dL(a) δa), δb ↦ g1·hat(dL(b) δb)
    J31 = (hh * ell1 @ iface.group.Ad(iface.group.inverse(tb, check=False), check=False)
           @ tau.dL(hh * xi, check=False))
    J32 = hh * ell1 @ tau.dL(hh * xb, check=False)
    batch = J11.shape[:-2]
    top = np.concatenate([top, np.broadcast_to(-np.swapaxes(ell0, -1, -2), (*batch, d, k))],
                         axis=-1)
    mid = np.concatenate([mid, np.zeros((*batch, d, k))], axis=-1)
    bottom = np.concatenate([J31, J32, np.zeros((*batch, k, k))], axis=-1)
    return np.concatenate([top, mid, bottom], axis=-2)


# --------------------------------------------------------------------------------------------
# The method
# --------------------------------------------------------------------------------------------
def _kind_validator(_inst, _attr, value):
    if value not in _KINDS:
        raise InputError(
            f"`kind` must be one of {', '.join(map(repr, _KINDS))}, got {value!r}."
        )


def _retraction_validator(_inst, _attr, value):
    if value not in _RETRACTIONS:
        raise InputError(
            f"`retraction` must be 'cayley' or 'exp', got {value!r}."
        )


@attrs.frozen
class LieDiscretizationMapMethod(Method):
    """Lie-group integrators from discretization maps (paper §6, App. A).

    Symplectic on ``Leg_L(TN)`` (left-trivialized), the constraint ``φ(g_k) = 0`` and the
    tangency ``ℓ(g_k)𝕀⁻¹α_k = 0`` hold to solver tolerance.

    * ``"euler_a"``: R_d(g, ξ) = (g, gτ(ξ)) (paper §6.2); order 1.
    * ``"euler_b"``: R_d(g, ξ) = (gτ(−ξ), g) (paper §6.2); order 1.
    * ``"lobatto2"``: the paper's "2-stage Lobatto IIIA–IIIB pair" (6.4)–(6.7), i.e.
      Euler B(h/2) ∘ Euler A(h/2) with g_{1/2} ∈ N (paper (6.4)–(6.7); see the errata on the
      docs' theory page); symmetric, order 2.  Not RATTLE.
    * ``"rattle"``: the Lie RATTLE (6.8)–(6.10), one joint Phase-1 solve with the
      intermediate point unconstrained (paper (6.8)–(6.10)); symmetric, order 2.

    For ``G = Rⁿ`` they reduce to the vector-space methods (Euler A/B, B∘A, RATTLE).

    Compiled backend (``backend=``, issue 17; :mod:`._compiled_lie_dmaps`): every ``kind``
    with either retraction runs compiled on an unconstrained, unforced ``ℓ = ½ηᵀ𝕀η − V(g)``
    with constant 𝕀 built by ``symbolic.from_trivialized_lagrangian`` on a group of
    :func:`chetaev.liegroups.compiled_support` (SO(3), SE(2), SE(3), their products with
    Rⁿ; with Cayley the other matrix groups): the same Phase-1 equations (§6.2; (6.4)–(6.7)
    as two half-step solves; (6.8)–(6.10) as one joint solve in ``(ξ, ξ̄)``), unknowns,
    initial guess and Newton stopping rule as the numpy step, with the analytic Jacobian.
    A holonomic constraint (no compiled kernels on a group), an external force and
    ``NewtonOptions(finite_differences=True)`` run on numpy (``"auto"``) or raise
    :class:`~chetaev.discrete_lagrangian.core._backend.BackendError` naming the cause
    (``"numba"``). The compiled step records no ``carry`` (``step_linearization`` re-runs
    the numpy step).

    Parameters
    ----------
    kind : {"euler_a", "euler_b", "lobatto2", "rattle"}
    retraction : {"cayley", "exp"}
        The retraction τ (Cayley with the ½ convention ``(I − ξ̂/2)⁻¹(I + ξ̂/2)``).
    newton : NewtonOptions
    """

    kind: str = attrs.field(validator=_kind_validator)
    retraction: str = attrs.field(default="cayley", validator=_retraction_validator)
    newton: NewtonOptions = attrs.field(factory=lambda: NewtonOptions(tol=_TOL, simplified=True),
                                        validator=is_newton_options)

    supports_forces = True
    #: A compiled (numba) step of every kind (issue 17; :mod:`._compiled_lie_dmaps`).
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: SystemInterface) -> tuple[str, Any]:
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled_lie_dmaps`)."""
        from ._compiled_lie_dmaps import compiled_plan

        return compiled_plan(self.kind, self.retraction, self.newton, system, iface)

    @property
    def order(self) -> int:
        return 1 if self.kind in ("euler_a", "euler_b") else 2

    @property
    def guarantees(self) -> dict[str, float]:
        """Constraint levels held at every node and the tolerance they are solved to (the
        post-condition :func:`~chetaev.discrete_lagrangian.integrate` checks)."""
        return {"position": self.newton.tol, "velocity": self.newton.tol}

    @property
    def symmetric(self) -> bool:
        return self.kind in ("lobatto2", "rattle")

    @property
    def name(self) -> str:
        return f"Lie {self.kind} ({self.retraction})"

    # -- protocol ------------------------------------------------------------------------
    def _initial_state_impl(self, system, q0, v0, t0: float = 0.0, u: Any = None) -> State:
        """Check ``g0 ∈ G``, ``φ(g0) = 0`` and ``ℓ(g0)ξ0 = 0``; ``α0 = 𝕀ξ0`` (λ₀ of the forced
        equations at ``u`` for a forced constrained system)."""
        iface = lie_interface(system)
        g0 = as_group_element(q0, iface.group, "q0")
        xi0 = as_vector(v0, "v0", n=iface.n)
        t0 = as_float(t0, "t0")
        lam0 = None
        if iface.is_constrained:
            pos = float(np.max(np.abs(iface.holonomic_phi(g0)), initial=0.0))
            vel = float(np.max(np.abs(_mv(iface.holonomic_jacobian(g0), xi0)), initial=0.0))
            if pos > _INITIAL_TOL:
                raise ConstraintViolationError(
                    f"q0 is off the constraint set: max |φ(g0)| = {pos:.2e} > "
                    f"{_INITIAL_TOL:.0e}. Project g0 onto φ(g) = 0 before integrating."
                )
            if vel > _INITIAL_TOL * max(1.0, float(np.max(np.abs(xi0)))):
                raise ConstraintViolationError(
                    f"v0 is not tangent to the constraint set: max |ℓ(g0) ξ0| = {vel:.2e} > "
                    f"{_INITIAL_TOL:.0e}. Remove the normal component of ξ0 (project it onto "
                    f"ker ℓ(g0))."
                )
            lam0 = np.asarray(iface.multiplier(g0, xi0), dtype=float)
            if iface.force is not None and (u is not None or not iface.n_controls):
                lam0 = _forced_multiplier(system, g0, xi0, lam0, u)
        try:
            batch = np.broadcast_shapes(g0.shape[:-2], xi0.shape[:-1])
        except ValueError:
            raise InputError(
                f"{self.name}: the batch shapes of q0 {g0.shape[:-2]} and v0 {xi0.shape[:-1]} "
                "do not broadcast; pass one velocity per initial element (same leading axes)."
            ) from None
        g0 = np.broadcast_to(g0, batch + g0.shape[-2:]).copy()
        xi0 = np.broadcast_to(xi0, (*batch, iface.n)).copy()
        return State(t=t0, q=g0, v=xi0, p=_mv(iface.inertia, xi0), lam=lam0, n=0)

    def _step_impl(self, system, state: State, h: float, u: Any = None) -> State:
        from chetaev.liegroups import retraction

        if u is None:
            from ..core._backend import resolve_backend

            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                return plan.step(state, h)
        iface = lie_interface(system)
        tau = retraction(iface.group, self.retraction)
        forcing = None
        if iface.force is not None:
            forcing = _Forcing(system, iface.force, iface.force_jacobians, u)
        if self.kind == "lobatto2":
            mid = _euler_step(iface, tau, "euler_a", state, 0.5 * h, self.newton, forcing)
            out = _euler_step(iface, tau, "euler_b", attrs.evolve(mid, n=state.n), 0.5 * h,
                              self.newton, forcing)
            info = {"newton_iterations": mid.info["newton_iterations"]
                    + out.info["newton_iterations"],
                    "residual": max(mid.info["residual"], out.info["residual"])}
            if forcing is not None:
                info["work"] = mid.info["work"] + out.info["work"]
            return attrs.evolve(out, t=state.t + h, n=state.n + 1, info=info)
        if self.kind == "rattle":
            return _rattle_step(iface, tau, state, h, self.newton, forcing)
        return _euler_step(iface, tau, self.kind, state, h, self.newton, forcing)

    def _step_linearization_impl(self, system, state: State, h: float, u: Any,
                                 new: State) -> Any:
        """(A, B) in the tangent coordinates (ε, δα) of the method's retraction (issue 20).

        The state (g, α) is perturbed as (g τ(ε), α + δα) and the next state read in the
        same chart, g1' = g1 τ(ζ) (the coordinates ``"(xi, mu)"`` of
        :func:`~chetaev.discrete_lagrangian.core._linearization.lie_step_jacobians`); ``A =
        ∂(ζ, δα1)/∂(ε, δα)``, ``B = ∂(ζ, δα1)/∂u``, from the converged Phase-1 Newton matrix
        of (6.8)–(6.10) / §6.2 by the implicit function theorem (:func:`lie_dmap_jacobians`).
        ``lobatto2`` is Euler B(h/2) ∘ Euler A(h/2): the chain rule of
        :class:`~chetaev.discrete_lagrangian.discretization_maps.Composition`. With a
        constraint, ``basis``/``next_basis`` span the tangent spaces of {φ(g) = 0,
        ℓ(g)𝕀⁻¹α = 0} in those coordinates.
        """
        from ..core._linearization import StepLinearization, tangent_fields
        from ._lie_vprk import _lie_holonomic_basis

        if self.kind == "lobatto2":
            from ._dmaps_euclid import Composition

            half = [self.evolve(kind=k) for k in ("euler_a", "euler_b")]
            comp = Composition(half, (0.5, 0.5))
            return comp._step_linearization_impl(system, state, h, u, new)
        from chetaev.liegroups import retraction

        iface = lie_interface(system)
        tau = retraction(iface.group, self.retraction)
        A, B = lie_dmap_jacobians(iface, tau, self.kind, state, new, h, u)
        if not iface.is_constrained:
            return StepLinearization(state=new, A=A, B=B, coordinates="(xi, mu)")
        E0 = _lie_holonomic_basis(system, np.asarray(state.q), np.asarray(state.v))
        E1 = _lie_holonomic_basis(system, np.asarray(new.q), np.asarray(new.v))
        return StepLinearization(state=new, A=A, B=B, coordinates="(xi, mu)",
                                 **tangent_fields(E0, E1, A, B))


def lie_dmap_jacobians(iface: SystemInterface, tau: Retraction, kind: str, state: State,
                       new: State, h: float, u: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)`` of one Lie Euler A / B or RATTLE step (§6.2, (6.8)–(6.10)) in the
    coordinates (ε, δα) → (ζ, δα1) (:meth:`LieDiscretizationMapMethod._step_linearization_impl`).

    The step writes g1 = g0 τ(a) [τ(b)] with a = hξ (Euler) or a = hξ/2, b = hξ̄/2 (RATTLE),
    the unknowns x = (ξ[, ξ̄], μ) solving R(x; g0, α0, u) = 0 (:func:`euler_residual`,
    :func:`rattle_residual` with the forced terms), J = ∂R/∂x their Newton matrix
    (:func:`euler_jacobian`, :func:`rattle_jacobian`, plus −c F_ξ of the α0 equation's force
    with c = h or h/2). With f the left-trivialized gradient of V (∂f/∂g = −D11L) and
    H = ∂ℓ/∂g the constraint's Hessian, the parameter derivatives are

        ∂R/∂ε:  α0 row  c(∂f/∂g − F_g)(g0)  [where the force/potential sits at g0]
                        − Σ_a μ_a H_a(g0);     φ row  ℓ(g1) Ad_{(τ(a)τ(b))⁻¹}
        ∂R/∂δα = [−I, 0, 0],   ∂R/∂u: α0 row −c F_u(g0, ξ),

    d x = −J⁻¹ ∂R/∂(ε, δα, u), then ζ = Ad_{(τ(a)τ(b))⁻¹} ε + Ad_{τ(b)⁻¹} dL(a) da +
    dL(b) db and α1* = dL⁻¹(·)ᵀ𝕀ξ_last [− c f(g1) + c F(g1, ξ_last)] differentiated
    (``_momentum_jac``), projected onto ℓ(g1)𝕀⁻¹α1 = 0
    (:func:`~chetaev.discrete_lagrangian.core._dmaps_kernels.project_momentum_jacobian`).
    """
    from ..core._dmaps_kernels import project_momentum_jacobian

    group = iface.group
    g0, g1 = np.asarray(state.q, dtype=float), np.asarray(new.q, dtype=float)
    x = np.asarray(new.carry["x"], dtype=float)
    d = iface.n
    rattle = kind == "rattle"
    c = 0.5 * h if rattle else h
    xi = x[..., :d]
    xl = x[..., d:2 * d] if rattle else xi  # the velocity of the last factor
    nx = x.shape[-1]
    nu = int(iface.n_controls or 0)
    batch = np.broadcast_shapes(x.shape[:-1], g0.shape[:-2], np.shape(state.p)[:-1])
    forced = iface.force is not None
    if rattle:
        J = rattle_jacobian(x, iface, tau, g0, h, iface.holonomic_jacobian(g0)
                            if iface.is_constrained else None)
        Ta, Tb = tau(c * xi, check=False), tau(c * xl, check=False)
        T = group.compose(Ta, Tb, check=False)
    else:
        J = euler_jacobian(x, iface, tau, g0, h, iface.holonomic_jacobian(g0)
                           if iface.is_constrained else None)
        T = tau(h * xi, check=False)
    J = np.array(np.broadcast_to(J, (*batch, nx, nx)))
    AdTi = np.broadcast_to(group.Ad(group.inverse(T, check=False), check=False), (*batch, d, d))
    at_g0 = rattle or kind == "euler_a"  # the potential and force sit at g0 in the α0 row
    K_ = 2 * d + nu
    R = np.zeros((*batch, nx, K_))
    if at_g0:
        R[..., :d, :d] -= c * np.asarray(iface.D11L(g0, xi), dtype=float)
    R[..., :d, d:2 * d] = -np.eye(d)
    if forced and at_g0:
        Fg, Fx, Fu = iface.force_jacobians(g0, xi, u)
        J[..., :d, :d] -= c * Fx
        R[..., :d, :d] -= c * Fg
        if nu:
            R[..., :d, 2 * d:] -= c * Fu
    if iface.is_constrained:
        k = iface.holonomic_jacobian(g0).shape[-2]
        mu = x[..., nx - k:]
        H0 = np.asarray(iface.holonomic_hessian(g0), dtype=float)
        R[..., :d, :d] -= np.einsum("...akj,...a->...kj", H0, mu)
        R[..., nx - k:, :d] = iface.holonomic_jacobian(g1) @ AdTi
    dx = -np.linalg.solve(J, R)  # (..., nx, 2d + nu)
    zeta = np.zeros((*batch, d, K_))
    zeta[..., :d] = AdTi
    if rattle:
        Abi = group.Ad(group.inverse(Tb, check=False), check=False)
        zeta += c * (Abi @ tau.dL(c * xi, check=False)) @ dx[..., :d, :]
        zeta += c * tau.dL(c * xl, check=False) @ dx[..., d:2 * d, :]
        dxl = dx[..., d:2 * d, :]
    else:
        zeta += h * tau.dL(h * xi, check=False) @ dx[..., :d, :]
        dxl = dx[..., :d, :]
    a1 = _mtv(tau.dL_inv(c * xl, check=False), _mv(iface.inertia, xl))
    da1 = _momentum_jac(iface, tau, "dL_inv", c, xl) @ dxl
    if rattle or kind == "euler_b":  # −c f(g1) + c F(g1, ξ_last) in the α1 equation
        a1 = a1 - c * iface.potential_grad(g1)
        da1 = da1 + c * np.asarray(iface.D11L(g1, xl), dtype=float) @ zeta
        if forced:
            a1 = a1 + c * iface.force(g1, xl, u)
            Fg1, Fx1, Fu1 = iface.force_jacobians(g1, xl, u)
            da1 = da1 + c * (Fg1 @ zeta + Fx1 @ dxl)
            if nu:
                da1[..., 2 * d:] += c * Fu1
    if iface.is_constrained:
        _, da1 = project_momentum_jacobian(a1, iface.holonomic_jacobian(g1),
                                           np.asarray(iface.holonomic_hessian(g1), dtype=float),
                                           iface.inertia_inv, zeta, da1)
    full = np.concatenate([zeta, da1], axis=-2)
    return full[..., : 2 * d], full[..., 2 * d:]


@attrs.frozen
class _Forcing:
    """The left-trivialized external force of a step: ``F(g, ξ)``, ``∂F/∂ξ`` and the
    control (module docstring)."""

    system: Any
    force: Any
    jacobians: Any
    u: Any

    def F(self, g, xi):
        return self.force(g, xi, self.u)

    def F_xi(self, g, xi):
        return self.jacobians(g, xi, self.u)[1]


def _dot(a, b):
    return np.einsum("...i,...i->...", a, b)


def _solve(fun, jac, x0, options, state, scale):
    res = newton_solve(fun, x0, jac=jac, options=options, scale=scale)
    if not res.all_converged:
        raise ConvergenceError(
            step=state.n, t=state.t, residual=float(np.max(res.residual)),
            tol=float(np.max(res.tol)), iterations=int(res.iterations), hint=_HINT,
        )
    return res


def _scale(alpha0):
    return np.maximum(1.0, np.max(np.abs(alpha0), axis=-1))


def _finish(iface, state, g1, alpha1_star, h, res, mu_scale, forcing=None, work=None):
    """The State at g1 with α1 the projection of ``alpha1_star``; ``carry["x"]`` keeps the
    converged Phase-1 unknowns (read by the step linearization)."""
    alpha1, mu = _project(iface, g1, alpha1_star)
    info = {"newton_iterations": int(res.iterations), "residual": float(np.max(res.residual))}
    if work is not None:
        info["work"] = work
    xi1 = _mv(iface.inertia_inv, alpha1)
    lam = None
    if mu is not None:
        # raw node multiplier in info; State.lam is the consistent λ(g_k, ξ_k) (the scaling
        # of a multiplier is a convention)
        info["lam_right"] = mu / mu_scale
        lam = np.asarray(iface.multiplier(g1, xi1), dtype=float)
        if forcing is not None:
            lam = _forced_multiplier(forcing.system, g1, xi1, lam, forcing.u)
    return attrs.evolve(state, t=state.t + h, q=g1, p=alpha1, v=xi1, n=state.n + 1,
                        info=info, lam=lam, carry={"x": res.x})


def _euler_step(iface: SystemInterface, tau: Retraction, kind: str, state: State, h: float,
                options, forcing: _Forcing | None = None) -> State:
    g0, alpha0 = state.q, state.p
    d = iface.n
    xi0 = _mv(iface.inertia_inv, alpha0)
    if iface.is_constrained:
        ell0 = iface.holonomic_jacobian(g0)
        k = ell0.shape[-2]
        x0 = np.concatenate([xi0, np.zeros((*xi0.shape[:-1], k))], axis=-1)
    else:
        ell0 = None
        x0 = xi0
    push = forcing is not None and kind == "euler_a"  # Euler A: −hF(g0, ξ) in the α0 equation

    def fun(x):
        r = euler_residual(x, iface, tau, g0, alpha0, h, kind, ell0)
        if push:
            r = r.copy()
            r[..., :d] -= h * forcing.F(g0, x[..., :d])
        return r

    def jac(x):
        J = euler_jacobian(x, iface, tau, g0, h, ell0)
        if push:
            J = J.copy()
            J[..., :d, :d] -= h * forcing.F_xi(g0, x[..., :d])
        return J

    res = _solve(fun, jac, x0, options, state, _scale(alpha0))
    xi = res.x[..., :d]
    g1 = iface.group.compose(g0, tau(h * xi, check=False), check=False)
    alpha1 = _mtv(tau.dL_inv(h * xi, check=False), _mv(iface.inertia, xi))
    if kind == "euler_b":
        alpha1 = alpha1 - h * iface.potential_grad(g1)
    work = None
    if forcing is not None:
        Fk = forcing.F(g0, xi) if kind == "euler_a" else forcing.F(g1, xi)
        if kind == "euler_b":
            alpha1 = alpha1 + h * Fk
        work = h * _dot(Fk, xi)
    return _finish(iface, state, g1, alpha1, h, res, h, forcing, work)


def _rattle_step(iface: SystemInterface, tau: Retraction, state: State, h: float,
                 options, forcing: _Forcing | None = None) -> State:
    g0, alpha0 = state.q, state.p
    d = iface.n
    hh = 0.5 * h
    xi0 = _mv(iface.inertia_inv, alpha0)
    parts = [xi0, xi0]
    ell0 = None
    if iface.is_constrained:
        ell0 = iface.holonomic_jacobian(g0)
        parts.append(np.zeros((*xi0.shape[:-1], ell0.shape[-2])))
    def fun(x):
        r = rattle_residual(x, iface, tau, g0, alpha0, h, ell0)
        if forcing is not None:  # −(h/2)F(g0, ξ) in the α0 equation (6.8)
            r = r.copy()
            r[..., :d] -= hh * forcing.F(g0, x[..., :d])
        return r

    def jac(x):
        J = rattle_jacobian(x, iface, tau, g0, h, ell0)
        if forcing is not None:
            J = J.copy()
            J[..., :d, :d] -= hh * forcing.F_xi(g0, x[..., :d])
        return J

    res = _solve(fun, jac, np.concatenate(parts, axis=-1), options, state, _scale(alpha0))
    xi, xb = res.x[..., :d], res.x[..., d:2 * d]
    g1 = iface.group.compose(iface.group.compose(g0, tau(hh * xi, check=False), check=False),
                             tau(hh * xb, check=False), check=False)
    alpha1 = (_mtv(tau.dL_inv(hh * xb, check=False), _mv(iface.inertia, xb))
              - hh * iface.potential_grad(g1))
    work = None
    if forcing is not None:
        F0, F1 = forcing.F(g0, xi), forcing.F(g1, xb)
        alpha1 = alpha1 + hh * F1
        work = hh * (_dot(F0, xi) + _dot(F1, xb))
    return _finish(iface, state, g1, alpha1, h, res, hh, forcing, work)
