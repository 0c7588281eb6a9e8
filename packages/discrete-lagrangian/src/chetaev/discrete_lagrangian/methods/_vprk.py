"""Variational partitioned Runge–Kutta method (paper Theorem 4.2; paper Thm. 4.2)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ..core._forcing import discrete_work, forced_hooks
from ..core._linearization import StepLinearization, prk_step_jacobians
from ..core._pair_method import PairMethod
from ..core._prk import PRKCoefficients, coefficients_from, solve_stages
from ..core._solver import NewtonOptions
from ..core._state import State
from ._checks import is_newton_options
from ._common import check_symplectic, vector_initial_data

__all__ = ["VPRK"]


@attrs.frozen(eq=False)
class VPRK(PairMethod):
    """Variational partitioned Runge–Kutta integrator (VPRK).

    Symplectic and momentum preserving (it is the discrete Hamiltonian map of the discrete
    Hamilton–Pontryagin action (8)); its order is the order of the partitioned RK pair:
    2s for Gauss(s) (paired with itself), 2s − 2 for Lobatto IIIA–IIIB(s). Symmetric for
    symmetric pairs (Gauss, Lobatto). Works on any regular Lagrangian on Rⁿ, with batched
    initial data.

    Equations (paper eq. (9), Theorem 4.2; paper Thm. 4.2), unknowns V^1..V^s::

        Q^i = q_k + h Σ_j a_ij V^j,   P^i = p_k + h Σ_j â_ij W^j,   W^i = D1L(Q^i, V^i)
        D2L(Q^i, V^i) = P^i           (the sn equations solved by Newton)
        q_{k+1} = q_k + h Σ_j b_j V^j,   p_{k+1} = p_k + h Σ_j b̂_j W^j

    **External forces** (a system built with ``force=``; issue 20): the forced PRK of the
    discrete Lagrange–d'Alembert principle (Marsden & West 2001 §3.2; Ober-Blöbaum, Junge &
    Marsden 2011) adds the stage force once, W^i = D1L(Q^i, V^i) + F(Q^i, V^i, u), with the
    control ``u`` of ``step(..., u=)`` held over the step
    (:mod:`~chetaev.discrete_lagrangian.core._forcing`). The step's ``info["work"]`` is the
    discrete work h Σ_i b_i F^i·V^i (equal to the energy change to the method's order).

    **Step linearization** (issue 20): :meth:`step_linearization` gives
    ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k) and ∂(q_{k+1}, p_{k+1})/∂u in the coordinates (q, p),
    from the Newton matrix of the stage equations at the solution (implicit function
    theorem, :mod:`~chetaev.discrete_lagrangian.core._linearization`); unforced it is
    symplectic, AᵀΩA = Ω.

    Parameters
    ----------
    pair : PartitionedTableau or Tableau
        A symplectic pair (e.g. ``lobatto_iiia_iiib(3)``), or a single tableau with nonzero
        weights (e.g. ``gauss(2)``), which is paired with its symplectic conjugate.
    newton : NewtonOptions
        Solver options (tolerance relative to |p| + h|W|).

    References
    ----------
    D. Martín de Diego, R. T. Sato Martín de Almagro, "High-order geometric methods for
    nonholonomic mechanical systems", arXiv:1810.10926, §4.2.
    """

    pair: Any
    newton: NewtonOptions = attrs.field(factory=NewtonOptions, validator=is_newton_options)
    coeffs: PRKCoefficients = attrs.field(init=False)
    _cache: dict = attrs.field(init=False, factory=dict, repr=False)
    family = "VPRK"
    supports_forces = True
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: Any) -> tuple[str, Any]:
        """``(why_not, plan)``: the compiled plan (issue 17) for a system with kernels,
        unforced, whose Lagrangian is quadratic in v (explicit inverse Legendre map)."""
        from ..core._compiled_prk import PLAIN_HOOKS, method_plan

        return method_plan(self, iface, None, PLAIN_HOOKS, 0)

    def __attrs_post_init__(self) -> None:
        coeffs = coefficients_from(self.pair)
        check_symplectic(coeffs, "VPRK")
        object.__setattr__(self, "coeffs", coeffs)

    def _initial_state_impl(self, system: Any, q0: Any, v0: Any, t0: float = 0.0,
                            u: Any = None) -> State:
        """Check (q0, v0) and add the momentum p0 = ∂L/∂v(q0, v0) (the control ``u`` does
        not enter the initial data)."""
        q0, v0 = vector_initial_data(system, q0, v0, "VPRK", constrained=False)
        return State(t=t0, q=q0, v=v0, p=np.asarray(system.legendre(q0, v0)))

    def _step_impl(self, system: Any, state: State, h: float, u: Any = None) -> State:
        """One step (q_k, p_k) → (q_{k+1}, p_{k+1}); v_{k+1} from the inverse Legendre map.

        ``u``: the control of a forced system (the stage force F(Q^i, V^i, u) is added to W^i).
        """
        if u is None:
            from ..core._backend import resolve_backend

            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                from ..core._compiled_prk import compiled_step

                return compiled_step(plan, state, h)
        s = self.coeffs.s
        q, p, v = state.q, state.p, state.v
        Vp = state.carry.get("V")
        if Vp is not None and np.shape(Vp) == (*np.shape(q)[:-1], s, q.shape[-1]):
            V0 = Vp + (v - state.carry["v_prev"])[..., None, :]
        else:
            V0 = np.broadcast_to(v[..., None, :], (*v.shape[:-1], s, v.shape[-1]))
        x0 = V0.reshape((*V0.shape[:-2], -1))
        hooks = forced_hooks(system, None, u, s)
        sol = solve_stages(x0, q, p, h, self.coeffs, system, hooks, self.newton, state,
                           tangent_cache=self._cache.setdefault("tangents", {}))
        ev = sol.ev
        v1 = system.legendre_inv(ev.q1, ev.p1)
        info = {"newton_iterations": sol.iterations, "residual": sol.residual,
                "newton_rate": sol.rate}
        if hooks is not None:
            info["work"] = discrete_work(hooks, ev)
        return State(
            t=state.t + h, q=ev.q1, v=v1, p=ev.p1, lam=None, n=state.n + 1,
            carry={"V": ev.V, "v_prev": v}, info=info,
        )

    def _step_linearization_impl(self, system: Any, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) in (q, p) at the stages of the step ``state`` → ``new`` (``new.carry["V"]``)."""
        s = self.coeffs.s
        V = np.asarray(new.carry["V"])
        x = V.reshape((*V.shape[:-2], -1))
        hooks = forced_hooks(system, None, u, s)
        A, B = prk_step_jacobians(x, np.asarray(state.q), np.asarray(state.p), h, self.coeffs,
                                  system, hooks)
        return StepLinearization(state=new, A=A, B=_no_controls(B, A, system))


def _no_controls(B: np.ndarray, A: np.ndarray, system: Any) -> np.ndarray:
    """``B`` with its control axis ``(..., 2n, n_controls)`` (zero columns without controls)."""
    if B.shape[-1] == int(getattr(system, "n_controls", 0) or 0):
        return B
    return np.zeros((*A.shape[:-1], int(getattr(system, "n_controls", 0) or 0)))
