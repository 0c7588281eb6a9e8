"""Lie-group variational PRK (VPRKMK): paper Theorem 6.1 (paper Thm. 6.1) and §6.3 (paper §6.3)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import HypothesisError, InputError
from .._util._validation import as_group_element, as_vector
from ..core._forcing import discrete_work, forced_hooks
from ..core._lie_prk import solve_lie_stages
from ..core._pair_method import PairMethod
from ..core._prk import PRKCoefficients, coefficients_from
from ..core._solver import NewtonOptions
from ..core._state import State
from ._checks import is_newton_options, is_tolerance
from ._common import check_symplectic

__all__ = ["LieHolonomicStageHooks", "LieVPRK"]

_KINDS = ("cayley", "exp")


class LieHolonomicStageHooks:
    """Hooks of §6.3 for :func:`~chetaev.discrete_lagrangian.core._lie_prk.lie_prk_residual`.

    force: T^i = ⟨Λ^i, (dLτ_{Ξ^i})* L*_{G^i} DΦ(G^i)⟩, i.e. the trivialized force
    ``J(G^i)ᵀ Λ^i`` inside the bracket of N^i; all Λ^i free; equations Φ(G^i) = 0
    (i = 2..s) and the tangency ``J(g_{k+1}) η_{k+1} = 0`` with η_{k+1} = D2ℓ⁻¹(μ_{k+1}).
    """

    def __init__(self, system: Any, s: int, m: int) -> None:
        self.system = system
        self.constraint = system.constraint
        self.m = m
        self.free = (True,) * s

    def force(self, G, Omega, Lam):
        return np.einsum("...iak,...ia->...ik", self.constraint.jacobian(G), Lam)

    def analytic_stage_jacobian(self) -> bool:
        """The Newton Jacobian is analytic when the constraint has a closed-form Hessian (and
        the system closed-form second derivatives, checked by the solver)."""
        return not getattr(self.constraint, "fd_hessian", True)

    def force_jacobian(self, ev, zeta, dOm, dLam):
        """δ[J(G^i)ᵀΛ^i] = [Σ_a Λ_a Hess Φ_a(G^i)] ζ^i + J(G^i)ᵀ δΛ^i."""
        con = self.constraint
        dFg = np.einsum("...ia,...iakj->...ikj", ev.Lam, con.hessian(ev.G))
        return dFg @ zeta + np.swapaxes(con.jacobian(ev.G), -1, -2) @ dLam

    def equations_jacobian(self, ev, D):
        """δΦ(G^i) = J(G^i) ζ^i; tangency δ[J(g1) η1] = [Σ_k η1_k Hess Φ(g1)_{·k·}] δg1
        + J(g1) δη1 with δg1 = ζ_ξ (trivialized), δη1 = D22ℓ⁻¹(δμ1 − D21ℓ δg1)."""
        con, sysm = self.constraint, self.system
        s, m = len(self.free), self.m
        Jc = con.jacobian(ev.G)  # (..., s, m, d)
        zeta = D["zeta"]
        n = zeta.shape[-1]
        dPhi = Jc[..., 1:, :, :] @ zeta[..., 1:, :, :]
        dPhi = dPhi.reshape((*dPhi.shape[:-3], (s - 1) * m, n))
        g1, mu1 = ev.g1, ev.mu1
        eta1 = sysm.legendre_inv(g1, mu1)
        dg1 = D["zeta_xi"]
        deta1 = np.linalg.solve(sysm.D22L(g1, eta1), D["dmu1"] - sysm.D21L(g1, eta1) @ dg1)
        H1 = con.hessian(g1)
        dT = np.einsum("...akj,...k->...aj", H1, eta1) @ dg1 + con.jacobian(g1) @ deta1
        batch = np.broadcast_shapes(dPhi.shape[:-2], dT.shape[:-2])
        return np.concatenate([np.broadcast_to(M, (*batch, *M.shape[-2:]))
                               for M in (dPhi, dT)], axis=-2)

    def stage_jacobian(self, ev, tau):
        """Exact Jacobian of (26) plus :meth:`equations` in x = (H, Λ)."""
        from ..core._lie_prk import lie_stage_jacobian

        return lie_stage_jacobian(ev, self.system, tau, self)

    def equations(self, ev):
        G_ = self.system.group
        gnd = len(tuple(G_.shape))
        Gs = ev.G[(Ellipsis, slice(1, None)) + (slice(None),) * gnd]
        Phi = self.constraint.phi(Gs)
        eta1 = self.system.legendre_inv(ev.g1, ev.mu1)
        T = np.einsum("...ak,...k->...a", self.constraint.jacobian(ev.g1), eta1)
        Phi = Phi.reshape((*Phi.shape[:-2], -1))
        bs = np.broadcast_shapes(Phi.shape[:-1], T.shape[:-1])
        return np.concatenate([np.broadcast_to(Phi, bs + Phi.shape[-1:]),
                               np.broadcast_to(T, bs + T.shape[-1:])], axis=-1)


@attrs.frozen(eq=False)
class LieVPRK(PairMethod):
    """Lie-group variational partitioned Runge–Kutta–Munthe-Kaas integrator (VPRKMK).

    Symplectic (a variational integrator of the discrete Hamilton–Pontryagin action (23))
    and momentum preserving for symmetric Lagrangians; the configuration stays exactly on
    the group (g_{k+1} = g_k τ(ξ)). Expected order: that of the pair (2s for Gauss(s),
    2s − 2 for Lobatto IIIA–IIIB(s)). For a free rigid body the Casimir |Π| is preserved
    exactly (μ_{k+1} = Ad*_{τ(ξ)}[...] is an orthogonal transformation of μ_k when the
    force vanishes). When the system is a ``ConstrainedSystem`` with a holonomic constraint
    on the group, the §6.3 version is used (needs H1–H3; constraint and tangency hold at the
    nodes to solver tolerance).

    Equations (paper eqs. (24)–(27), Theorem 6.1; §6.3; paper Thm. 6.1; §6.3): see
    ``chetaev.discrete_lagrangian.core._lie_prk``. Unknowns H^1..H^s (and Λ^1..Λ^s).

    **External forces** (a system built with ``force=``; issue 20): the forced discrete
    Lagrange–d'Alembert principle (Marsden & West 2001 §3.2) adds the left-trivialized force
    at the stages once, Fⁱ = L*_{Gⁱ} D₁ℓ(Gⁱ, Ωⁱ) + F(Gⁱ, Ωⁱ, u) in eqs. (26)–(27) (the force
    enters like the configuration derivative, dual to the retraction), with the control
    ``u`` of ``step(..., u=)`` held over the step and its Jacobian in the Newton matrix
    (:class:`~chetaev.discrete_lagrangian.core._forcing.ForcedLieStageHooks`). The step's
    ``info["work"]`` is the discrete work h Σᵢ bᵢ F(Gⁱ, Ωⁱ, u)·Ωⁱ (equal to the energy change
    to the method's order). With a holonomic constraint λ₀ is the multiplier of the forced
    equations at the control given to ``initial_state(..., u=)``.

    Parameters
    ----------
    pair : PartitionedTableau or Tableau
        A symplectic pair; only (a, b) enter (â is its symplectic conjugate).
    retraction : {"cayley", "exp"}
        The retraction τ (the paper's experiments use Cayley).
    newton : NewtonOptions
    constraint_tol : float
        Tolerance of the initial-data check for a holonomic constraint.

    References
    ----------
    arXiv:1810.10926 §6.2–6.3; Bou-Rabee & Marsden, Found. Comput. Math. 9 (2009).
    """

    pair: Any
    retraction: str = "cayley"
    newton: NewtonOptions = attrs.field(factory=NewtonOptions, validator=is_newton_options)
    constraint_tol: float = attrs.field(default=1e-10, validator=is_tolerance)
    coeffs: PRKCoefficients = attrs.field(init=False)
    _cache: dict = attrs.field(init=False, factory=dict, repr=False)
    family = "LieVPRK"
    supports_forces = True
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: Any) -> tuple[str, Any]:
        """``(why_not, plan)``: the compiled plan (issue 17,
        :mod:`~chetaev.discrete_lagrangian.core._compiled_lie`) for an unconstrained, unforced
        ℓ = ½ηᵀ𝕀η − V(g) built by ``symbolic.from_trivialized_lagrangian`` on SO(3), SE(2),
        SE(3) or their products with Rⁿ (with Cayley also the other matrix groups of
        ``chetaev.liegroups``), with either retraction, Cayley or exp."""
        from ..core._compiled_lie import lie_plan

        k = iface.kernels
        if k.constraint is not None or hasattr(system, "constraint"):
            return "a constrained system", None
        if iface.force is not None:
            return "a forced system (external forces run on numpy for now)", None
        hit = self._cache.get("compiled")
        if hit is not None and hit[0] is k:
            return hit[1], hit[2]
        why, plan = lie_plan(k, system.group, self.retraction, self.coeffs, self.newton)
        self._cache["compiled"] = (k, why, plan)
        return why, plan

    def __attrs_post_init__(self) -> None:
        if self.retraction not in _KINDS:
            raise InputError(
                f"`retraction` must be 'cayley' or 'exp', got {self.retraction!r}."
            )
        coeffs = coefficients_from(self.pair)
        check_symplectic(coeffs, "LieVPRK")
        object.__setattr__(self, "coeffs", coeffs)

    def _name_details(self) -> str:
        """The pair and the retraction."""
        return f"{self.coeffs.name}, {self.retraction}"

    @property
    def guarantees(self) -> dict[str, float]:
        """With a holonomic constraint: Φ(g_k) = 0 and the tangency at every node to the
        Newton tolerance (the post-condition :func:`~chetaev.discrete_lagrangian.integrate`
        checks; ignored for unconstrained systems)."""
        return {"position": self.newton.tol, "velocity": self.newton.tol}

    def _tau(self, group: Any):
        key = ("tau", id(group))
        hit = self._cache.get(key)
        if hit is None or hit[0] is not group:  # ids are reused (and stale after pickling)
            from chetaev.liegroups import retraction

            hit = self._cache[key] = (group, retraction(group, self.retraction))
        return hit[1]

    def _check_holonomic_pair(self) -> None:
        if "hyp" not in self._cache:
            from chetaev.rktableaux import PartitionedTableau, symplectic_pair

            p = self.pair if isinstance(self.pair, PartitionedTableau) else symplectic_pair(
                self.pair)
            self._cache["hyp"] = p.satisfies_constrained_hypotheses()
        hyp = self._cache["hyp"]
        if not hyp.all:
            raise HypothesisError(
                f"LieVPRK with a holonomic constraint (§6.3) needs H1–H3: {hyp.message}"
            )

    def _initial_state_impl(self, system: Any, q0: Any, v0: Any, t0: float = 0.0,
                            u: Any = None) -> State:
        """Check (g0, η0) (group membership, constraints); add μ0 = ∂ℓ/∂η and λ0 (of the
        forced equations at the control ``u`` for a forced constrained system)."""
        group = getattr(system, "group", None)
        if group is None:
            raise InputError(
                "LieVPRK integrates systems on a Lie group (TrivializedLagrangianSystem / "
                "TrivializedMechanicalSystem); for a vector space use VPRK."
            )
        g0 = as_group_element(q0, group, "q0")
        eta0 = as_vector(v0, "v0", group.dim)
        gnd = len(tuple(group.shape))
        try:
            batch = np.broadcast_shapes(g0.shape[: g0.ndim - gnd], eta0.shape[:-1])
        except ValueError:
            raise InputError(
                f"LieVPRK: the batch shapes of q0 {g0.shape[: g0.ndim - gnd]} and v0 "
                f"{eta0.shape[:-1]} do not broadcast; pass one velocity per initial element "
                "(same leading axes)."
            ) from None
        g0 = np.array(np.broadcast_to(g0, batch + tuple(group.shape)))
        eta0 = np.array(np.broadcast_to(eta0, (*batch, group.dim)))
        lam0 = None
        if hasattr(system, "constraint"):
            if not system.is_holonomic:
                raise InputError(
                    "LieVPRK handles holonomic constraints; for nonholonomic constraints on a "
                    "group use chetaev.nh_integrators."
                )
            self._check_holonomic_pair()
            system.check_initial(g0, eta0, tol=self.constraint_tol)
            lam0 = np.asarray(system.multiplier(g0, eta0))
            if getattr(system, "has_force", False) is True and (
                    u is not None or not system.n_controls):
                from ._constrained_prk import _forced_multiplier

                lam0 = _forced_multiplier(system, g0, eta0, lam0, u)
        return State(t=t0, q=g0, v=eta0,
                     p=np.asarray(system.legendre(g0, eta0)), lam=lam0)

    def _step_impl(self, system: Any, state: State, h: float, u: Any = None) -> State:
        """One step (g_k, μ_k) → (g_{k+1}, μ_{k+1}) (eqs. 24–27); ``u``: the control of a
        forced system (the stage force F(Gⁱ, Ωⁱ, u) is added to Fⁱ)."""
        if u is None:
            from ..core._backend import resolve_backend

            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                return plan.step(state, h)
        group = system.group
        tau = self._tau(group)
        s, d = self.coeffs.s, group.dim
        g, mu, eta = state.q, state.p, state.v
        batch = eta.shape[:-1]
        Hp = state.carry.get("H")
        if Hp is not None and np.shape(Hp) == (*batch, s, d):
            H0 = Hp + (eta - state.carry["v_prev"])[..., None, :]
        else:
            H0 = np.broadcast_to(eta[..., None, :], (*batch, s, d))
        parts = [H0.reshape((*batch, s * d))]
        hooks = None
        if state.lam is not None:
            m = state.lam.shape[-1]
            hooks = LieHolonomicStageHooks(system, s, m)
            Lp = state.carry.get("Lam")
            if Lp is not None and np.shape(Lp) == (*batch, s, m):
                L0 = Lp + (Lp[..., -1:, :] - Lp[..., :1, :])
            else:
                L0 = np.broadcast_to(state.lam[..., None, :], (*batch, s, m))
            parts.append(L0.reshape((*batch, s * m)))
        x0 = np.concatenate(parts, axis=-1)
        hooks = forced_hooks(system, hooks, u, s, lie=True)
        _, ev, iters, resid, rate = solve_lie_stages(
            x0, g, mu, h, self.coeffs, system, tau, hooks, self.newton, state)
        eta1 = system.legendre_inv(ev.g1, ev.mu1)
        carry = {"H": ev.H, "v_prev": eta}
        lam1 = None
        if state.lam is not None:
            carry["Lam"] = ev.Lam
            lam1 = ev.Lam[..., -1, :]
        info = {"newton_iterations": iters, "residual": resid, "newton_rate": rate}
        work = discrete_work(hooks, ev)
        if work is not None:
            info["work"] = work
        return State(t=state.t + h, q=ev.g1, v=eta1, p=ev.mu1, lam=lam1, n=state.n + 1,
                     carry=carry, info=info)

    def _step_linearization_impl(self, system: Any, state: State, h: float, u: Any,
                                 new: State) -> Any:
        """(A, B) in the tangent coordinates of the method's retraction (issue 20).

        The state (g, μ) is perturbed as (g τ(ε), μ + δμ), ε ∈ 𝔤 left-trivialized, τ the
        method's retraction, and the next state is read in the same chart; ``A =
        ∂(ζ_{k+1}, δμ_{k+1})/∂(ε, δμ)`` ``(..., 2d, 2d)`` from the converged Newton matrix of
        eqs. (24)–(27) (Thm. 6.1) by the implicit function theorem
        (:func:`~chetaev.discrete_lagrangian.core._linearization.lie_step_jacobians`).
        Unforced the step is symplectic in the canonical form of T*G written in these
        coordinates, Aᵀ Ω(μ_{k+1}) A = Ω(μ_k) with Ω(μ) = [[C(μ), I], [−I, 0]],
        C(μ)_ij = ⟨ad*_{e_i} μ, e_j⟩ = ⟨μ, [e_i, e_j]⟩ (ω = −dθ of θ = ⟨μ, g⁻¹dg⟩); it
        depends on μ, and A is not symplectic for the constant Ω (C = 0) unless the group
        is abelian (measured in ``tests/test_linearization.py``). For a forced system the
        IFT solves with the step's forced hooks
        (:class:`~chetaev.discrete_lagrangian.core._forcing.ForcedLieStageHooks`): the
        force's left-trivialized g- and η-derivatives are in the Newton matrix, and
        ``B = ∂(ζ_{k+1}, δμ_{k+1})/∂u`` ``(..., 2d, n_controls)`` follows from the stage
        force's F_u(Gⁱ, Ωⁱ, u) in Fⁱ of eqs. (26)–(27) (zero columns without a force).
        With a holonomic constraint (§6.3) the multipliers Λ¹..Λˢ are
        among the unknowns of the IFT solve and ``basis``/``next_basis`` are orthonormal
        bases (2d − 2m columns) of the tangent spaces of {Φ(g) = 0, J(g) Fℓ⁻¹(g, μ) = 0} in
        the coordinates (ε, δμ) (:func:`_lie_holonomic_basis`).
        """
        from ..core._interface import interface_of
        from ..core._linearization import (
            LinearizationNotSupportedError,
            StepLinearization,
            lie_step_jacobians,
            tangent_fields,
        )

        view = interface_of(system)
        if view.D11L is None:
            raise LinearizationNotSupportedError(
                f"{self.name}: step_linearization needs the system's second derivatives "
                "(D11L ... D22L) for the Newton matrix."
            )
        Hs = np.asarray(new.carry["H"], dtype=float)
        x = Hs.reshape((*Hs.shape[:-2], -1))
        hooks = None
        if state.lam is not None:  # §6.3: all Λⁱ unknowns of the step
            Lam = np.asarray(new.carry["Lam"], dtype=float)
            hooks = LieHolonomicStageHooks(system, self.coeffs.s, Lam.shape[-1])
            batch = np.broadcast_shapes(x.shape[:-1], Lam.shape[:-2])
            x = np.concatenate([np.broadcast_to(x, (*batch, x.shape[-1])),
                                np.broadcast_to(Lam, (*batch, *Lam.shape[-2:])).reshape(
                                    (*batch, -1))], axis=-1)
        holonomic = hooks is not None
        # the step's own hooks: a forced system's stage force (and its g-, η- and
        # u-derivatives) enter the IFT as they enter the step's Newton matrix
        hooks = forced_hooks(system, hooks, u, self.coeffs.s, lie=True)
        A, _, B = lie_step_jacobians(x, np.asarray(state.q, dtype=float),
                                     np.asarray(state.p, dtype=float), h, self.coeffs, system,
                                     self._tau(system.group), hooks)
        n_u = int(getattr(system, "n_controls", 0) or 0)
        if B.shape[-1] != n_u:  # an unforced system: no control columns
            B = np.zeros((*A.shape[:-1], n_u))
        if not holonomic:
            return StepLinearization(state=new, A=A, B=B, coordinates="(xi, mu)")
        E0 = _lie_holonomic_basis(system, np.asarray(state.q), np.asarray(state.v))
        E1 = _lie_holonomic_basis(system, np.asarray(new.q), np.asarray(new.v))
        return StepLinearization(state=new, A=A, B=B, coordinates="(xi, mu)",
                                 **tangent_fields(E0, E1, A, B))



def _lie_holonomic_basis(system: Any, g: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Orthonormal basis ``(..., 2d, 2d − 2m)`` of the tangent space at (g, μ) of
    {Φ(g) = 0, J(g) η = 0}, η = Fℓ⁻¹(g, μ) (§6.3), in the coordinates (ε, δμ) of
    :meth:`LieVPRK._step_linearization_impl`: the kernel of
    [[J, 0], [Hη − J G⁻¹ D21ℓ, J G⁻¹]] with J the left-trivialized Jacobian of Φ,
    (Hη)_aj = Σ_k η_k ∂J_ak/∂g_j (the constraint's Hessian, as in the step's tangency row)
    and G = D22ℓ (last right singular vectors)."""
    con = system.constraint
    J = np.asarray(con.jacobian(g), dtype=float)
    m = J.shape[-2]
    Hn = np.einsum("...akj,...k->...aj", np.asarray(con.hessian(g), dtype=float), eta)
    G = np.asarray(system.D22L(g, eta), dtype=float)
    JG = np.swapaxes(np.linalg.solve(np.swapaxes(G, -1, -2), np.swapaxes(J, -1, -2)), -1, -2)
    lower = Hn - JG @ np.asarray(system.D21L(g, eta), dtype=float)
    batch = np.broadcast_shapes(J.shape[:-2], lower.shape[:-2], JG.shape[:-2])
    top = np.concatenate([np.broadcast_to(J, (*batch, *J.shape[-2:])),
                          np.zeros((*batch, *J.shape[-2:]))], axis=-1)
    bottom = np.concatenate([np.broadcast_to(lower, (*batch, *lower.shape[-2:])),
                             np.broadcast_to(JG, (*batch, *JG.shape[-2:]))], axis=-1)
    _, _, Vt = np.linalg.svd(np.concatenate([top, bottom], axis=-2), full_matrices=True)
    return np.swapaxes(Vt[..., 2 * m:, :], -1, -2)
