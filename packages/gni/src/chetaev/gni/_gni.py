"""The Geometric Nonholonomic Integrator on a vector space (paper Def. 4.1, §5, Def. 6.1).

GNI paper Def. 4.1, §5, Remark 5.1, Remark 5.5, Def. 6.1.

External forces (issue 20): the forced GNI is the GNI of the forced discrete Euler–Lagrange
(discrete Lagrange–d'Alembert) equations. The left and right discrete forces ``f_d⁻``,
``f_d⁺`` of the discrete Lagrangian's quadrature (``DiscreteLagrangian.forces``; Marsden &
West 2001 §3.2; control ``u`` held over the step) enter the discrete Legendre transforms of
the DEL step of Def. 4.1, ``p⁻_k = −D1 L_d(q_k, q_{k+1}) − f_d⁻``,
``p⁺_{k+1} = D2 L_d(q_k, q_{k+1}) + f_d⁺``, and likewise (9a)/(27a) of the local form; the
constraint projection (the reflection (8)/(26) and (9b)/(27b)) is unchanged.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    ForcesNotSupportedError,
    LinearVelocityConstraint,
    Method,
    NewtonOptions,
    State,
    SystemInterface,
    check_step_size,
    interface_of,
    newton_solve,
)
from chetaev.discrete_lagrangian.extending import (
    compiled_step,
    forced_multiplier,
    resolve_backend,
)

from ._discrete_lagrangians import (
    AlphaDiscreteLagrangian,
    MidpointDiscreteLagrangian,
    jacobian_D1_dq1,
)
from ._errors import ConvergenceError, InputError
from ._reflection import node_from_post_momentum, pre_post_from_node
from ._validation import (
    as_points,
    broadcast_pair,
    check_newton,
    check_on_constraint,
    check_tol,
)

__all__ = [
    "GNI",
    "VARIANTS",
    "euler_alpha_ptilde_step",
    "gni_momentum_step",
    "gni_two_step_jacobian",
    "gni_two_step_residual",
    "solve_pre_legendre",
]

#: The named variants of the paper: discrete Lagrangians (10) A and B, (16) and the midpoint.
VARIANTS: dict[str, Any] = {
    "euler_a": AlphaDiscreteLagrangian(0.0),
    "euler_b": AlphaDiscreteLagrangian(1.0),
    "rattle": AlphaDiscreteLagrangian(0.5),
    "midpoint": MidpointDiscreteLagrangian(),
}

_FORMS = ("momentum", "two_step")


def _mv(A, x):
    return np.einsum("...ij,...j->...i", A, x)


def _interface(csys) -> SystemInterface:
    """The system interface of ``csys``, checked to be a system with a constraint linear (or
    affine) in the velocity."""
    iface = interface_of(csys)
    if not iface.is_constrained:
        raise InputError(
            "GNI runs on ConstrainedSystem(system, LinearVelocityConstraint(A, a)); got "
            f"{type(csys).__name__}. Wrap the Lagrangian system and its velocity constraint "
            "in chetaev.discrete_lagrangian.ConstrainedSystem"
        )
    if not isinstance(iface.constraint, LinearVelocityConstraint):
        raise InputError(
            "GNI needs constraints linear (or affine) in the velocity, mu(q) v + a(q) = 0: use "
            f"LinearVelocityConstraint(A, a); got {type(iface.constraint).__name__}"
        )
    return iface


def metric(iface: SystemInterface, q, override=None) -> np.ndarray:
    """The metric ``G(q)`` ``(..., n, n)`` used by the projectors (paper (3)).

    ``override`` (a callable ``q -> G``) wins; otherwise ``SystemInterface.metric`` (the mass
    matrix ``M(q)``, or ``∂²L/∂v²`` at ``v = 0``).
    """
    q = np.asarray(q, dtype=float)
    fn = override if override is not None else iface.metric
    if fn is None:
        raise InputError(
            "GNI needs a metric for the projectors P and Q, but the system has neither a "
            "mass matrix M(q) nor D22L; pass GNI(..., metric=lambda q: G(q)) returning a "
            "symmetric positive definite (..., n, n) array"
        )
    G = np.asarray(fn(q), dtype=float)
    return np.broadcast_to(G, q.shape[:-1] + G.shape[-2:])


def constraint_parts(iface: SystemInterface, q):
    """``(mu(q), a(q))`` of the constraint ``mu(q) v + a(q) = 0``; ``a`` is ``None`` for a
    linear constraint."""
    mu = np.asarray(iface.A(q), dtype=float)
    a = np.asarray(iface.affine(q), dtype=float) if iface.affine is not None else None
    return mu, a


def solve_pre_legendre(dl, system, q0, p_minus, h, *, newton: NewtonOptions, guess=None,
                       forcing=None):
    """Inverse discrete Legendre transform: solve ``−D1 L_d(q0, q1) = p⁻`` for ``q1``.

    Step 2 of the reflection form (paper Def. 4.1). With ``forcing = (fsys, u)`` (a system
    with ``generalized_force`` and the step's control) the forced transform
    ``−D1 L_d(q0, q1) − f_d⁻(q0, q1) = p⁻`` (module docstring). Returns the ``NewtonResult``.
    """
    if guess is None:
        guess = q0

    def fun(q1):
        out = dl.D1(system, q0, q1, h) + p_minus
        if forcing is not None:
            out = out + dl.forces(forcing[0], q0, q1, h, forcing[1])[0]
        return out

    # Chord (simplified) Newton: the Jacobian −∂(D1 L_d)/∂q1 ≈ G/h at the initial guess is
    # exact for a constant mass matrix with the A/B/trapezoidal L_d and varies by O(h²)
    # relative otherwise; the iteration then contracts at rate O(h²) per step.
    J0 = dl.D1_dq1(system, q0, guess, h)
    jac = None
    if J0 is not None:
        if forcing is not None:
            J0 = J0 + dl.force_minus_dq1(forcing[0], q0, guess, h, forcing[1])
        J0 = np.broadcast_to(J0, (*guess.shape, guess.shape[-1]))

        def jac(q1):
            return J0

    scale = 1.0 + np.max(np.abs(p_minus), axis=-1)
    return newton_solve(fun, guess, jac=jac, options=newton, scale=scale)


def gni_momentum_step(dl, iface, q, v, lam, h, *, newton, metric_fn=None, forcing=None):
    """One step of the GNI in one-step ("reflection") form, paper Def. 4.1 / §2.6.

    Node data ``(q_k, v_k, λ_k)`` (``v_k`` satisfies the constraint) define
    ``p⁻_k = G v_k + (h/2) muᵀ λ_k``, which is the reflection (8)/(26) of ``p⁺_k``.
    Then ``−D1 L_d(q_k, q_{k+1}) = p⁻_k`` is solved for ``q_{k+1}``,
    ``p⁺_{k+1} = D2 L_d(q_k, q_{k+1})`` and the node data at ``k+1`` follow from the
    closed-form multiplier ``h λ_{k+1} = −2 C⁻¹ (mu G⁻¹ p⁺_{k+1} + a)``.

    ``iface`` is the :class:`SystemInterface` of the constrained system (see :func:`_interface`).
    ``forcing = (fsys, u)``: the forced step, ``−D1 L_d − f_d⁻ = p⁻_k`` and
    ``p⁺_{k+1} = D2 L_d + f_d⁺`` (module docstring).
    Returns ``(q1, v1, lam1, p_bar1, p_plus1, newton_result)``.
    """
    G = metric(iface, q, metric_fn)
    mu, _ = constraint_parts(iface, q)
    p_minus, _ = pre_post_from_node(v, lam, G, mu, h)
    res = solve_pre_legendre(dl, iface, q, p_minus, h, newton=newton, guess=q + h * v,
                             forcing=forcing)
    q1 = res.x
    p_plus1 = dl.D2(iface, q, q1, h)
    if forcing is not None:
        p_plus1 = p_plus1 + dl.forces(forcing[0], q, q1, h, forcing[1])[1]
    G1 = metric(iface, q1, metric_fn)
    mu1, a1 = constraint_parts(iface, q1)
    v1, lam1, p_bar1 = node_from_post_momentum(p_plus1, G1, mu1, h, a1)
    return q1, v1, lam1, p_bar1, p_plus1, res


def gni_two_step_residual(dl, iface, q_prev, q, x, h, *, metric_fn=None, forcing=None):
    """Residual of the local form (9)/(27) with unknowns ``x = (q_{k+1}, λ_k)``.

    In chetaev's multiplier sign:

    * (9a) ``D1 L_d(q_k, q_{k+1}) + D2 L_d(q_{k−1}, q_k) + h muᵀ(q_k) λ_k = 0``;
    * (9b)/(27b) ``mu G⁻¹ (D2 L_d(q_{k−1}, q_k) − D1 L_d(q_k, q_{k+1}))/2 + a = 0``, i.e.
      the averaged momentum satisfies the constraint.

    With ``forcing = (fsys, u)`` the forced form: ``D1 L_d + f_d⁻`` of ``(q_k, q_{k+1})``
    and ``D2 L_d + f_d⁺`` of ``(q_{k−1}, q_k)`` in place of ``D1 L_d`` and ``D2 L_d``, both
    with the control ``u`` (module docstring).
    """
    n = q.shape[-1]
    q1, lam = x[..., :n], x[..., n:]
    G = metric(iface, q, metric_fn)
    mu, a = constraint_parts(iface, q)
    p_plus = dl.D2(iface, q_prev, q, h)
    d1 = dl.D1(iface, q, q1, h)
    if forcing is not None:
        p_plus = p_plus + dl.forces(forcing[0], q_prev, q, h, forcing[1])[1]
        d1 = d1 + dl.forces(forcing[0], q, q1, h, forcing[1])[0]
    r1 = d1 + p_plus + h * np.einsum("...ji,...j->...i", mu, lam)
    r2 = _mv(mu, np.linalg.solve(G, (0.5 * (p_plus - d1))[..., None])[..., 0])
    if a is not None:
        r2 = r2 + a
    return np.concatenate([r1, r2], axis=-1)


def gni_two_step_jacobian(dl, iface, q_prev, q, x, h, *, metric_fn=None, forcing=None):
    """Jacobian of :func:`gni_two_step_residual` in ``x``, or ``None`` without second
    derivatives of the Lagrangian."""
    n = q.shape[-1]
    q1 = x[..., :n]
    J = dl.D1_dq1(iface, q, q1, h)
    if J is None:
        return None
    if forcing is not None:
        J = J + dl.force_minus_dq1(forcing[0], q, q1, h, forcing[1])
    G = metric(iface, q, metric_fn)
    mu, _ = constraint_parts(iface, q)
    m = mu.shape[-2]
    J = np.broadcast_to(J, (*q1.shape, n))
    muGinv = np.swapaxes(np.linalg.solve(G, np.swapaxes(mu, -1, -2)), -1, -2)
    top = np.concatenate([J, h * np.swapaxes(mu, -1, -2)], axis=-1)
    bottom = np.concatenate([-0.5 * muGinv @ J, np.zeros((*mu.shape[:-1], m))], axis=-1)
    return np.concatenate([top, bottom], axis=-2)


@attrs.frozen
class _JacobianAlias:
    """Wraps a discrete Lagrangian whose ``∂(D1 L_d)/∂q1`` is called ``D12`` (the
    ``chetaev.discrete_lagrangian.DiscreteLagrangian`` convention) as ``D1_dq1``."""

    inner: Any

    @property
    def order(self):
        return getattr(self.inner, "order", None)

    def D1(self, system, q0, q1, h):
        return self.inner.D1(system, q0, q1, h)

    def D2(self, system, q0, q1, h):
        return self.inner.D2(system, q0, q1, h)

    def D1_dq1(self, system, q0, q1, h):
        return jacobian_D1_dq1(self.inner, system, q0, q1, h)

    def forces(self, system, q0, q1, h, u=None):
        return self.inner.forces(system, q0, q1, h, u)

    def force_minus_dq1(self, system, q0, q1, h, u=None):
        return self.inner.force_minus_dq1(system, q0, q1, h, u)


def _takes_forces(dl) -> bool:
    """Whether the discrete Lagrangian ``dl`` has discrete forces (``forces`` and
    ``force_minus_dq1``; through the alias, its inner object's)."""
    inner = dl.inner if isinstance(dl, _JacobianAlias) else dl
    return hasattr(inner, "forces") and hasattr(inner, "force_minus_dq1")


def _forcing(dl, iface, u):
    """``(fsys, u)`` for a forced system (``fsys`` the unconstrained system with
    ``generalized_force``), None for an unforced one."""
    if iface.force is None:
        return None
    if not _takes_forces(dl):
        raise ForcesNotSupportedError(
            f"The GNI's discrete Lagrangian {type(dl).__name__} has no discrete forces "
            "(methods forces and force_minus_dq1): use a named variant or a "
            "chetaev.discrete_lagrangian.DiscreteLagrangian for a forced system."
        )
    return iface.system, u


def _work(dl, forcing, q0, q1, h):
    """The discrete work ``(f_d⁻ + f_d⁺)·(q1 − q0)/h`` of a forced step ``(...)``."""
    fm, fp = dl.forces(forcing[0], q0, q1, h, forcing[1])
    return np.einsum("...i,...i->...", fm + fp, (q1 - q0) / h)


def _resolve_variant(variant):
    if isinstance(variant, str):
        key = variant.lower()
        if key not in VARIANTS:
            raise InputError(
                f"unknown GNI variant {variant!r}; choose one of {sorted(VARIANTS)} or pass a "
                "discrete Lagrangian object with D1, D2 and D1_dq1 (or D12) methods"
            )
        return VARIANTS[key]
    if all(hasattr(variant, nm) for nm in ("D1", "D2", "D1_dq1")):
        return variant
    if all(hasattr(variant, nm) for nm in ("D1", "D2", "D12")):
        return _JacobianAlias(variant)
    raise InputError(
        f"GNI variant must be one of {sorted(VARIANTS)} or a discrete Lagrangian with "
        f"D1(system, q0, q1, h), D2(...) and D1_dq1(...) or D12(...); got {variant!r}"
    )


def _check_metric(instance, attribute, value):
    if value is not None and not callable(value):
        raise InputError(
            f"GNI(metric=...) must be None (the system's mass matrix) or a callable q -> "
            f"(..., n, n); got {value!r}"
        )


def _check_form(instance, attribute, value):
    if value not in _FORMS:
        raise InputError(f"form must be one of {_FORMS}; got {value!r}")


@attrs.frozen
class GNI(Method):
    """Geometric Nonholonomic Integrator (paper Def. 4.1; affine: Def. 6.1).

    ``GNI(variant)`` with ``variant`` one of ``"euler_a"``, ``"euler_b"`` (the GNI versions of
    symplectic Euler A and B, order 1, mutually adjoint, Thm 5.2 / 5.4), ``"rattle"``
    (nonholonomic SHAKE/RATTLE (15), order 2, symmetric) and ``"midpoint"`` (order 2,
    symmetric), or any discrete Lagrangian object (see ``_discrete_lagrangians``). Runs on a
    ``ConstrainedSystem`` with a ``LinearVelocityConstraint``; an affine constraint
    ``mu(q)(v − Y(q)) = 0``, i.e. ``A = mu``, ``a = −mu Y``, gives the affine GNI (26) with the
    same class (affine SHAKE/RATTLE for ``"rattle"``).

    Exactly preserved at every node: the averaged momentum ``(p⁻_k + p⁺_k)/2`` satisfies the
    constraint (9b)/(27b) (so ``v_k`` does), and ``|p⁻_k − Π|_{G⁻¹} = |p⁺_k − Π|_{G⁻¹}``.

    **External forces** (issue 20): a system built with ``force=`` (control ``u`` per step,
    held over the step) is integrated by the forced GNI, the GNI of the forced discrete
    Euler–Lagrange equations: the left and right discrete forces of the discrete
    Lagrangian's quadrature (``f_d⁻ = h(1−α)F(q_k, v)``, ``f_d⁺ = hαF(q_{k+1}, v)`` for the
    endpoint rules (10)/(16), ``v = (q_{k+1} − q_k)/h``; at the midpoint for the midpoint
    rule; Marsden & West 2001 §3.2) enter the discrete Legendre transforms of Def. 4.1 and
    (9a)/(27a); the projection (8)/(9b)/(26)/(27b) is unchanged. The order is kept;
    ``info["work"]`` is the discrete work ``(f_d⁻ + f_d⁺)·v`` of the step, and ``λ_0`` is
    the multiplier of the forced continuous equations at ``u``. In the two-step form the
    look-ahead point is computed with the step's control and recomputed when the control
    changes, which gives the nodes of the momentum form.

    **Compiled backend** (issue 17): ``GNI(..., backend="auto"|"numba"|"numpy")``. Both
    forms run compiled (numba, :mod:`._compiled_gni`: the same equations, Newton iterations
    and stopping rule) on a system built by
    ``chetaev.discrete_lagrangian.symbolic.from_lagrangian`` with the system's own metric, no
    external force, and a discrete Lagrangian of the endpoint family (10)/(16) or the
    quadrature-point family (the midpoint rule); ``"auto"`` (default) does so when numba is
    installed, ``sol.stats["backend"]`` says which ran. Otherwise the numpy path runs, and
    ``"numba"`` raises ``BackendError`` saying why.

    Notes
    -----
    **Equations.** ``form="momentum"`` (default): the one-step reflection form of (8)/(26),
    paper Def. 4.1:
    ``p⁻_k = p⁺_k − 2Qᵀ(p⁺_k − Π)``, ``−D1 L_d(q_k, q_{k+1}) = p⁻_k``,
    ``p⁺_{k+1} = D2 L_d(q_k, q_{k+1})``.
    ``form="two_step"``: the local form (9)/(27), unknowns ``(q_{k+1}, λ_k)`` from
    ``(q_{k−1}, q_k)``, solved by Newton (the state carries the look-ahead point).
    Both forms give the same sequence ``q_k`` (tested).

    **State.** ``q = q_k``; ``v = v_k = G⁻¹(p⁻_k + p⁺_k)/2``, the node velocity, which satisfies the
    constraint; ``p = G v_k``; ``lam = λ_k`` with ``p⁻_k − p⁺_k = h muᵀ λ_k`` (chetaev sign
    convention ``d/dt ∂L/∂v − ∂L/∂q = muᵀλ``). ``initial_state`` takes ``λ_0`` from the
    continuous problem (``ConstrainedSystem.multiplier``). In this representation Euler A and
    B are exactly adjoint, ``F_A^h ∘ F_B^{−h} = Id``, for every state on the constraint set.

    References
    ----------
    Ferraro, Jiménez, Martín de Diego, "New developments on the Geometric Nonholonomic
    Integrator", Def. 4.1, (9), (11)–(15), Def. 6.1, (26)–(28).
    """

    variant: Any = "rattle"
    form: str = attrs.field(default="momentum", validator=_check_form)
    newton: NewtonOptions = attrs.field(factory=NewtonOptions, validator=check_newton)
    metric: Any = attrs.field(default=None, validator=_check_metric)
    constraint_tol: float = attrs.field(default=1e-10, validator=check_tol)

    #: A compiled (numba) step of either form (issue 17; :mod:`._compiled_gni`).
    compiled_backend = True

    def __attrs_post_init__(self):
        _resolve_variant(self.variant)

    def _compiled_plan(self, system, iface):
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled_gni`)."""
        from ._compiled_gni import compiled_plan

        return compiled_plan(self, system, iface)

    @property
    def supports_forces(self) -> bool:  # type: ignore[override]
        """True when the discrete Lagrangian has discrete forces (every named variant)."""
        return _takes_forces(self.discrete_lagrangian)

    @property
    def discrete_lagrangian(self):
        return _resolve_variant(self.variant)

    @property
    def order(self) -> int | None:
        return getattr(self.discrete_lagrangian, "order", None)

    @property
    def symmetric(self) -> bool:
        """Symmetric for a symmetric discrete Lagrangian (``"rattle"``, ``"midpoint"``)."""
        return bool(getattr(self.discrete_lagrangian, "symmetric", False))

    @property
    def guarantees(self) -> dict[str, float]:
        """The velocity constraint mu(q_k) v_k + a(q_k) = 0 at every node, to the Newton
        tolerance (it holds exactly by construction; the post-condition
        ``chetaev.discrete_lagrangian.integrate`` checks)."""
        return {"position": self.newton.tol}

    @property
    def name(self) -> str:
        v = self.variant if isinstance(self.variant, str) else type(self.variant).__name__
        return f"GNI({v}, {self.form})"

    # ------------------------------------------------------------------ protocol
    def _initial_state_impl(self, system, q0, v0, t0: float = 0.0, u=None) -> State:
        """Node 0: ``(q0, v0)`` must satisfy the constraint; ``λ_0`` is the continuous
        multiplier (paper §5 "Initialization"), of the forced equations at the control ``u``
        for a forced system."""
        iface = _interface(system)
        n = iface.n
        q0 = as_points(q0, name="q0", n=n)
        v0 = as_points(v0, name="v0", n=n)
        q0, v0 = broadcast_pair(q0, v0, ("q0", "v0"))
        check_on_constraint(
            iface.phi(q0, v0),
            tol=self.constraint_tol,
            what="the initial data (q0, v0)",
            fix="Project v0 onto the constraint set (e.g. v0 ← v0 − G⁻¹Aᵀ(AG⁻¹Aᵀ)⁻¹(A v0 + a)) "
            "or raise GNI(constraint_tol=...).",
        )
        lam0 = np.asarray(iface.multiplier(q0, v0), dtype=float)
        if iface.force is not None and (u is not None or not iface.n_controls):
            lam0 = forced_multiplier(system, q0, v0, lam0, u)
        G = metric(iface, q0, self.metric)
        return State(t=float(t0), q=q0, v=v0, p=_mv(G, v0), lam=lam0, n=0, carry={}, info={})

    def state_from_points(self, system, q0, q1, h, t0: float = 0.0) -> State:
        """The state at node 1 from two discrete points ``(q0, q1)`` (a two-step start):
        ``p⁺_1 = D2 L_d(q0, q1)`` and the node data follow by (8)."""
        iface = _interface(system)
        n = iface.n
        h = check_step_size(h)
        q0 = as_points(q0, name="q0", n=n)
        q1 = as_points(q1, name="q1", n=n)
        dl = self.discrete_lagrangian
        p_plus = dl.D2(iface, q0, q1, h)
        G1 = metric(iface, q1, self.metric)
        mu1, a1 = constraint_parts(iface, q1)
        v1, lam1, p_bar = node_from_post_momentum(p_plus, G1, mu1, h, a1)
        return State(t=float(t0) + h, q=q1, v=v1, p=p_bar, lam=lam1, n=1, carry={}, info={})

    def _step_impl(self, system, state: State, h, u=None) -> State:
        """Advance one step of size ``h`` (negative ``h`` runs the method backwards); ``u``
        the control of a forced system (class docstring)."""
        iface = _interface(system)
        forcing = _forcing(self.discrete_lagrangian, iface, u)
        if forcing is None:
            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                return compiled_step(plan, state, h)
        if self.form == "momentum":
            return self._step_momentum(iface, state, h, forcing)
        return self._step_two(iface, state, h, forcing)

    # ------------------------------------------------------------------ internals

    def _fail(self, state, res, h):
        raise ConvergenceError(
            step=state.n,
            t=state.t,
            residual=float(np.max(res.residual)),
            tol=self.newton.tol,
            iterations=int(res.iterations),
            hint="halve h, or increase NewtonOptions(max_iter=...)",
        )

    def _step_momentum(self, iface, state, h, forcing=None):
        q1, v1, lam1, p_bar1, _, res = gni_momentum_step(
            self.discrete_lagrangian,
            iface,
            state.q,
            state.v,
            state.lam,
            h,
            newton=self.newton,
            metric_fn=self.metric,
            forcing=forcing,
        )
        if not np.all(res.converged):
            self._fail(state, res, h)
        info = {"newton_iterations": int(res.iterations), "residual": float(np.max(res.residual))}
        if forcing is not None:
            info["work"] = _work(self.discrete_lagrangian, forcing, state.q, q1, h)
        return State(
            t=state.t + h, q=q1, v=v1, p=p_bar1, lam=lam1, n=state.n + 1, carry={}, info=info
        )

    def _step_two(self, iface, state, h, forcing=None):
        dl = self.discrete_lagrangian
        q0 = state.q
        q1 = state.carry.get("q_next")
        iters = 0
        u = None if forcing is None else forcing[1]
        u_prev = state.carry.get("u")
        same_u = (u is None and u_prev is None) or (
            u is not None and u_prev is not None and np.array_equal(u, u_prev))
        if q1 is None or state.carry.get("h") != h or not same_u:
            # Start: the first point from the node data (discrete Legendre transform); with
            # a force, also whenever the control changed (the look-ahead point was computed
            # with the previous step's control).
            q1, _, _, _, _, res = gni_momentum_step(
                dl, iface, q0, state.v, state.lam, h,
                newton=self.newton, metric_fn=self.metric, forcing=forcing,
            )
            if not np.all(res.converged):
                self._fail(state, res, h)
            iters += int(res.iterations)
        lam_guess = np.broadcast_to(state.lam, q0.shape[:-1] + np.shape(state.lam)[-1:])
        x0 = np.concatenate([2.0 * q1 - q0, lam_guess], axis=-1)

        def fun(x):
            return gni_two_step_residual(
                dl, iface, q0, q1, x, h, metric_fn=self.metric, forcing=forcing
            )

        jac = None
        j0 = gni_two_step_jacobian(dl, iface, q0, q1, x0, h, metric_fn=self.metric,
                                   forcing=forcing)
        if j0 is not None:

            def jac(x):
                return gni_two_step_jacobian(
                    dl, iface, q0, q1, x, h, metric_fn=self.metric, forcing=forcing
                )

        scale = 1.0 + np.max(np.abs(state.p), axis=-1)
        res = newton_solve(fun, x0, jac=jac, options=self.newton, scale=scale)
        if not np.all(res.converged):
            self._fail(state, res, h)
        n = q0.shape[-1]
        q2, lam1 = res.x[..., :n], res.x[..., n:]
        p_plus = dl.D2(iface, q0, q1, h)
        p_minus = -dl.D1(iface, q1, q2, h)
        if forcing is not None:
            p_plus = p_plus + dl.forces(forcing[0], q0, q1, h, u)[1]
            p_minus = p_minus - dl.forces(forcing[0], q1, q2, h, u)[0]
        p_bar = 0.5 * (p_plus + p_minus)
        G1 = metric(iface, q1, self.metric)
        v1 = np.linalg.solve(G1, p_bar[..., None])[..., 0]
        info = {
            "newton_iterations": iters + int(res.iterations),
            "residual": float(np.max(res.residual)),
        }
        carry = {"q_next": q2, "h": h}
        if forcing is not None:
            info["work"] = _work(dl, forcing, q0, q1, h)
            carry["u"] = u
        return State(
            t=state.t + h, q=q1, v=v1, p=p_bar, lam=lam1, n=state.n + 1,
            carry=carry, info=info,
        )

    def _step_linearization_impl(self, system, state: State, h, u, new: State):
        """(A, B) in the complete state (q, v, λ), and in tangent bases of the constraint set
        (issue 20).

        The momentum form (Def. 4.1, (8)/(26)) maps (q_k, v_k, λ_k) to (q_{k+1}, v_{k+1},
        λ_{k+1}): p⁻ = G(q_k) v_k + (h/2) mu(q_k)ᵀ λ_k, −D1 L_d(q_k, q_{k+1}) = p⁻,
        p⁺ = D2 L_d(q_k, q_{k+1}) and (v_{k+1}, λ_{k+1}) from the node's KKT system
        [[G, muᵀ], [mu, 0]] (v_{k+1}, c) = (p⁺, −a) at q_{k+1} (the projection of
        ``node_from_post_momentum``, h λ_{k+1} = −2c). The step reads the multiplier λ_k
        carried in the state (like NonholonomicPRK's ``"carry"`` rule), so the map is
        linearized in the complete state, ``coordinates == "(q, v, lam)"``:
        ``A = ∂(q_{k+1}, v_{k+1}, λ_{k+1})/∂(q_k, v_k, λ_k)`` ``(..., 2n + m, 2n + m)``, and
        a product of step A's is the Jacobian of several steps (LQR over a horizon,
        adjoints). By the implicit function theorem on the step's Newton matrix
        ∂(D1 L_d)/∂q1: dq_{k+1} = −(∂D1/∂q1)⁻¹ (∂D1/∂q0 dq + dp⁻), dp⁻ = (D21L + (h/2)
        Σ_a λ_a ∂mu_a/∂q) dq + G dv + (h/2) muᵀ dλ; then dp⁺ = ∂(D2 L_d)/∂(q0, q1)
        (dq, dq_{k+1}), and the differentiated KKT system
        [[G1, mu1ᵀ], [mu1, 0]] (dv_{k+1}, dc) = (dp⁺ − (D21L + Σ_a c_a ∂mu_a/∂q) dq_{k+1},
        −(∂mu/∂q·v_{k+1} + ∂a/∂q) dq_{k+1}) gives dv_{k+1} and dλ_{k+1} = −(2/h) dc.
        ``basis``/``next_basis``: orthonormal bases of the tangent spaces of
        {mu(q) v + a(q) = 0} × Rᵐ (2n − m columns in (q, v), and the m free multiplier
        directions: 2n columns of length 2n + m); every step ends on that set. Needs a
        mechanical system with the mass matrix as the metric (∂G/∂q·v = D21L).

        ``form="two_step"``: its state carries the look-ahead point q_{k+1}, but that point is
        a function of the node, q_{k+1}(q_k, v_k, λ_k), the solution of the momentum form's
        −D1 L_d(q_k, q_{k+1}) = p⁻_k (the step computes it so whenever the carried point is
        missing, stale in h or computed with another control; on a consistent state the two
        forms give the same nodes, tested). The one-step map in the state's coordinates
        (q, v, λ) is therefore the momentum form's, and so is its Jacobian: the
        same formulas, evaluated at the two-step form's converged next node (q_{k+1},
        v_{k+1}, λ_{k+1}) (equal to the momentum form's to the Newton tolerance). A
        perturbation of (q_k, v_k, λ_k) moves the look-ahead point with it (it is not an
        independent coordinate of the state).

        For a forced system the step's forced transform −D1 L_d − f_d⁻ = p⁻ and
        p⁺ = D2 L_d + f_d⁺ (module docstring; Marsden & West 2001 §3.2) are differentiated
        with the discrete forces' partial derivatives in q_k, q_{k+1} and u
        (:func:`_gni_force_partials`): ∂f_d⁻/∂q_{k+1} joins the step's Newton matrix,
        and ``B = ∂(q_{k+1}, v_{k+1}, λ_{k+1})/∂u`` ``(..., 2n + m, n_controls)`` follows from
        ∂f_d^∓/∂u through the same solve and the node's KKT system (zero columns without a
        force).
        """
        from chetaev.discrete_lagrangian.extending import (
            LinearizationNotSupportedError,
            StepLinearization,
            tangent_fields,
            with_multiplier_directions,
        )

        iface = _interface(system)
        if self.metric is not None or iface.potential is None \
                or not iface.has_second_derivatives:
            raise LinearizationNotSupportedError(
                f"{self.name}: step_linearization needs the system's mass matrix as the "
                "metric (no metric= override: the node's projection must be the KKT system of "
                "the Lagrangian's Legendre transform) and a mechanical system with second "
                "derivatives (L = v·M(q)v/2 − V(q)); use GNI(variant) without metric= on a "
                "MechanicalSystem."
            )
        q, v = np.asarray(state.q, dtype=float), np.asarray(state.v, dtype=float)
        lam = np.asarray(state.lam, dtype=float)
        q1, v1 = np.asarray(new.q, dtype=float), np.asarray(new.v, dtype=float)
        n = q.shape[-1]
        batch = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], q1.shape[:-1])
        d11, d12, d22 = _gni_ld_hessians(self.discrete_lagrangian, iface, q, q1, h)
        d21 = np.swapaxes(d12, -1, -2)  # ∂(D2 L_d)/∂q_k
        forcing = _forcing(self.discrete_lagrangian, iface, u)
        n_u = int(getattr(system, "n_controls", 0) or 0)
        dmu = dpu = np.zeros((*batch, n, n_u))
        if forcing is not None:  # the forced transform: f_d⁻ in the solve, f_d⁺ in p⁺
            dm0, dm1, dmu, dp0, dp1, dpu = _gni_force_partials(
                self.discrete_lagrangian, forcing[0], q, q1, h, u)
            d11, d12 = d11 + dm0, d12 + dm1
            d21, d22 = d21 + dp0, d22 + dp1
        G = metric(iface, q)
        mu0, _ = constraint_parts(iface, q)
        m = mu0.shape[-2]
        Ag = np.asarray(iface.A_grad(q), dtype=float)  # [a, i, j] = ∂mu_ai/∂q_j
        dpm_dq = iface.D21L(q, v) + 0.5 * h * np.einsum("...aij,...a->...ij", Ag, lam)
        rhs = np.concatenate([np.broadcast_to(d11 + dpm_dq, (*batch, n, n)),
                              np.broadcast_to(G, (*batch, n, n)),
                              np.broadcast_to((0.5 * h) * np.swapaxes(mu0, -1, -2),
                                              (*batch, n, m)),  # ∂p⁻/∂λ_k
                              np.broadcast_to(dmu, (*batch, n, n_u))], axis=-1)
        dq1 = -np.linalg.solve(np.broadcast_to(d12, (*batch, n, n)), rhs)  # (.., n, 2n+m+n_u)
        dpp = d22 @ dq1
        dpp[..., :n] += d21
        dpp[..., 2 * n + m:] += dpu
        # v1 from [[G1, mu1ᵀ], [mu1, 0]] (v1, c) = (p⁺, −a1): differentiate the KKT system
        G1 = metric(iface, q1)
        mu1, _ = constraint_parts(iface, q1)
        c = -0.5 * h * np.asarray(new.lam, dtype=float)  # G1 v1 + mu1ᵀ c = p⁺ (p̄ = G1 v1)
        Ag1 = np.asarray(iface.A_grad(q1), dtype=float)
        top = (dpp - (iface.D21L(q1, v1) + np.einsum("...aij,...a->...ij", Ag1, c)) @ dq1)
        low = -(np.einsum("...aij,...i->...aj", Ag1, v1)) @ dq1
        if iface.affine_grad is not None:
            low = low - np.asarray(iface.affine_grad(q1), dtype=float) @ dq1
        K = np.concatenate([np.concatenate([np.broadcast_to(G1, (*batch, n, n)),
                                            np.swapaxes(np.broadcast_to(mu1, (*batch, m, n)),
                                                        -1, -2)], -1),
                            np.concatenate([np.broadcast_to(mu1, (*batch, m, n)),
                                            np.zeros((*batch, m, m))], -1)], -2)
        k = 2 * n + m + n_u
        dvc = np.linalg.solve(K, np.concatenate([np.broadcast_to(top, (*batch, n, k)),
                                                 np.broadcast_to(low, (*batch, m, k))], -2))
        dlam1 = (-2.0 / h) * dvc[..., n:, :]  # h λ_{k+1} = −2c
        full = np.concatenate([dq1, dvc[..., :n, :], dlam1], axis=-2)
        A, B = full[..., : 2 * n + m], full[..., 2 * n + m:]
        E0 = with_multiplier_directions(_gni_tangent_basis(iface, q, v), m)
        E1 = with_multiplier_directions(_gni_tangent_basis(iface, q1, v1), m)
        return StepLinearization(state=new, A=A, B=B, coordinates="(q, v, lam)",
                                 **tangent_fields(E0, E1, A, B))


def euler_alpha_ptilde_step(q, p_tilde, lam_tilde, h, alpha, M, grad_V, mu, a=None):
    """The paper's explicit one-step maps (13) (α = 0, Euler A), (14) (α = 1, Euler B) and
    (15) (α = ½, RATTLE) on ``(q_k, p̃_k, λ̃_k)`` for a constant mass matrix (paper §5).

    Paper sign: ``λ̃ = −λ`` (chetaev); ``p̃_k = M (q_{k+1} − q_{k−1})/(2h)``. Closed form:
    ``p_{k+1/2} = p̃_k − (h/2)(V_q(q_k) + μᵀλ̃_k)``, ``q_{k+1} = q_k + h M⁻¹ p_{k+1/2}``,
    ``λ̃_{k+1} = C⁻¹ [μ M⁻¹((2/h) p_{k+1/2} − 2α V_q(q_{k+1})) + (2/h) a]``,
    ``p̃_{k+1} = p_{k+1/2} − (h/2)(V_q(q_{k+1}) + μᵀλ̃_{k+1})``; ``mu``, ``a`` are callables of
    ``q`` (``a`` the affine term, paper Def. 6.1). Relation to :class:`GNI` node states:
    ``p̃_k = M v_k − (1 − 2α)(h/2) V_q(q_k)``, ``λ̃_k = −λ_k``.
    """
    Minv = np.linalg.inv(M)
    m0 = mu(q)
    p_half = p_tilde - 0.5 * h * (grad_V(q) + np.einsum("...ai,...a->...i", m0, lam_tilde))
    q1 = q + h * p_half @ Minv.T
    m1 = mu(q1)
    g1 = grad_V(q1)
    C = m1 @ Minv @ np.swapaxes(m1, -1, -2)
    rhs = np.einsum("...ai,...i->...a", m1 @ Minv, (2.0 / h) * p_half - 2.0 * alpha * g1)
    if a is not None:
        rhs = rhs + (2.0 / h) * a(q1)
    lam1 = np.linalg.solve(C, rhs[..., None])[..., 0]
    p_tilde1 = p_half - 0.5 * h * (g1 + np.einsum("...ai,...a->...i", m1, lam1))
    return q1, p_tilde1, lam1


# ---------------------------------------------------------------------- step linearization


def _gni_ld_hessians(dl, iface, q0, q1, h):
    """``(∂D1/∂q0, ∂D1/∂q1, ∂D2/∂q1)`` of the step's discrete Lagrangian (∂D2/∂q0 =
    (∂D1/∂q1)ᵀ). The endpoint α family (10)/(16), L_d = h[(1−α)L(q0, v̄) + αL(q1, v̄)]::

        ∂D1/∂q0 = h(1−α)L_qq(q0) − (1−α)(L_qv + L_vq)(q0) + [(1−α)L_vv(q0) + αL_vv(q1)]/h
        ∂D2/∂q1 = hαL_qq(q1) + α(L_qv + L_vq)(q1) + [(1−α)L_vv(q0) + αL_vv(q1)]/h

    (at v̄ = (q1 − q0)/h); other discrete Lagrangians give their own ``D11``/``D22``
    (``chetaev.discrete_lagrangian.DiscreteLagrangian``)."""
    d12 = dl.D1_dq1(iface, q0, q1, h)
    if isinstance(dl, AlphaDiscreteLagrangian):
        vb = (q1 - q0) / h
        a = dl.alpha
        vv = ((1.0 - a) * iface.D22L(q0, vb) + a * iface.D22L(q1, vb)) / h
        d11 = (h * (1.0 - a) * iface.D11L(q0, vb)
               - (1.0 - a) * (iface.D12L(q0, vb) + iface.D21L(q0, vb)) + vv)
        d22 = (h * a * iface.D11L(q1, vb) + a * (iface.D12L(q1, vb) + iface.D21L(q1, vb)) + vv)
        return d11, d12, d22
    inner = getattr(dl, "inner", dl)
    if not (hasattr(inner, "D11") and hasattr(inner, "D22")):
        from chetaev.discrete_lagrangian.extending import LinearizationNotSupportedError

        raise LinearizationNotSupportedError(
            f"GNI: the discrete Lagrangian {type(inner).__name__} has no D11/D22 (second "
            "derivatives) for the step linearization."
        )
    return inner.D11(iface, q0, q1, h), d12, inner.D22(iface, q0, q1, h)


def _gni_force_partials(dl, fsys, q0, q1, h, u):
    """``(∂f_d⁻/∂q0, ∂f_d⁻/∂q1, ∂f_d⁻/∂u, ∂f_d⁺/∂q0, ∂f_d⁺/∂q1, ∂f_d⁺/∂u)`` of the step's
    discrete forces (``(..., n, n)`` and ``(..., n, n_u)``). The endpoint α family,
    f_d⁻ = h(1−α)F(q0, v̄, u), f_d⁺ = hαF(q1, v̄, u), v̄ = (q1 − q0)/h::

        ∂f_d⁻/∂(q0, q1, u) = (1−α)(hF_q − F_v, F_v, hF_u) at (q0, v̄)
        ∂f_d⁺/∂(q0, q1, u) = α(−F_v, hF_q + F_v, hF_u) at (q1, v̄)

    (F_q, F_v, F_u from ``force_jacobians``); other discrete Lagrangians give their own
    ``force_partials`` (``chetaev.discrete_lagrangian.DiscreteLagrangian``)."""
    if isinstance(dl, AlphaDiscreteLagrangian):
        a = dl.alpha
        vb = (q1 - q0) / h
        Fq0, Fv0, Fu0 = fsys.force_jacobians(q0, vb, u)
        Fq1, Fv1, Fu1 = fsys.force_jacobians(q1, vb, u)
        return ((1.0 - a) * (h * Fq0 - Fv0), (1.0 - a) * Fv0, h * (1.0 - a) * Fu0,
                -a * Fv1, a * (h * Fq1 + Fv1), h * a * Fu1)
    inner = getattr(dl, "inner", dl)
    if not hasattr(inner, "force_partials"):
        from chetaev.discrete_lagrangian.extending import LinearizationNotSupportedError

        raise LinearizationNotSupportedError(
            f"GNI: the discrete Lagrangian {type(inner).__name__} has no force_partials (the "
            "discrete forces' derivatives) for the forced step linearization."
        )
    return inner.force_partials(fsys, q0, q1, h, u)


def _gni_tangent_basis(iface, q, v):
    """Orthonormal basis ``(..., 2n, 2n − m)`` of T_(q,v) of {mu(q) v + a(q) = 0}: the kernel
    of [Σ_i ∂mu_ai/∂q_j v_i + ∂a_a/∂q_j, mu] (last right singular vectors)."""
    mu, _ = constraint_parts(iface, q)
    dq = np.einsum("...aij,...i->...aj", np.asarray(iface.A_grad(q), dtype=float), v)
    if iface.affine_grad is not None:
        dq = dq + np.asarray(iface.affine_grad(q), dtype=float)
    batch = np.broadcast_shapes(dq.shape[:-2], mu.shape[:-2])
    Cmat = np.concatenate([np.broadcast_to(dq, (*batch, *dq.shape[-2:])),
                           np.broadcast_to(mu, (*batch, *mu.shape[-2:]))], axis=-1)
    _, _, Vt = np.linalg.svd(Cmat, full_matrices=True)
    return np.swapaxes(Vt[..., mu.shape[-2]:, :], -1, -2)
