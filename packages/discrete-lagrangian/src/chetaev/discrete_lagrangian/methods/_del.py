"""Discrete Euler–Lagrange integrator in position–momentum form (paper §4, eq. (6)).

Discrete Lagrangians (paper §4.3; the docs' theory page "discrete-lagrangian"), with v̄ = (q1 −
q0)/h:

* ``"midpoint"``:    L_d = h L((q0 + q1)/2, v̄)
* ``"alpha"``:       L_d = h L((1 − α) q0 + α q1, v̄)        (α = ½ is the midpoint rule)
* ``"trapezoidal"``: L_d = (h/2) [L(q0, v̄) + L(q1, v̄)]

Discrete Legendre transforms (paper §4): FL_d⁻(q0, q1) = (q0, −D1L_d(q0, q1)),
FL_d⁺(q0, q1) = (q1, D2L_d(q0, q1)). A step solves p_k = −D1L_d(q_k, q_{k+1}) for q_{k+1}
(Newton, analytic Jacobian) and sets p_{k+1} = D2L_d(q_k, q_{k+1}); this is the discrete
Hamiltonian map of the DEL equations D2L_d(q_{k−1}, q_k) + D1L_d(q_k, q_{k+1}) = 0 (6).

External forces (issue 20; Marsden & West 2001 §3.2, the forced discrete Euler–Lagrange
equations D2L_d(q_{k−1}, q_k) + f_d⁺(q_{k−1}, q_k) + D1L_d(q_k, q_{k+1}) + f_d⁻(q_k, q_{k+1}) = 0)
with the left and right discrete forces of the same quadrature as L_d (control u held over
the step): the α rule f_d⁻ = h(1 − α) F(q_α, v̄, u), f_d⁺ = hα F(q_α, v̄, u) at
q_α = (1 − α) q0 + α q1; the trapezoidal rule f_d⁻ = (h/2) F(q0, v̄, u), f_d⁺ = (h/2) F(q1, v̄, u).
The forced discrete Legendre transforms are p_k = −D1L_d − f_d⁻, p_{k+1} = D2L_d + f_d⁺.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError
from .._util._validation import as_float
from ..core._linearization import StepLinearization
from ..core._method import Method
from ..core._prk import PRKCoefficients
from ..core._solver import NewtonOptions, newton_solve, raise_unless_converged
from ..core._state import State
from ._checks import is_newton_options
from ._common import vector_initial_data

__all__ = ["DiscreteEulerLagrange", "DiscreteLagrangian", "lagrangian_two_form"]

_KINDS = ("midpoint", "trapezoidal", "alpha")


def lagrangian_two_form(d12: np.ndarray) -> np.ndarray:
    """Ω_{L_d} = −dθ⁺ as a (..., 2n, 2n) matrix from D12L_d (paper §4; Marsden & West 2001).

    ``d12[..., i, j] = ∂²L_d/∂q0_i ∂q1_j``; Ω = [[0, −D12], [D12ᵀ, 0]], Ω(u, w) = uᵀΩw on
    T(Q×Q) ∋ u = (δq0, δq1). The one formula of the discrete Lagrangian two-form (used by
    :meth:`DiscreteLagrangian.omega` and by ``chetaev.dsocs.TwoPointLagrangian.omega``).
    """
    d12 = np.asarray(d12, dtype=float)
    n = d12.shape[-1]
    out = np.zeros((*d12.shape[:-2], 2 * n, 2 * n))
    out[..., :n, n:] = -d12
    out[..., n:, :n] = np.swapaxes(d12, -1, -2)
    return out


@attrs.frozen
class DiscreteLagrangian:
    """A discrete Lagrangian L_d(q0, q1; h) built from a continuous one.

    Parameters
    ----------
    kind : {"midpoint", "trapezoidal", "alpha"}
    alpha : float
        Only for ``kind="alpha"``: the quadrature point (1 − α) q0 + α q1, α ∈ [0, 1].
        Any other value than the default ½ with another kind raises :class:`InputError`.
    """

    kind: str = "midpoint"
    alpha: float = 0.5

    def __attrs_post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InputError(
                f"`kind` must be one of {', '.join(_KINDS)}; got {self.kind!r}."
            )
        a = as_float(self.alpha, "alpha")
        if not 0.0 <= a <= 1.0:
            raise InputError(f"`alpha` must lie in [0, 1], got {a}.")
        if self.kind != "alpha" and a != 0.5:
            raise InputError(
                f"`alpha` = {a} is used only by kind='alpha' (the {self.kind} rule has no "
                f"parameter); pass DiscreteLagrangian('alpha', {a}) or drop alpha."
            )
        object.__setattr__(self, "alpha", a)

    @property
    def order(self) -> int:
        """2 for midpoint, trapezoidal and α = ½; 1 otherwise."""
        return 2 if self.kind == "trapezoidal" or self.alpha == 0.5 else 1

    def __call__(self, system: Any, q0, q1, h: float):
        """L_d(q0, q1)."""
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return 0.5 * h * (system.lagrangian(q0, vb) + system.lagrangian(q1, vb))
        qa = (1 - self.alpha) * q0 + self.alpha * q1
        return h * system.lagrangian(qa, vb)

    def D1(self, system: Any, q0, q1, h: float):
        """∂L_d/∂q0, shape (..., n)."""
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return 0.5 * h * system.D1L(q0, vb) - 0.5 * (system.D2L(q0, vb)
                                                         + system.D2L(q1, vb))
        qa = (1 - self.alpha) * q0 + self.alpha * q1
        return h * (1 - self.alpha) * system.D1L(qa, vb) - system.D2L(qa, vb)

    def D2(self, system: Any, q0, q1, h: float):
        """∂L_d/∂q1, shape (..., n)."""
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return 0.5 * h * system.D1L(q1, vb) + 0.5 * (system.D2L(q0, vb)
                                                         + system.D2L(q1, vb))
        qa = (1 - self.alpha) * q0 + self.alpha * q1
        return h * self.alpha * system.D1L(qa, vb) + system.D2L(qa, vb)

    def D12(self, system: Any, q0, q1, h: float):
        """∂(∂L_d/∂q0)/∂q1, shape (..., n, n) (the Jacobian of the DEL step)."""
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return (0.5 * system.D12L(q0, vb)
                    - 0.5 * (system.D22L(q0, vb) / h + system.D21L(q1, vb)
                             + system.D22L(q1, vb) / h))
        a = self.alpha
        qa = (1 - a) * q0 + a * q1
        return (h * (1 - a) * (a * system.D11L(qa, vb) + system.D12L(qa, vb) / h)
                - (a * system.D21L(qa, vb) + system.D22L(qa, vb) / h))

    def D11(self, system: Any, q0, q1, h: float):
        """∂²L_d/∂q0², shape (..., n, n) (``system.D12L[i, j] = ∂²L/∂q_i∂v_j``).

        α rule: h(1−α)²L_qq − (1−α)(L_qv + L_vq) + L_vv/h at ((1−α)q0 + αq1, v̄);
        trapezoidal: (h/2)L_qq(q0) − ½(L_qv + L_vq)(q0) + (L_vv(q0) + L_vv(q1))/(2h).
        """
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return (0.5 * h * system.D11L(q0, vb)
                    - 0.5 * (system.D12L(q0, vb) + system.D21L(q0, vb))
                    + 0.5 * (system.D22L(q0, vb) + system.D22L(q1, vb)) / h)
        b = 1 - self.alpha
        qa = b * q0 + self.alpha * q1
        return (h * b * b * system.D11L(qa, vb)
                - b * (system.D12L(qa, vb) + system.D21L(qa, vb))
                + system.D22L(qa, vb) / h)

    def D22(self, system: Any, q0, q1, h: float):
        """∂²L_d/∂q1², shape (..., n, n).

        α rule: hα²L_qq + α(L_qv + L_vq) + L_vv/h at ((1−α)q0 + αq1, v̄);
        trapezoidal: (h/2)L_qq(q1) + ½(L_qv + L_vq)(q1) + (L_vv(q0) + L_vv(q1))/(2h).
        """
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return (0.5 * h * system.D11L(q1, vb)
                    + 0.5 * (system.D12L(q1, vb) + system.D21L(q1, vb))
                    + 0.5 * (system.D22L(q0, vb) + system.D22L(q1, vb)) / h)
        a = self.alpha
        qa = (1 - a) * q0 + a * q1
        return (h * a * a * system.D11L(qa, vb)
                + a * (system.D12L(qa, vb) + system.D21L(qa, vb))
                + system.D22L(qa, vb) / h)

    def forces(self, system: Any, q0, q1, h: float, u: Any = None):
        """The left and right discrete forces ``(f_d⁻, f_d⁺)`` of ``system.generalized_force``
        (module docstring; Marsden & West 2001 §3.2), each ``(..., n)``."""
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return (0.5 * h * system.generalized_force(q0, vb, u),
                    0.5 * h * system.generalized_force(q1, vb, u))
        a = self.alpha
        F = h * system.generalized_force((1 - a) * q0 + a * q1, vb, u)
        return (1 - a) * F, a * F

    def force_minus_dq1(self, system: Any, q0, q1, h: float, u: Any = None):
        """∂f_d⁻/∂q1 ``(..., n, n)`` (the force's part of the forced DEL step's Jacobian)."""
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            return 0.5 * system.force_jacobians(q0, vb, u)[1]
        a = self.alpha
        Fq, Fv, _ = system.force_jacobians((1 - a) * q0 + a * q1, vb, u)
        return (1 - a) * (h * a * Fq + Fv)

    def force_partials(self, system: Any, q0, q1, h: float, u: Any = None):
        """All first derivatives of the discrete forces (for the step linearization).

        Returns ``(dm0, dm1, dmu, dp0, dp1, dpu)``: ∂f_d⁻/∂q0, ∂f_d⁻/∂q1, ∂f_d⁻/∂u,
        ∂f_d⁺/∂q0, ∂f_d⁺/∂q1, ∂f_d⁺/∂u (``(..., n, n)`` and ``(..., n, n_u)``), from
        ∂q_α/∂(q0, q1) = (1 − α, α), ∂v̄/∂(q0, q1) = (−1/h, 1/h) (module docstring).
        """
        vb = (q1 - q0) / h
        if self.kind == "trapezoidal":
            Fq0, Fv0, Fu0 = system.force_jacobians(q0, vb, u)
            Fq1, Fv1, Fu1 = system.force_jacobians(q1, vb, u)
            return (0.5 * (h * Fq0 - Fv0), 0.5 * Fv0, 0.5 * h * Fu0,
                    -0.5 * Fv1, 0.5 * (h * Fq1 + Fv1), 0.5 * h * Fu1)
        a = self.alpha
        Fq, Fv, Fu = system.force_jacobians((1 - a) * q0 + a * q1, vb, u)
        d0 = h * (1 - a) * Fq - Fv
        d1 = h * a * Fq + Fv
        return ((1 - a) * d0, (1 - a) * d1, h * (1 - a) * Fu, a * d0, a * d1, h * a * Fu)

    def omega(self, system: Any, q0, q1, h: float):
        """Ω_{L_d}(q0, q1) as a (..., 2n, 2n) matrix (:func:`lagrangian_two_form` of D12)."""
        return lagrangian_two_form(self.D12(system, q0, q1, h))

    def legendre_minus(self, system: Any, q0, q1, h: float):
        """Discrete Legendre transform FL_d⁻: p0 = −D1L_d(q0, q1)."""
        return -self.D1(system, q0, q1, h)

    def legendre_plus(self, system: Any, q0, q1, h: float):
        """Discrete Legendre transform FL_d⁺: p1 = D2L_d(q0, q1)."""
        return self.D2(system, q0, q1, h)


@attrs.frozen(eq=False)
class DiscreteEulerLagrange(Method):
    """Variational integrator from a discrete Lagrangian (discrete Euler–Lagrange, eq. 6).

    Symplectic and momentum preserving; order 2 for the midpoint and trapezoidal discrete
    Lagrangians (and α = ½), order 1 for α ≠ ½; symmetric for midpoint and trapezoidal.
    The midpoint rule gives the implicit midpoint method for mechanical systems with
    constant mass; the trapezoidal rule gives Störmer–Verlet.

    Equations (paper §4, eq. (6); Marsden & West 2001): solve p_k = −D1L_d(q_k, q_{k+1})
    for q_{k+1}; then p_{k+1} = D2L_d(q_k, q_{k+1}), v_{k+1} = FL⁻¹(q_{k+1}, p_{k+1}).

    With an external force (a system built with ``force=``; issue 20) the forced discrete
    Legendre transforms p_k = −D1L_d − f_d⁻ and p_{k+1} = D2L_d + f_d⁺ with the left and
    right discrete forces of :meth:`DiscreteLagrangian.forces` (Marsden & West 2001 §3.2;
    same order); ``info["work"]`` is the discrete work (f_d⁻ + f_d⁺)·v̄ (α rule) or the
    trapezoidal ½h(F(q_k, v̄) + F(q_{k+1}, v̄))·v̄, v̄ = (q_{k+1} − q_k)/h.

    **Compiled backend** (issue 17): ``backend="auto"|"numba"|"numpy"``. The midpoint and α
    rules are the one-stage variational PRK pair ``a = [[α]]``, ``â = [[1 − α]]``
    (:attr:`coeffs`), and run as its compiled step on systems with kernels
    (``symbolic.from_lagrangian``; unforced, Lagrangian quadratic in v): the same map, with
    Newton on the stage velocity instead of ``q_{k+1}``, so the two backends agree to the
    Newton tolerance. The trapezoidal rule runs on numpy (``"numba"`` raises
    :class:`BackendError`).

    **Step linearization** (issue 20): :meth:`step_linearization` gives the Jacobians of
    the discrete Hamiltonian map in the state's coordinates (q, p) (not (q_{k−1}, q_k)):
    with R(q_{k+1}; q_k, p_k, u) = p_k + D1L_d + f_d⁻ = 0 (the step's Newton equation),
    ∂q_{k+1}/∂(q_k, p_k, u) = −(D12L_d + ∂f_d⁻/∂q_{k+1})⁻¹ (D11L_d + ∂f_d⁻/∂q_k, I,
    ∂f_d⁻/∂u), chained into p_{k+1} = D2L_d + f_d⁺ (:meth:`DiscreteLagrangian.force_partials`).

    Parameters
    ----------
    kind : {"midpoint", "trapezoidal", "alpha"}
    alpha : float
        Only for ``kind="alpha"``.
    newton : NewtonOptions
    """

    kind: str = "midpoint"
    alpha: float = 0.5
    newton: NewtonOptions = attrs.field(factory=NewtonOptions, validator=is_newton_options)
    ld: DiscreteLagrangian = attrs.field(init=False)
    _cache: dict = attrs.field(init=False, factory=dict, repr=False, eq=False)
    supports_forces = True
    #: A compiled (numba) step for the midpoint and α rules (issue 17; :meth:`_compiled_plan`).
    compiled_backend = True

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "ld", DiscreteLagrangian(self.kind, self.alpha))

    @property
    def coeffs(self) -> PRKCoefficients:
        """The one-stage variational PRK pair of the α rule (midpoint: α = ½): ``a = [[α]]``,
        ``â = [[1 − α]]``, ``b = b̂ = [1]``. Its stage ``Q = q_k + hαV``, ``q_{k+1} = q_k + hV``
        gives ``V = v̄``, ``Q = (1 − α) q_k + α q_{k+1}``, and its discrete Lagrangian is
        ``h L(Q, V) = L_d(q_k, q_{k+1})``: eq. (6) is its step (the symplectic pair's
        ``â = 1 − α``, paper §4, App. A). Not defined for the trapezoidal rule."""
        if self.kind == "trapezoidal":
            raise AttributeError("the trapezoidal rule is not a one-stage PRK pair")
        a = float(self.ld.alpha)
        one = np.ones(1)
        return PRKCoefficients(a=np.array([[a]]), b=one, c=np.array([a]),
                               ahat=np.array([[1.0 - a]]), bhat=one.copy(),
                               name=f"alpha={a}")

    def _compiled_plan(self, system: Any, iface: Any) -> tuple[str, Any]:
        """``(why_not, plan)`` of the compiled step (issue 17): the midpoint and α rules run
        as the compiled one-stage VPRK of :attr:`coeffs` (the same map, eq. (6); Newton on
        the stage velocity ``V = (q_{k+1} − q_k)/h`` instead of ``q_{k+1}``, the same root);
        unforced systems with kernels whose Lagrangian is quadratic in v. The trapezoidal
        rule runs on numpy."""
        if self.kind == "trapezoidal":
            return "the trapezoidal discrete Lagrangian (midpoint and alpha compile)", None
        from ..core._compiled_prk import PLAIN_HOOKS, method_plan

        return method_plan(self, iface, None, PLAIN_HOOKS, 0)

    @property
    def name(self) -> str:
        """Method name."""
        extra = f", alpha={self.ld.alpha}" if self.kind == "alpha" else ""
        return f"DiscreteEulerLagrange[{self.kind}{extra}]"

    @property
    def order(self) -> int:
        """Order of the discrete Lagrangian."""
        return self.ld.order

    @property
    def symmetric(self) -> bool:
        """Midpoint, trapezoidal and α = ½ are symmetric (L_d(q0, q1; h) = −L_d(q1, q0; −h))."""
        return self.kind != "alpha" or self.ld.alpha == 0.5

    def _initial_state_impl(self, system: Any, q0: Any, v0: Any, t0: float = 0.0,
                            u: Any = None) -> State:
        """Check (q0, v0) and add p0 = ∂L/∂v(q0, v0) (the control ``u`` does not enter the
        initial data)."""
        q0, v0 = vector_initial_data(system, q0, v0, "DiscreteEulerLagrange", constrained=False)
        return State(t=t0, q=q0, v=v0, p=np.asarray(system.legendre(q0, v0)))

    def _step_impl(self, system: Any, state: State, h: float, u: Any = None) -> State:
        """One step of the discrete Hamiltonian map (q_k, p_k) → (q_{k+1}, p_{k+1}); with
        the control ``u`` of a forced system, of the forced one (class docstring)."""
        if u is None:
            from ..core._backend import resolve_backend

            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                from ..core._compiled_prk import compiled_step

                return compiled_step(plan, state, h)
        q, p, v = state.q, state.p, state.v
        ld = self.ld
        guess = state.carry.get("dq")
        x0 = q + (guess if guess is not None and np.shape(guess) == q.shape else h * v)
        if u is not None or getattr(system, "has_force", False) is True:
            return self._forced_step(system, state, h, u, x0)

        def fun_jac(q1, want):
            R = p + ld.D1(system, q, q1, h)
            return R, (ld.D12(system, q, q1, h) if want else None)

        res = newton_solve(None, x0, options=self.newton,
                           scale=1.0 + np.max(np.abs(p), axis=-1), fun_jac=fun_jac)
        q1 = raise_unless_converged(res, state).x
        p1 = ld.D2(system, q, q1, h)
        v1 = system.legendre_inv(q1, p1)
        return State(t=state.t + h, q=q1, v=v1, p=p1, n=state.n + 1, carry={"dq": q1 - q},
                     info={"newton_iterations": res.iterations,
                           "residual": float(np.max(res.residual)), "newton_rate": res.rate})

    def _forced_step(self, system: Any, state: State, h: float, u: Any, x0: Any) -> State:
        """The forced step: p_k + D1L_d + f_d⁻ = 0 for q_{k+1}, p_{k+1} = D2L_d + f_d⁺."""
        q, p = state.q, state.p
        ld = self.ld

        def fun_jac(q1, want):
            R = p + ld.D1(system, q, q1, h) + ld.forces(system, q, q1, h, u)[0]
            if not want:
                return R, None
            return R, ld.D12(system, q, q1, h) + ld.force_minus_dq1(system, q, q1, h, u)

        res = newton_solve(None, x0, options=self.newton,
                           scale=1.0 + np.max(np.abs(p), axis=-1), fun_jac=fun_jac)
        q1 = raise_unless_converged(res, state).x
        fm, fp = ld.forces(system, q, q1, h, u)
        p1 = ld.D2(system, q, q1, h) + fp
        v1 = system.legendre_inv(q1, p1)
        work = np.einsum("...i,...i->...", fm + fp, (q1 - q) / h)
        return State(t=state.t + h, q=q1, v=v1, p=p1, n=state.n + 1, carry={"dq": q1 - q},
                     info={"newton_iterations": res.iterations,
                           "residual": float(np.max(res.residual)), "newton_rate": res.rate,
                           "work": work})

    def _step_linearization_impl(self, system: Any, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """(A, B) in (q, p) of the step ``state`` → ``new`` (class docstring)."""
        q, p, q1 = np.asarray(state.q), np.asarray(state.p), np.asarray(new.q)
        ld = self.ld
        n = q.shape[-1]
        d12 = ld.D12(system, q, q1, h)
        R0 = ld.D11(system, q, q1, h)
        P0 = np.swapaxes(d12, -1, -2)  # ∂D2L_d/∂q0
        P1 = ld.D22(system, q, q1, h)
        nu = int(getattr(system, "n_controls", 0) or 0)
        batch = np.broadcast_shapes(q.shape[:-1], p.shape[:-1], q1.shape[:-1])
        Ru = np.zeros((*batch, n, nu))
        Pu = np.zeros((*batch, n, nu))
        if u is not None or getattr(system, "has_force", False) is True:
            dm0, dm1, dmu, dp0, dp1, dpu = ld.force_partials(system, q, q1, h, u)
            d12, R0, P0, P1 = d12 + dm1, R0 + dm0, P0 + dp0, P1 + dp1
            if nu:
                Ru, Pu = Ru + dmu, Pu + dpu
        eye = np.broadcast_to(np.eye(n), (*batch, n, n))
        rhs = np.concatenate([np.broadcast_to(R0, (*batch, n, n)), eye, Ru], axis=-1)
        dq1 = -np.linalg.solve(np.broadcast_to(d12, (*batch, n, n)), rhs)  # (..., n, 2n + nu)
        dp1 = P1 @ dq1
        dp1[..., :n] += P0
        dp1[..., 2 * n:] += Pu
        full = np.concatenate([dq1, dp1], axis=-2)
        return StepLinearization(state=new, A=full[..., : 2 * n], B=full[..., 2 * n:])
