"""Holonomically constrained symplectic PRK, paper eq. (13) (paper §4.3; eq. (13)).

With the Lobatto IIIA–IIIB pair (s = 2) this is RATTLE.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import HypothesisError
from ..core._forcing import discrete_work, forced_hooks
from ..core._linearization import StepLinearization, prk_step_jacobians, tangent_linearization
from ..core._pair_method import PairMethod, pair_order
from ..core._prk import PRKCoefficients, coefficients_from, solve_stages
from ..core._solver import NewtonOptions
from ..core._state import State
from ._checks import is_flag, is_newton_options, is_tolerance
from ._common import check_symplectic, vector_initial_data

__all__ = ["ConstrainedPRK", "HolonomicStageHooks"]


class HolonomicStageHooks:
    """Hooks of eq. (13) for :func:`~chetaev.discrete_lagrangian.core._prk.prk_residual`.

    * force (hook i): W^i += ∂Φ/∂q(Q^i)ᵀ Λ^i;
    * multipliers (hook iii): all Λ^1..Λ^s are unknowns;
    * equations (hook ii): Φ(Q^i) = 0 for i = 2..s (i = 1 holds since Q^1 = q_k, H1) and
      the tangency ∂Φ/∂q(q_{k+1}) · v_{k+1} = 0 with D2L(q_{k+1}, v_{k+1}) = p_{k+1}
      (eq. 13d). Without H1 (``stage_constraints_from=0``, e.g. Gauss) the constraints are
      imposed at every stage and the tangency is dropped (the system stays square).

    A new object is made per step (it caches ∂Φ/∂q(Q) between ``force`` and ``equations``).
    """

    def __init__(self, system: Any, s: int, m: int, stage_constraints_from: int = 1) -> None:
        self.system = system
        self.constraint = system.constraint
        self.m = m
        self.free = (True,) * s
        self.first = stage_constraints_from
        self._JQ = None

    def force(self, Q, V, Lam, jacobian):
        JQ = self.constraint.jacobian(Q)  # (..., s, m, n)
        self._JQ = JQ
        F = np.einsum("...iak,...ia->...ik", JQ, Lam)
        if not jacobian:
            return F, None, None, None
        H = self.constraint.hessian(Q)  # (..., s, m, n, n)
        dF_dQ = np.einsum("...iakl,...ia->...ikl", H, Lam)
        return F, dF_dQ, None, np.swapaxes(JQ, -1, -2)

    def equations(self, ev):
        c = self.constraint
        f = self.first
        Qc = ev.Q[..., f:, :]
        Phi = c.phi(Qc)
        R = [Phi.reshape((*Phi.shape[:-2], -1))]
        want = ev.dW_dx is not None
        J = []
        if want:
            dPhi = self._JQ[..., f:, :, :] @ ev.dQ_dx[f:]  # (..., s-f, m, N)
            J.append(dPhi.reshape((*dPhi.shape[:-3], -1, dPhi.shape[-1])))
        if f == 1:
            base = getattr(self.system, "system", self.system)
            fast = bool(getattr(base, "is_mechanical", False)
                        and getattr(base, "constant_mass", False))
            if fast:
                Minv = base._Minv
                v1 = ev.p1 @ Minv.T
            else:
                v1 = base.legendre_inv(ev.q1, ev.p1)
            J1 = c.jacobian(ev.q1)  # (..., m, n)
            R.append((J1 @ v1[..., None])[..., 0])
            if want:
                if fast:
                    dv1 = Minv @ ev.dp1_dx
                else:
                    G = base.D22L(ev.q1, v1)
                    rhs = ev.dp1_dx - base.D21L(ev.q1, v1) @ ev.dq1_dx
                    dv1 = np.linalg.solve(G, rhs)
                Hv = np.einsum("...akl,...k->...al", c.hessian(ev.q1), v1)  # (..., m, n)
                J.append(Hv @ ev.dq1_dx + J1 @ dv1)
        Rc = _cat(R, 1)
        return Rc, (_cat(J, 2) if want else None)


def _cat(parts, core):
    shapes = {p.shape[: p.ndim - core] for p in parts}
    if len(shapes) > 1:
        bs = np.broadcast_shapes(*shapes)
        parts = [np.broadcast_to(p, bs + p.shape[p.ndim - core:]) for p in parts]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-core)


def _forced_multiplier(system: Any, q: np.ndarray, v: np.ndarray, lam: np.ndarray,
                       u: Any) -> np.ndarray:
    """λ of the forced equations: λ(q, v) − C⁻¹ (∂Φ/∂v) g_L⁻¹ F(q, v, u), with
    C = (∂Φ/∂v) g_L⁻¹ (∂Φ/∂v)ᵀ (the force adds g_L⁻¹F to the unconstrained acceleration of
    ``ConstrainedSystem.multiplier``, paper §3)."""
    G = system.D22L(q, v)
    B = system.constraint.dphi_dv(q, v)
    F = system.generalized_force(q, v, u)
    GinvBt = np.linalg.solve(G, np.swapaxes(B, -1, -2))
    C = B @ GinvBt
    rhs = (B @ np.linalg.solve(G, F[..., None]))[..., 0]
    return lam - np.linalg.solve(C, rhs[..., None])[..., 0]


def _lam_guess(system: Any, state: State) -> np.ndarray:
    """Multiplier guess for the step: ``state.lam``, or λ(q, v) for a hand-made State."""
    if state.lam is not None:
        return np.asarray(state.lam)
    return np.asarray(system.multiplier(state.q, state.v))


@attrs.frozen(eq=False)
class ConstrainedPRK(PairMethod):
    """Holonomically constrained symplectic partitioned Runge–Kutta method (eq. 13).

    Symplectic on T*N (the constraint manifold), symmetric for the Lobatto pairs; the
    constraint Φ(q_k) = 0 and the hidden constraint ∂Φ/∂q·v_k = 0 hold at every node to
    solver tolerance. Order 2s − 2 for Lobatto IIIA–IIIB(s) (s = 2: RATTLE, order 2).
    Needs H1–H3 on the first tableau (paper §4, App. A); violating tableaux raise
    :class:`HypothesisError` unless ``check_hypotheses=False`` (then the stage constraints
    are imposed at all stages without tangency: the classical Gauss-type scheme, which
    shows order reduction, paper §4.3).

    Equations (paper eq. (13a–d); paper eq. (13)). Unknowns V^1..V^s and Λ^1..Λ^s::

        Q^i = q_k + h Σ_j a_ij V^j,        P^i = p_k + h Σ_j â_ij W^j
        W^i = D1L(Q^i, V^i) + ∂Φ/∂q(Q^i)ᵀ Λ^i,   P^i = D2L(Q^i, V^i)
        Φ(Q^i) = 0 (i = 2..s),   ∂Φ/∂q(q_{k+1}) · ∂H/∂p(q_{k+1}, p_{k+1}) = 0
        q_{k+1} = q_k + h Σ_j b_j V^j,     p_{k+1} = p_k + h Σ_j b̂_j W^j

    The multiplier stored at node k+1 (``State.lam``, ``Trajectory.lam[k+1]``) is the raw
    Λ^s of step k, which approximates λ(t_{k+1}) with order s − 1 only (measured on the
    spherical pendulum: ≈ 1, 1.98, 3.00 for s = 2, 3, 4), not with the method's order
    2s − 2; ``lam[0]`` is the consistent continuous λ₀ (paper §3). This differs from the
    discretization-map methods (``rattle()`` gives the same q, p as s = 2 here), which
    store the continuous λ(q_k, v_k); ``system.multiplier(traj.q, traj.v)`` gives that
    for any method.

    **External forces** (a system built with ``force=``; issue 20): the forced constrained
    PRK (discrete Lagrange–d'Alembert principle, Marsden & West 2001 §3.2; stage forces as
    in Ober-Blöbaum, Junge & Marsden 2011) adds the stage force once to (13),
    W^i = D1L(Q^i, V^i) + F(Q^i, V^i, u) + ∂Φ/∂q(Q^i)ᵀΛ^i, with the control ``u`` of
    ``step(..., u=)`` held over the step; the RATTLE fast path is then not used (the generic
    (V, Λ) iteration solves the same equations). ``info["work"]`` is the discrete work
    h Σ_i b_i F^i·V^i. ``lam[0]`` is the consistent λ₀ of the forced equations at the
    control given to ``initial_state(..., u=u0)`` (``integrate`` passes ``controls[0]``);
    without it, for a system with controls, λ₀ of the equations without the force.

    **Step linearization** (issue 20): :meth:`step_linearization` gives A = ∂(q_{k+1},
    p_{k+1})/∂(q_k, p_k) and B = ∂(q_{k+1}, p_{k+1})/∂u in the ambient coordinates (q, p) ∈ R²ⁿ
    (from the Newton matrix of (13) in (V, Λ) at the solution, implicit function theorem;
    the RATTLE fast path solves the same equations, V¹ = V² = (q_{k+1} − q_k)/h), and
    orthonormal bases of the tangent spaces of the invariant set {Φ(q) = 0,
    Φ_q ∂H/∂p = 0} at both nodes with (A, B) in them (``A_tangent``, ``B_tangent``,
    d = 2n − 2m coordinates; :mod:`~chetaev.discrete_lagrangian.core._linearization`). The
    step maps every (q_k, p_k) into that set (pairs with H1), so A maps into the next
    tangent space (without H1, ``check_hypotheses=False``, the nodes are not in that set
    and ``A_tangent`` is only the projection of A).

    Parameters
    ----------
    pair : PartitionedTableau or Tableau
        ``lobatto_iiia_iiib(s)``; a Tableau is paired with its symplectic conjugate.
    newton : NewtonOptions
    check_hypotheses : bool
        Raise :class:`HypothesisError` when H1–H3 / H1'–H2' fail (default True).
    constraint_tol : float
        Tolerance of the initial-data check (|Φ(q0)|, |∂Φ/∂q·v0|).
    fast_path : bool
        For s = 2 (RATTLE) on a mechanical system with constant mass, solve the same
        equations with a reduced Newton iteration in Λ¹ only (m unknowns; Λ² then follows
        from a linear solve). Identical solution, much cheaper; False forces the generic
        (V, Λ) Newton iteration. The compiled step (``backend=``, issue 17: a system from
        ``symbolic.from_lagrangian`` with a holonomic constraint and a Lagrangian quadratic
        in v, no external force) always runs the generic iteration, in one compiled call.

    References
    ----------
    arXiv:1810.10926 §4.3, eq. (13); Hairer, Lubich, Wanner, GNI, §VII.1 (RATTLE).
    """

    pair: Any
    newton: NewtonOptions = attrs.field(factory=NewtonOptions, validator=is_newton_options)
    check_hypotheses: bool = attrs.field(default=True, validator=is_flag)
    constraint_tol: float = attrs.field(default=1e-10, validator=is_tolerance)
    fast_path: bool = attrs.field(default=True, validator=is_flag)
    coeffs: PRKCoefficients = attrs.field(init=False)
    _cache: dict = attrs.field(init=False, factory=dict, repr=False)
    family = "ConstrainedPRK"
    supports_forces = True
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: Any) -> tuple[str, Any]:
        """``(why_not, plan)``: the compiled plan (issue 17) of eq. (13) for a system with
        kernels and a holonomic constraint, unforced, whose Lagrangian is quadratic in v
        (explicit inverse Legendre map). The compiled step solves the generic (V, Λ) system
        of :class:`HolonomicStageHooks` (``HOLONOMIC_HOOKS``), also for RATTLE: the same
        equations as the ``fast_path`` iteration, whose solution it gives to the Newton
        tolerance."""
        from ..core._compiled_prk import HOLONOMIC_HOOKS, method_plan

        c = self.coeffs

        def constants() -> str:
            first = 1 if self._cache["H1"] else 0
            return (f"FIRST = {first}\nBV = np.array({np.asarray(c.b, float).tolist()!r})\n"
                    f"BW = np.array({np.asarray(c.bhat, float).tolist()!r})\n")

        return method_plan(self, iface, "holonomic", HOLONOMIC_HOOKS, c.s, constants)

    def __attrs_post_init__(self) -> None:
        coeffs = coefficients_from(self.pair)
        check_symplectic(coeffs, "ConstrainedPRK")
        object.__setattr__(self, "coeffs", coeffs)
        from chetaev.rktableaux import PartitionedTableau, Tableau

        p = self.pair
        if isinstance(p, Tableau):
            from chetaev.rktableaux import symplectic_pair

            p = symplectic_pair(p)
        assert isinstance(p, PartitionedTableau)
        hyp = p.satisfies_constrained_hypotheses()
        self._cache["H1"] = bool(hyp.H1)
        self._cache["hypotheses"] = bool(hyp.all)
        rattle = (coeffs.s == 2 and np.allclose(coeffs.a, [[0, 0], [0.5, 0.5]], atol=1e-15)
                  and np.allclose(coeffs.ahat, [[0.5, 0], [0.5, 0]], atol=1e-15))
        self._cache["rattle"] = rattle
        if self.check_hypotheses and not hyp.all:
            raise HypothesisError(
                f"ConstrainedPRK needs H1–H3 and H1'–H2' (paper §4.3): {hyp.message} "
                "(Pass check_hypotheses=False only to study the order reduction.)"
            )

    @property
    def order(self) -> int | None:
        """min(2s − 2, order of the pair) for pairs satisfying H1–H3 (2s − 2 for Lobatto
        IIIA–IIIB, paper §4.3), else None (no order is claimed without the hypotheses)."""
        if not self._cache["hypotheses"]:
            return None
        if "order" not in self._cache:
            self._cache["order"] = min(2 * self.coeffs.s - 2, pair_order(self.pair))
        return self._cache["order"]

    @property
    def guarantees(self) -> dict[str, float]:
        """Φ(q_k) = 0 and ∂Φ/∂q·v_k = 0 at every node to the Newton tolerance, for pairs
        satisfying H1–H3 (the post-condition :func:`~chetaev.discrete_lagrangian.integrate`
        checks); nothing without the hypotheses (the nodes are then not stages)."""
        if not self._cache["hypotheses"]:
            return {}
        return {"position": self.newton.tol, "velocity": self.newton.tol}

    def _initial_state_impl(self, system: Any, q0: Any, v0: Any, t0: float = 0.0,
                            u: Any = None) -> State:
        """Check Φ(q0) = 0 and ∂Φ/∂q·v0 = 0; add p0 and the consistent λ₀ (paper §3; with
        the control ``u`` of a forced system, λ₀ of the forced equations)."""
        q0, v0 = vector_initial_data(system, q0, v0, "ConstrainedPRK", constrained=True)
        if not system.is_holonomic:
            from .._util._errors import InputError

            raise InputError(
                "ConstrainedPRK handles holonomic constraints; for velocity constraints use "
                "chetaev.nh_integrators."
            )
        system.check_initial(q0, v0, tol=self.constraint_tol)
        lam0 = np.asarray(system.multiplier(q0, v0))
        if system.has_force and (u is not None or not system.n_controls):
            lam0 = _forced_multiplier(system, q0, v0, lam0, u)
        return State(t=t0, q=q0, v=v0, p=np.asarray(system.legendre(q0, v0)),
                     lam=lam0)

    def _step_impl(self, system: Any, state: State, h: float, u: Any = None) -> State:
        """One step (q_k, p_k) → (q_{k+1}, p_{k+1}, λ_{k+1} = Λ^s); ``u`` the control of a
        forced system (the stage force F(Q^i, V^i, u) is added to W^i)."""
        base = system.system
        forced = u is not None or getattr(base, "has_force", False) is True
        if not forced:
            from ..core._backend import resolve_backend

            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                from ..core._compiled_prk import compiled_step

                return compiled_step(plan, state, h)
        if (self.fast_path and self._cache["rattle"] and base.is_mechanical
                and getattr(base, "constant_mass", False) and not forced):
            return self._rattle_step(system, base, state, h)
        s = self.coeffs.s
        q, p, v, lam = state.q, state.p, state.v, _lam_guess(system, state)
        n, m = q.shape[-1], lam.shape[-1]
        batch = q.shape[:-1]
        Vp = state.carry.get("V")
        if Vp is not None and np.shape(Vp) == (*batch, s, n):
            V0 = Vp + (v - state.carry["v_prev"])[..., None, :]
            Lp = state.carry["Lam"]
            L0 = Lp + (Lp[..., -1:, :] - Lp[..., :1, :])
        else:
            V0 = np.broadcast_to(v[..., None, :], (*batch, s, n))
            L0 = np.broadcast_to(lam[..., None, :], (*batch, s, m))
        x0 = np.concatenate([V0.reshape((*batch, s * n)), L0.reshape((*batch, s * m))], -1)
        hooks = HolonomicStageHooks(system, s, m, 1 if self._cache["H1"] else 0)
        if forced:
            hooks = forced_hooks(system, hooks, u, s)
        sol = solve_stages(x0, q, p, h, self.coeffs, system, hooks, self.newton, state,
                           tangent_cache=self._cache.setdefault("tangents", {}))
        ev = sol.ev
        v1 = system.legendre_inv(ev.q1, ev.p1)
        info = {"newton_iterations": sol.iterations, "residual": sol.residual,
                "newton_rate": sol.rate}
        if forced:
            info["work"] = discrete_work(hooks, ev)
        return State(
            t=state.t + h, q=ev.q1, v=v1, p=ev.p1, lam=ev.Lam[..., -1, :], n=state.n + 1,
            carry={"V": ev.V, "v_prev": v, "Lam": ev.Lam}, info=info,
        )

    def _step_linearization_impl(self, system: Any, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) in (q, p) and in the tangent bases, at the stages of ``state`` → ``new``."""
        from ._vprk import _no_controls

        s = self.coeffs.s
        q, p = np.asarray(state.q), np.asarray(state.p)
        Lam = np.asarray(new.carry["Lam"])
        V = new.carry.get("V")
        if V is None:  # the RATTLE fast path: V¹ = V² = M⁻¹p_½ = (q_{k+1} − q_k)/h
            V = np.broadcast_to(((new.q - q) / h)[..., None, :], (*new.q.shape[:-1], s,
                                                                   q.shape[-1]))
        V = np.asarray(V)
        batch = np.broadcast_shapes(V.shape[:-2], Lam.shape[:-2])
        x = np.concatenate([np.broadcast_to(V, (*batch, *V.shape[-2:])).reshape((*batch, -1)),
                            np.broadcast_to(Lam, (*batch, *Lam.shape[-2:])).reshape(
                                (*batch, -1))], axis=-1)
        hooks = HolonomicStageHooks(system, s, Lam.shape[-1], 1 if self._cache["H1"] else 0)
        if u is not None or getattr(system.system, "has_force", False) is True:
            hooks = forced_hooks(system, hooks, u, s)
        A, B = prk_step_jacobians(x, q, p, h, self.coeffs, system, hooks)
        B = _no_controls(B, A, system)
        return StepLinearization(state=new, A=A, B=B,
                                 **tangent_linearization(system, state, new, A, B))

    def _rattle_step(self, system: Any, base: Any, state: State, h: float) -> State:
        """RATTLE = eq. (13) with Lobatto IIIA–IIIB(2), constant mass (paper §4.3)::

            p_½ = p_k + (h/2)(−∇V(q_k) + J(q_k)ᵀΛ¹),   q_{k+1} = q_k + h M⁻¹ p_½,
            Φ(q_{k+1}) = 0                              (Newton in Λ¹, m unknowns)
            p_{k+1} = p_½ + (h/2)(−∇V(q_{k+1}) + J(q_{k+1})ᵀΛ²),
            J(q_{k+1}) M⁻¹ p_{k+1} = 0                   (linear in Λ²)

        This is exactly the stage system of eq. (13) for s = 2 (V¹ = V² = M⁻¹p_½).
        """
        from ..core._solver import newton_solve, raise_unless_converged

        c = system.constraint
        Minv = base._Minv
        q, p, v, lam = state.q, state.p, state.v, _lam_guess(system, state)
        car = state.carry
        F0, J0 = car.get("F"), car.get("J")
        if F0 is None or np.shape(F0) != q.shape:
            F0, J0 = -base.gradV(q), c.jacobian(q)
        Lp = car.get("Lam")
        if Lp is not None and np.shape(Lp) == (*q.shape[:-1], 2, lam.shape[-1]):
            L1 = Lp[..., 1, :] + (Lp[..., 1, :] - Lp[..., 0, :])
        else:
            L1 = lam
        hh = 0.5 * h
        base_half = p + hh * F0
        MJ0T = (hh * h) * (Minv @ np.swapaxes(J0, -1, -2))  # (..., n, m) = ∂q_{k+1}/∂Λ¹

        def fun_jac(L, want):
            q1 = q + h * (base_half @ Minv.T) + (MJ0T @ L[..., None])[..., 0]
            R = c.phi(q1)
            if not want:
                return R, None
            return R, c.jacobian(q1) @ MJ0T

        res = newton_solve(None, L1, options=self.newton,
                           scale=np.maximum(1.0, np.max(np.abs(q), axis=-1)), fun_jac=fun_jac)
        L1 = raise_unless_converged(res, state).x
        ph = base_half + hh * (np.swapaxes(J0, -1, -2) @ L1[..., None])[..., 0]
        q1 = q + h * (ph @ Minv.T)
        F1, J1 = -base.gradV(q1), c.jacobian(q1)
        pp = ph + hh * F1
        JM = J1 @ Minv  # (..., m, n)
        A = hh * (JM @ np.swapaxes(J1, -1, -2))
        b = (JM @ pp[..., None])[..., 0]
        L2 = -(b / A[..., 0]) if b.shape[-1] == 1 else -np.linalg.solve(A, b[..., None])[..., 0]
        p1 = pp + hh * (np.swapaxes(J1, -1, -2) @ L2[..., None])[..., 0]
        v1 = p1 @ Minv.T
        Lam = np.stack([L1, L2], axis=-2)
        return State(
            t=state.t + h, q=q1, v=v1, p=p1, lam=L2, n=state.n + 1,
            carry={"Lam": Lam, "F": F1, "J": J1, "v_prev": v},
            info={"newton_iterations": res.iterations, "residual": float(np.max(res.residual)),
                  "newton_rate": res.rate},
        )
