"""Nonholonomic partitioned Runge–Kutta method on a vector space (paper eq. 14/15).

The method class; the per-step residuals and Jacobians are the pure functions of
:mod:`._equations`.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    ConvergenceError,
    InputError,
    Method,
    NewtonOptions,
    PRKStep,
    State,
    newton_solve,
    prk_residual,
)
from chetaev.discrete_lagrangian.extending import (
    forced_hooks,
    forced_multiplier,
    forced_multiplier_control_jacobian,
    interface_of,
)

from . import _equations as eq
from ._adapter import constraint_dim, stage_model
from ._rules import (
    DEFAULT_MULTIPLIER_RULE,
    MULTIPLIER_MODE_ALIASES,
    MULTIPLIER_MODES,
    MULTIPLIER_RULES,
    MethodCache,
    MultiplierModeWarning,
    StageOrders,
    check_newton,
    check_pair,
    convert_pair,
    multiplier_mode_check,
    one_of,
)
from ._validate import check_state, real_array, real_scalar

__all__ = [
    "AUTO_STRUCTURED_MIN_BATCH",
    "CONSTRAINT_MOMENTA",
    "FORMS",
    "JACOBIAN_REUSE",
    "MULTIPLIER_MODES",
    "MULTIPLIER_RULES",
    "NonholonomicPRK",
]

FORMS = ("lagrangian", "hamiltonian")
_STRUCTURED_NEEDS = (
    "jacobian_reuse='structured' needs the Lagrangian form of a mechanical system with a "
    "constant mass matrix (constant_mass=True, explicit FL^-1) and constraint_momenta='iiia'. "
    "Use jacobian_reuse='auto' (it picks 'step' here)."
)
_MODEL_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
CONSTRAINT_MOMENTA = ("iiia", "iiib_rejected")
JACOBIAN_REUSE = ("auto", "structured", "step", "steps", "iteration")
# Deprecated (kept importable): jacobian_reuse="auto" used to pick "structured" only for
# batches of at least 16 trajectories, so a member's result depended on how many members ran
# with it. "auto" now picks "structured" for every batched input (a leading batch axis, even
# of length 1) and "step" for an unbatched one, whatever the batch size (issue 18: an ensemble
# split into chunks equals the whole batch bitwise). The value 1 states that rule.
AUTO_STRUCTURED_MIN_BATCH = 1


def _as_batch_vector(x, name: str, n: int) -> np.ndarray:
    arr = real_array(x, name)
    if arr.ndim == 0 or arr.shape[-1] != n:
        raise InputError(
            f"`{name}` must have shape (..., {n}) for this system (n = {n}), got shape "
            f"{arr.shape}. Pass one configuration per row."
        )
    return arr


def _implicit_flag(inst: Any, attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise InputError(f"`implicit_velocity` must be None, True or False, got {value!r}.")


@attrs.frozen
class NonholonomicPRK(StageOrders, Method):
    """Nonholonomic partitioned Runge–Kutta method (NH-PRK) for any Lobatto IIIA–IIIB pair.

    A map ``(q_k, v_k, lambda_k) -> (q_{k+1}, v_{k+1}, lambda_{k+1})`` on ``TQ|_N x Lambda``
    (Lagrangian form, App. D) or ``(q_k, p_k, lambda_k) -> ...`` on ``T*Q|_M x Lambda``
    (Hamiltonian form, App. E / eq. 15); both give the same map (paper eq. (15), App. E). The
    stage momenta come from Lobatto IIIB; the constraint is imposed at stages 2..s with
    the IIIA-weighted momenta ``p_k^i = p_k + h sum_j a_ij W^j`` (eq. 14d), and by H1/H3
    the last one is exactly ``Psi(q_{k+1}, p_{k+1}) = 0``: the constraint holds at every
    node to solver tolerance. ``lambda_{k+1} = Lambda^s``; by default ``Lambda^1 =
    lambda(q_k, v_k)``, the continuous multiplier at the step's start (``multiplier_rule=
    "continuous"``); the paper's rule carries ``Lambda^1 = lambda_k`` from the previous
    step (``multiplier_rule="carry"``, paper eq. (14), App. D).

    **Why the default is not the paper's rule.** With ``lambda_k`` carried the multiplier
    sequence has a parasitic mode ``lambda_{k+1} ~ R_A(inf) lambda_k`` (alternating for even
    s) that evolves with the backward-time dynamics: a free Chaplygin sleigh (no potential;
    its forward motion is asymptotically stable) loses all its energy by T = 50 (s = 2, 3)
    or T = 200 (s = 4, 5) at h = 0.05, with every step converged. The default rule has no
    such mode (sleigh, h = 0.05, T = 200: relative energy error 1.2e-4, 9.2e-9, 7.3e-13,
    1.4e-14 for s = 2..5) and keeps the orders 2s - 2 in ``q`` and ``v``, at the cost of one
    evaluation of ``system.multiplier`` per step. Runs with ``"carry"`` are monitored: a
    :class:`MultiplierModeWarning` (see :meth:`check_step`) says when the mode has grown.

    **External forces and controls** (issue 20; a system built with ``force=``). The
    forced nonholonomic PRK (the discrete Lagrange–d'Alembert principle,
    Marsden & West 2001 §3.2, with stage forces as in the forced VPRK of
    :mod:`chetaev.discrete_lagrangian.core._forcing`) adds the force to the stage forces
    of eq. (14c), ``W^i = D1L(Q^i, V^i) + D2Phi(Q^i, V^i)^T Lambda^i + F(Q^i, V^i, u)``, so
    that the IIIB momenta and the IIIA constraint momenta ``p_k^i`` of (14d) use the same
    ``W^i``; the control ``u`` of ``step(..., u=)`` is held over the step. ``F``'s Q and V
    derivatives enter the analytic Jacobian (the structured matrix leaves them out, with its
    fallback). ``lambda_0`` and the ``"continuous"`` ``Lambda^1`` are the multipliers of the
    forced equations at the step's control; ``info["work"]`` is the discrete work
    ``h sum_i b_i F(Q^i, V^i, u).V^i``. Measured orders ``2s - 2`` against DOP853 on the
    forced equations: ``tests/test_forces.py``. The Hamiltonian form takes the same force,
    ``F(Q^i, FL^{-1}(Q^i, P^i), u)`` in the stage forces of (15c) (the same map).

    Orders (Cor. 5.2.1, for ``lambda_0`` from the continuous problem): ``q`` and ``p``
    ``2s - 2``; ``lambda`` ``s`` for even ``s`` and ``s - 1`` for odd ``s`` (the paper's
    rule; measured for the default in ``tests/test_order.py``). With ``lambda`` carried the
    step is exactly symmetric (stepping back with ``-h`` returns the input) and, for linear
    constraints and velocity-reversible systems, reversible under ``(q, p, lambda) -> (q,
    -p, lambda)`` (paper Thm. 5.1, Cor. 5.2.1); the default rule gives up this exact
    symmetry. Nonholonomic flows are not symplectic; nothing is claimed there.

    Parameters
    ----------
    pair : PartitionedTableau or int
        ``first`` = (a, b, c) satisfying H1–H3, ``second`` = its symplectic conjugate
        (H1', H2'); typically ``lobatto_iiia_iiib(s)``, or just the stage count ``s``
        (an int >= 2, meaning ``lobatto_iiia_iiib(s)``, as for
        :class:`LieNonholonomicPRK`). Checked: :class:`HypothesisError`.
    form : {"lagrangian", "hamiltonian"}
        Lagrangian form: unknowns ``V^1..V^s, Lambda^2..Lambda^s`` (plus ``v_k^2..v_k^s``
        when ``FL`` has no explicit inverse). Hamiltonian form: unknowns ``Q^i, P^i,
        Lambda^2..Lambda^s``; needs ``system.legendre_inv``.
    newton : NewtonOptions
        The per-step Newton solve: ``tol`` (relative to ``1 + max(|p|, |v|)``), ``atol``,
        ``max_iter``, ``refresh_rate``, ``max_stall``. ``simplified`` and
        ``finite_differences`` must keep their defaults (an :class:`InputError` otherwise):
        the Jacobian is always analytic and ``jacobian_reuse`` chooses its reuse.
    constraint_momenta : {"iiia", "iiib_rejected"}
        ``"iiia"``: the method (eq. 14d). ``"iiib_rejected"``: the variant the paper
        argues against in §5.1, which imposes the inner-stage constraints with the IIIB
        stage momenta ``P^i`` (order ``s - 2`` approximations); kept for negative tests:
        for ``s = 3``, ``lambda`` does not converge and ``q``, ``p`` drop to order 2.
    multiplier_rule : {"continuous", "carry", "zero_first"}
        How ``Lambda^1`` of a step is chosen (the same vocabulary as
        :class:`LieNonholonomicPRK`, constant ``MULTIPLIER_RULES``). ``"continuous"``
        (default, ``DEFAULT_MULTIPLIER_RULE``): ``Lambda^1 = lambda(q_k, v_k)`` from the
        continuous formula at every step (no parasitic mode; orders ``2s - 2`` kept).
        ``"carry"``: the paper's rule (eq. 14; pass it to reproduce the paper's numbers),
        ``Lambda^1 = lambda_k``; it has the growing alternating multiplier mode above and
        is monitored (:class:`MultiplierModeWarning`). ``"zero_first"`` uses ``Lambda^1 =
        0`` (the rule of the homogeneous-spaces paper; order 1-2 in ``q`` on a vector
        space). ``"weighted_sum"``
        (``Lambda^1`` unknown, ``sum_j b_j Lambda^j = 0``) is refused with an :class:`InputError`:
        it was designed for homogeneous-space lifts, where the continuous multiplier vanishes (and
        where it is degenerate: a discrete Noether identity, see the docs' theory page of the
        homogeneous-spaces paper); on a vector space with ``lambda != 0`` it forces the stage
        average of ``lambda`` to zero, which contradicts eq. (14) and loses convergence of
        ``lambda``. Use :class:`LieNonholonomicPRK` for those lifts.
    multiplier_mode : {"carried", "continuous", "zero"}, optional
        Old spelling, kept as an alias: ``"carried"`` -> ``"carry"``, ``"zero"`` ->
        ``"zero_first"``, ``"continuous"`` -> ``"continuous"``. Init-only: after
        construction the attribute is ``None`` and ``multiplier_rule`` holds the rule.
        Passing both with different meanings is an :class:`InputError`. The old values
        are also accepted as ``multiplier_rule`` (it took ``multiplier_mode``'s position).
    implicit_velocity : bool or None
        Lagrangian form only: force the implicit ``v_k^i`` unknowns (True) or the explicit
        ``FL^{-1}`` path (False). ``None``: explicit for mechanical systems, implicit
        otherwise. With ``form="hamiltonian"`` it must stay ``None`` (:class:`InputError`).
    jacobian_reuse : {"auto", "structured", "step", "steps", "iteration"}
        The Newton matrix of the per-step solve. All choices converge to the same
        tolerance (the step's result differs only at that level).
        ``"structured"``: simplified Newton with the analytic Jacobian minus its
        ``O(h^2)`` force terms, whose constraint blocks are rebuilt at every step and solved
        by a Schur complement on the ``(s - 1) m`` multipliers
        (``_equations._structured_solver``): no ``N x N`` matrix is formed or
        factorised, and the contraction rate is ``O(h^2)`` (below ``1.4e-3`` on the
        paper's examples at ``h = 0.1``: 3-4 iterations per step). Where the rate exceeds
        ``newton.refresh_rate`` right after a rebuild (stiff forces) the step finishes with
        the analytic Jacobian. Needs the Lagrangian form of a mechanical system with a
        constant mass matrix (explicit ``FL^{-1}``, ``constraint_momenta="iiia"``);
        an :class:`InputError` otherwise.
        ``"auto"`` (default): ``"structured"`` where it applies and the input is batched (a
        leading batch axis, of any length, even 1), ``"step"`` for an unbatched trajectory
        (its step costs less with LAPACK's LU of the analytic Jacobian). The choice never
        depends on the number of members, so a batch split into chunks (e.g. by
        :func:`chetaev.discrete_lagrangian.integrate_ensemble`) gives the whole batch's
        result bitwise. ``AUTO_STRUCTURED_MIN_BATCH`` (now 1) is kept importable, deprecated.
        ``"step"``: one analytic Jacobian per step at the predicted guess, reused while the
        contraction rate stays below ``newton.refresh_rate``.
        ``"steps"``: the inverse analytic Jacobian is also carried from step to step.
        ``"iteration"``: full Newton (analytic Jacobian at every iteration).
        **Compiled backend** (``backend="numba"``, or ``"auto"`` with kernels): ``"auto"``
        and ``"structured"`` use the structured matrix (same blocks, same fallback to the
        analytic Jacobian) for every input of the Lagrangian form, batched or not: compiled,
        each member runs alone, so its result never depends on the batch either, and the
        structured solve is the cheaper one there too (no LU of the ``N x N`` Jacobian: the
        chaotic system of §7.3, Lobatto-3, 4.9 → 1.6 µs per step). ``"step"`` and
        ``"steps"`` use the analytic Jacobian once per step (``"steps"`` does not carry it
        across steps there), ``"iteration"`` at every iteration; the Hamiltonian form always
        uses the analytic Jacobian.

    Notes
    -----
    **Equations.** Paper eq. (14a)–(14e), App. D (Lagrangian); eq. (15a)–(15e), App. E
    (Hamiltonian); paper eqs. (14), (15), App. D, E and §5.1.

    References
    ----------
    D. Martín de Diego, R. T. Sato Martín de Almagro, "High-order geometric methods for
    nonholonomic mechanical systems", arXiv:1810.10926.
    """

    pair: Any = attrs.field(converter=convert_pair, validator=check_pair)
    form: str = attrs.field(default="lagrangian", validator=one_of(FORMS))
    newton: NewtonOptions = attrs.field(
        factory=NewtonOptions,
        validator=check_newton(
            ("tol", "atol", "max_iter", "refresh_rate", "max_stall"),
            "Analytic Jacobians are always used; choose simplified Newton with "
            "jacobian_reuse=('auto' | 'structured' | 'step' | 'steps' | 'iteration').",
        ),
    )
    constraint_momenta: str = attrs.field(default="iiia", validator=one_of(CONSTRAINT_MOMENTA))
    multiplier_rule: str | None = None
    implicit_velocity: bool | None = attrs.field(default=None, validator=_implicit_flag)
    jacobian_reuse: str = attrs.field(default="auto", validator=one_of(JACOBIAN_REUSE))
    multiplier_mode: str | None = attrs.field(default=None, eq=False, repr=False)
    _cache: dict = attrs.field(factory=MethodCache, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        rule = self.multiplier_rule
        if rule in MULTIPLIER_MODE_ALIASES:  # old values accepted here too (positional use)
            rule = MULTIPLIER_MODE_ALIASES[rule]
        if rule is not None and rule not in MULTIPLIER_RULES:
            raise InputError(
                f"`multiplier_rule` must be one of {MULTIPLIER_RULES}, got {rule!r}. "
                "Pick one of the listed values."
            )
        if self.multiplier_mode is not None:
            if self.multiplier_mode not in MULTIPLIER_MODE_ALIASES:
                raise InputError(
                    f"`multiplier_mode` (old spelling of `multiplier_rule`) must be one of "
                    f"{MULTIPLIER_MODES}, got {self.multiplier_mode!r}. Prefer "
                    f"multiplier_rule= one of {MULTIPLIER_RULES[:3]}."
                )
            alias = MULTIPLIER_MODE_ALIASES[self.multiplier_mode]
            if rule is not None and rule != alias:
                raise InputError(
                    f"multiplier_mode={self.multiplier_mode!r} (= multiplier_rule={alias!r}) "
                    f"contradicts multiplier_rule={rule!r}. Pass multiplier_rule only."
                )
            rule = alias
        rule = DEFAULT_MULTIPLIER_RULE if rule is None else rule
        if rule == "weighted_sum":
            raise InputError(
                "multiplier_rule='weighted_sum' (sum_j b_j Lambda^j = 0) is not offered by "
                "NonholonomicPRK: it was designed for homogeneous-space lifts, whose continuous "
                "multiplier vanishes (and there it is rank deficient by a "
                "discrete Noether identity); on a vector space with a nonzero multiplier "
                "it forces the stage average of lambda to zero, contradicting eq. (14). Use "
                "'carry', 'continuous' or 'zero_first' (or LieNonholonomicPRK for lifts)."
            )
        object.__setattr__(self, "multiplier_rule", rule)
        object.__setattr__(self, "multiplier_mode", None)
        first, second = self.pair.first, self.pair.second
        tab = tuple(
            np.ascontiguousarray(np.asarray(t, dtype=np.float64))
            for t in (first.a, first.b, second.a, first.c)
        )
        self._cache["tableau"] = tab  # (a, b, ahat, c), built once
        if self.form == "hamiltonian" and self.implicit_velocity is not None:
            raise InputError(
                f"implicit_velocity={self.implicit_velocity!r} applies to form='lagrangian' "
                "only (the Hamiltonian form eliminates the velocities with "
                "system.legendre_inv). Leave implicit_velocity=None or use form='lagrangian'."
            )
        if self.form == "hamiltonian" and self.constraint_momenta != "iiia":
            raise InputError(
                "constraint_momenta='iiib_rejected' is implemented for form='lagrangian' "
                "only (the two forms are the same map). Use form='lagrangian'."
            )

    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: Any) -> tuple[str, Any]:
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled_nh`)."""
        from ._compiled_nh import compiled_plan

        return compiled_plan(self, system, iface)

    def _constants(self, h: float, model) -> tuple:
        """``(coeffs, hooks, consts)`` of the default path on the engine's per-step form
        (:func:`._equations.lagrangian_step`), built once per ``(h, model)``."""
        hit = self._cache.get("consts")
        if hit is not None and hit[0] == h and hit[1] is model:
            return hit[2]
        a, b, ahat, _c = self._cache["tableau"]
        coeffs = eq._coefficients(a, ahat, b)
        hooks = eq.NonholonomicHooks(model, coeffs.s, False, "iiia", a=coeffs.a)
        out = (coeffs, hooks, eq.lagrangian_constants(coeffs, h, model))
        self._cache["consts"] = (h, model, out)
        return out

    # ------------------------------------------------------------------ protocol

    @property
    def supports_forces(self) -> bool:  # type: ignore[override]
        """External forces and controls (issue 20): both forms (the force enters the
        engine's stage forces ``W^i``, eq. (14c) / (15c))."""
        return True


    @property
    def guarantees(self) -> dict[str, float]:
        """Φ(q_k, v_k) = 0 at every node to the Newton tolerance (the last Lobatto stage is
        the node, where the constraint is imposed; paper eq. (14)): the post-condition
        :func:`~chetaev.discrete_lagrangian.integrate` checks after every step."""
        return {"velocity": float(self.newton.tol)}

    @property
    def name(self) -> str:
        return f"NH-PRK Lobatto-{self.stages} ({self.form})"

    def _model(self, system):
        try:
            model = _MODEL_CACHE[system]
        except (KeyError, TypeError):
            model = stage_model(system)
            try:
                _MODEL_CACHE[system] = model
            except TypeError:  # not weak-referenceable: rebuild each step
                pass
        if self.form == "hamiltonian" and model.legendre_inv is None:
            inv = getattr(system.system, "legendre_inv", None)
            if inv is None:
                raise InputError(
                    "form='hamiltonian' needs system.legendre_inv(q, p). "
                    "Use form='lagrangian' (it handles implicit Legendre maps)."
                )
            model = dataclasses.replace(model, legendre_inv=inv)
        return model

    def _structured(self, model, q) -> bool:
        """Whether the fast path's step uses the structured Newton matrix."""
        if model.mass_inv is None:
            if self.jacobian_reuse == "structured":
                raise InputError(_STRUCTURED_NEEDS)
            return False
        if self.jacobian_reuse == "structured":
            return True
        # "auto": structured for any batched input, never depending on the batch's size
        return self.jacobian_reuse == "auto" and np.ndim(q) > 1

    def _implicit(self, model) -> bool:
        if self.implicit_velocity is None:
            return model.legendre_inv is None
        if not self.implicit_velocity and model.legendre_inv is None:
            raise InputError(
                "implicit_velocity=False needs an explicit inverse Legendre map "
                "(a mechanical system). Leave implicit_velocity=None."
            )
        return bool(self.implicit_velocity)

    def initial_state(
        self, system: Any, q0: Any, v0: Any, t0: float = 0.0, lam0: Any = None,
        tol: float = 1e-10, *, u: Any = None,
    ) -> State:
        """Check and complete the initial data: ``p_0 = FL(q_0, v_0)`` and ``lambda_0``.

        ``lambda_0`` defaults to the continuous multiplier ``system.multiplier(q0, v0)`` (Thm 5.1
        requires it; see the errata on the docs' theory page of the high-order paper). Pass ``lam0``
        only to study the effect of a wrong value (the order of ``q``, ``p`` drops to 2, paper eq.
        (14), App. D). For a forced system ``lambda_0`` is the multiplier of the forced
        equations at the control ``u`` (``integrate`` passes ``controls[0]``; without it, for a
        system with controls, the multiplier without the force).

        Raises
        ------
        ConstraintViolationError
            If ``|Phi(q0, v0)| > tol`` (data off the constraint set).
        """
        return super().initial_state(system, q0, v0, t0, lam0=lam0, tol=tol, u=u)

    def _initial_state_impl(
        self, system: Any, q0: Any, v0: Any, t0: float, lam0: Any = None, tol: float = 1e-10,
        u: Any = None,
    ) -> State:
        inner = getattr(system, "system", None)
        if inner is None or getattr(system, "constraint", None) is None or not hasattr(inner, "n"):
            raise InputError(
                "NonholonomicPRK needs a `system` ConstrainedSystem(MechanicalSystem or "
                f"LagrangianSystem, velocity constraint) on a vector space, got "
                f"{type(system).__name__}."
            )
        if getattr(inner, "group", None) is not None:
            raise InputError(
                f"`system` is a trivialized system on the group {type(inner.group).__name__}: "
                "integrate it with LieNonholonomicPRK (NonholonomicPRK is for vector spaces)."
            )
        self._check_forced(system)
        tol = real_scalar(tol, "tol", positive=True)
        n = int(inner.n)
        q0 = _as_batch_vector(q0, "q0", n)
        v0 = _as_batch_vector(v0, "v0", n)
        if q0.shape != v0.shape:
            try:
                q0, v0 = np.broadcast_arrays(q0, v0)
            except ValueError:
                raise InputError(
                    f"`v0` of shape {v0.shape} does not broadcast with `q0` of shape "
                    f"{q0.shape}: pass one row per trajectory in both (or a single row in "
                    "one)."
                ) from None
        q0, v0 = q0.copy(), v0.copy()
        system.check_initial(q0, v0, tol=tol)  # ConstraintViolationError off the set
        p0 = np.asarray(system.system.D2L(q0, v0), dtype=np.float64)
        if lam0 is None:
            lam = np.asarray(system.multiplier(q0, v0), dtype=np.float64)
            if _forced(system) and (u is not None or not system.n_controls):
                lam = forced_multiplier(system, q0, v0, lam, u)
        else:
            m = constraint_dim(system)  # needed only here (it may evaluate the constraint)
            lam = _as_batch_vector(lam0, "lam0", m)
            try:
                lam = np.broadcast_to(lam, (*q0.shape[:-1], m)).copy()
            except ValueError:
                raise InputError(
                    f"`lam0` of shape {lam.shape} does not broadcast to the batch "
                    f"{q0.shape[:-1]} of the initial data. Pass one row per trajectory or a "
                    "single row."
                ) from None
        return State(t=float(t0), q=q0, v=v0, p=p0, lam=lam, n=0, carry={}, info={})

    def _step_linearization_impl(self, system: Any, state: State, h: float, u: Any,
                                 new: State) -> Any:
        """(A, B) in (q, p) and in tangent bases of the constraint set (issue 20).

        Coordinates (q_k, p_k) ↦ (q_{k+1}, p_{k+1}) as for every method
        (:class:`~chetaev.discrete_lagrangian.core._linearization.StepLinearization`), by the
        implicit function theorem on the converged unknowns of eq. (14) (App. D; the
        Hamiltonian form of eq. (15) is the same map and is linearized through it), with the
        multipliers Λ²..Λˢ (and the implicit v_k^i) among the unknowns
        (:func:`_nh_step_jacobians`). Λ¹ follows the method's rule: ``"carry"`` reads the
        state's λ_k (Λ¹ = λ_k, paper eq. (14), App. D) and returns λ_{k+1} = Λˢ, so the map
        is linearized in the complete state, ``coordinates == "(q, p, lam)"``:
        ``A = ∂(q_{k+1}, p_{k+1}, λ_{k+1})/∂(q_k, p_k, λ_k)`` ``(..., 2n + m, 2n + m)`` (the
        λ_k column is ∂z/∂Λ¹, the λ_{k+1} rows are Λˢ's rows of dx = −J⁻¹ ∂R/∂θ), B with the
        λ_{k+1} rows, the bases extended by the m free multiplier directions
        (:func:`~chetaev.discrete_lagrangian.core._linearization.with_multiplier_directions`),
        and a product of step A's is the Jacobian of several steps; a state without λ
        (``lam=None``) falls back to the continuous Λ¹ as the step does. ``"zero_first"`` has
        Λ¹ = 0, ``"continuous"`` (default) has Λ¹ = λ(q_k, v_k) (of the forced equations at
        ``u`` for a forced system) with v_k = FL⁻¹(q_k, p_k): its (q, v)-derivative is
        the implicit derivative of the multiplier's KKT system
        (:meth:`~chetaev.discrete_lagrangian.ConstrainedSystem.multiplier_jacobian`, paper
        §3), chained through dv = G⁻¹(dp − D21L dq); it enters z at O(h). That needs
        derivatives one order above the Newton matrix (∂D22L/∂(q, v), ∂f/∂(q, v),
        ∂²Φ/∂q²·v): exact for a system from
        :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (or one built with
        ``ConstrainedSystem(..., kkt_derivatives=...)``), central differences of those
        blocks otherwise, listed in ``finite_differences`` of the result
        (``"multiplier:dc"``, ...). Its u-derivative is exact, ∂Λ¹/∂u = −C⁻¹Φ_v G⁻¹F_u (the
        forced multiplier is affine in F).
        ``basis``/``next_basis``: orthonormal bases (2n − m columns; 2n with the carried λ)
        of the tangent spaces of {Φ(q, FL⁻¹(q, p)) = 0} (× Rᵐ) at both nodes
        (:func:`~chetaev.discrete_lagrangian.core._linearization.
        velocity_constraint_tangent_basis`); every step ends on that set, so
        A and B map into ``next_basis``'s span.
        """
        from chetaev.discrete_lagrangian.extending import (
            LinearizationNotSupportedError,
            StepLinearization,
            no_controls,
            tangent_fields,
            velocity_constraint_tangent_basis,
            with_multiplier_directions,
        )

        model = self._model(system)
        a, _b, ahat, _c = self._cache["tableau"]
        s, n, m = a.shape[0], model.n, model.m
        q, v = np.asarray(state.q, dtype=float), np.asarray(state.v, dtype=float)
        p = state.p
        p = np.asarray(system.system.D2L(q, v) if p is None else p, dtype=float)
        implicit = self.form == "lagrangian" and self._implicit(model)
        momenta = "iiia" if self.constraint_momenta == "iiia" else "iiib"
        history = new.carry.get("history")
        if not history:
            raise LinearizationNotSupportedError(
                f"{self.name}: the step did not record its converged unknowns "
                "(State.carry['history']); linearize with form='lagrangian'."
            )
        x = np.asarray(history[-1], dtype=float)
        nL = s * n + (s - 1) * m + ((s - 1) * n if implicit else 0)
        if self.form == "hamiltonian" and x.shape[-1] == 2 * s * n + (s - 1) * m:
            lead = x.shape[:-1]  # (Q^i, P^i, Λ) of eq. (15): V^i = FL⁻¹(Q^i, P^i)
            V = model.legendre_inv(x[..., : s * n].reshape(*lead, s, n),
                                   x[..., s * n: 2 * s * n].reshape(*lead, s, n))
            x = np.concatenate([V.reshape(*lead, s * n), x[..., 2 * s * n:]], axis=-1)
        elif x.shape[-1] != nL:
            raise LinearizationNotSupportedError(
                f"{self.name}: the step's unknowns have an unexpected layout ({x.shape[-1]} "
                f"entries, expected {nL}); use form='lagrangian'."
            )
        forced = _forced(system)
        coeffs = eq._coefficients(a, ahat)
        inner = eq.NonholonomicHooks(model, s, implicit, momenta)
        hooks = forced_hooks(system, inner, u, s) if forced else inner
        carried = self.multiplier_rule == "carry" and state.lam is not None

        def lam1_of(qq, vv, uu):
            if carried:
                return np.asarray(state.lam, dtype=float)
            if self.multiplier_rule == "zero_first":
                return np.zeros((*qq.shape[:-1], m))
            lam = np.asarray(system.multiplier(qq, vv), dtype=np.float64)
            return forced_multiplier(system, qq, vv, lam, uu) if forced else lam

        lam1 = lam1_of(q, v, u)
        dz_dq, dz_dp, dz_dlam, dz_du, dlams = _nh_step_jacobians(
            x, q, p, lam1, h, coeffs, model, hooks, implicit, momenta)
        A = np.concatenate([dz_dq, dz_dp], axis=-1)
        B = dz_du
        continuous = not carried and self.multiplier_rule != "zero_first"
        if continuous:  # exact from the KKT system (ConstrainedSystem.multiplier_jacobian)
            dlam_dqv = system.multiplier_jacobian(q, v, u if forced else None)
            G = np.asarray(model.D22L(q, v), dtype=float)
            D21 = np.asarray(model.D21L(q, v), dtype=float)
            # v = FL⁻¹(q, p): dv = G⁻¹ (dp − D21L dq)
            dv_dqp = np.linalg.solve(G, np.concatenate(
                [-D21, np.broadcast_to(np.eye(n), D21.shape)], axis=-1))
            dlam_dqp = np.concatenate([dlam_dqv[..., :n], np.zeros(dlam_dqv[..., :n].shape)],
                                      axis=-1) + dlam_dqv[..., n:] @ dv_dqp
            A = A + dz_dlam @ dlam_dqp
            if forced and B.shape[-1]:  # exact: Λ¹ of the forced equations is affine in F
                B = B + dz_dlam @ forced_multiplier_control_jacobian(system, q, v, u)
        B = no_controls(B, A, system)
        E0 = velocity_constraint_tangent_basis(system, q, v)
        E1 = velocity_constraint_tangent_basis(system, new.q, new.v)
        coordinates = "(q, p)"
        if carried:  # the complete state (q, p, λ): Λ¹ = λ_k's column, λ_{k+1} = Λˢ's rows
            A = np.concatenate([np.concatenate([A, np.broadcast_to(
                dz_dlam, (*A.shape[:-1], m))], -1), dlams[..., : 2 * n + m]], -2)
            B = np.concatenate([B, np.broadcast_to(dlams[..., 2 * n + m:],
                                                   (*B.shape[:-2], m, B.shape[-1]))], -2)
            E0, E1 = with_multiplier_directions(E0, m), with_multiplier_directions(E1, m)
            coordinates = "(q, p, lam)"
        return StepLinearization(state=new, A=A, B=B, coordinates=coordinates,
                                 **tangent_fields(E0, E1, A, B),
                                 finite_differences=_linearization_fd(system, continuous))

    def check_step(
        self, system: Any, previous: State, state: State, h: float
    ) -> MultiplierModeWarning | None:
        """Post-step hook (called by ``integrate`` after every converged step): with the
        papers' rule ``"carry"``, a :class:`MultiplierModeWarning` once the parasitic
        multiplier mode exceeds ``MULTIPLIER_MODE_THRESHOLD`` times the multiplier's scale
        (one continuous-multiplier evaluation per step; nothing for the other rules).
        See :func:`._rules.multiplier_mode_check`."""
        return multiplier_mode_check(self, system, previous, state, h)

    def _check_forced(self, system) -> bool:
        """Whether ``system`` is forced (built with ``force=``)."""
        return _forced(system)

    def _step_impl(self, system, state: State, h: float, u: Any = None) -> State:
        """One step of eq. (14) (or (15)); returns the state at ``t + h``.

        Raises
        ------
        InputError
            If ``h`` is zero or not finite (at ``h = 0`` the multipliers drop out of
            eq. (14) and the Newton matrix is singular).
        ConvergenceError
            If Newton does not converge for some trajectory of the batch.
        """
        forced = self._check_forced(system)
        if not forced:
            from chetaev.discrete_lagrangian.extending import resolve_backend

            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                from chetaev.discrete_lagrangian.extending import compiled_step

                check_state(state, (system.system.n,), system.system.n, plan.m)
                return compiled_step(plan, state, h)
        model = self._model(system)
        check_state(state, (model.n,), model.n, model.m)
        a, b, ahat, c = self._cache["tableau"]
        s = a.shape[0]
        q, v, p = state.q, state.v, state.p
        if p is None:
            p = np.asarray(system.system.D2L(q, v))
        if self.multiplier_rule == "carry" and state.lam is not None:
            lam = np.asarray(state.lam, dtype=np.float64)
        elif self.multiplier_rule != "zero_first":  # "continuous", or no carried value yet
            lam = np.asarray(system.multiplier(q, v), dtype=np.float64)
            if forced:  # the multiplier of the forced equations at the step's control
                lam = forced_multiplier(system, q, v, lam, u)
        else:
            lam = np.zeros((*q.shape[:-1], model.m))
        carry = state.carry
        history = carry.get("history") if carry.get("h") == h else None
        guess = None
        if history and history[-1].shape[:-1] == q.shape[:-1]:
            guess = _predict(history)

        fast = False
        if self.form == "lagrangian":
            implicit = self._implicit(model)
            fast = not implicit and self.constraint_momenta == "iiia"
            if guess is None:
                parts = [
                    np.repeat(v[..., None, :], s, axis=-2).reshape(*q.shape[:-1], -1),
                    np.repeat(lam[..., None, :], s - 1, axis=-2).reshape(*q.shape[:-1], -1),
                ]
                if implicit:
                    parts.append(
                        np.repeat(v[..., None, :], s - 1, axis=-2).reshape(*q.shape[:-1], -1)
                    )
                guess = np.concatenate(parts, axis=-1)
            if fast:  # the engine's per-step form; constants built once per (h, model)
                coeffs, hooks, consts = self._constants(h, model)
                structured = self._structured(model, q)
                if forced:  # W^i with F(Q^i, V^i, u) (14c); a new hooks object per control
                    iface = interface_of(system)
                    hooks = eq.ForcedNonholonomicHooks(model, s, coeffs.a, iface.force,
                                                       iface.force_jacobians, u)
                lam_fixed = lam[..., None, :]  # Lambda^1 given
                # stage-major layout for one batch axis with the structured matrix
                equations = PRKStep(q, p, h, coeffs, model, hooks, lam_fixed, consts,
                                    staged=structured and q.ndim == 2)
                fun, jac = equations.residual, equations.jacobian

                def jac_rows(xs, sl):
                    hk = hooks
                    if forced and u is not None and np.shape(u)[:-1] == q.shape[:-1]:
                        hk = eq.ForcedNonholonomicHooks(model, s, coeffs.a, iface.force,
                                                        iface.force_jacobians, u[sl])
                    sub = PRKStep(q[sl], p[sl], h, coeffs, model, hk, lam_fixed[sl], consts)
                    return sub.jacobian(xs)
            else:
                args = (
                    q,
                    p,
                    lam,
                    h,
                    a,
                    ahat,
                    model,
                    implicit,
                    "iiia" if self.constraint_momenta == "iiia" else "iiib",
                )
                aux: dict = {}
                if forced:  # the generic form with the forced hooks (14c)
                    fun, jac, jac_rows = _forced_generic(system, u, args, aux)
                else:

                    def fun(x):
                        return eq.lagrangian_residual(x, *args, aux=aux)

                    def jac(x):
                        return eq.lagrangian_jacobian(x, *args)

                    def jac_rows(xs, sl):
                        return eq.lagrangian_jacobian(xs, q[sl], p[sl], lam[sl], *args[3:])
        else:
            if guess is None:
                lead = q.shape[:-1]
                Q0 = q[..., None, :] + h * c[:, None] * v[..., None, :]
                P0 = np.repeat(p[..., None, :], s, axis=-2)
                L0 = np.repeat(lam[..., None, :], s - 1, axis=-2)
                guess = np.concatenate(
                    [Q0.reshape(*lead, -1), P0.reshape(*lead, -1), L0.reshape(*lead, -1)], axis=-1
                )
            # the engine's Hamiltonian unknowns (Q^i, P^i) with the nonholonomic hooks (15);
            # a forced system adds F(Q^i, FL^{-1}(Q^i, P^i), u) to W^i (15c)
            implicit = False
            aux = {}
            fun, jac, jac_rows = _forced_generic(
                system, u, (q, p, lam, h, a, ahat, model, False, "iiia"), aux,
                eq.NonholonomicHooks(model, s, False, "iiia", unknowns="QP"))

        reuse = self.jacobian_reuse
        if not fast:
            structured = False
            if reuse == "structured":
                raise InputError(_STRUCTURED_NEEDS)
        jac_inv0 = None
        if reuse == "steps" and carry.get("h") == h:
            jac_inv0 = carry.get("jac_inv")
            if jac_inv0 is not None and jac_inv0.shape[:-2] != guess.shape[:-1]:
                jac_inv0 = None
        scale = 1.0 + np.maximum(np.abs(p).max(axis=-1), np.abs(v).max(axis=-1))
        rows = jac_rows if _per_entry(q, p, lam, guess) else None

        result = newton_solve(
            fun,
            guess,
            jac,
            options=self.newton,
            scale=scale,
            jac_inv0=jac_inv0,
            simplified=reuse != "iteration",
            want_inverse=reuse == "steps",
            jac_rows=rows,
            structured=equations.structured_solver if structured else None,
        )
        converged = bool(result.converged.all())
        if not converged:
            failed = ~np.asarray(result.converged)
            where = ""
            if failed.ndim:  # batched: name the failed trajectories (first five)
                idx = [tuple(int(i) for i in k) for k in np.argwhere(failed)[:5]]
                where = f" (failed batch entries: {idx}{' ...' if failed.sum() > 5 else ''})"
            raise ConvergenceError(
                step=state.n,
                t=state.t,
                residual=float(np.max(np.asarray(result.residual)[failed])),
                tol=float(self.newton.tol),
                iterations=int(np.max(result.iterations)),
                hint="halve h, or increase NewtonOptions(max_iter=...); with "
                "multiplier_rule='carry' a growing alternating multiplier mode can "
                f"cause this: try multiplier_rule='continuous'{where}",
            )
        x = result.x
        if fast:
            # node values from the last residual evaluation (at x): eq. (14a), lambda = Lambda^s
            q1, p1 = equations.node_values()
            lam1 = equations.stage_multipliers()[..., -1, :]
            if model.mass_inv is not None:  # M^{-1} p in one fixed order (any batch size)
                v1 = equations.times_inverse_mass(p1)
                if v1 is p1:  # M = I: a copy, not the momentum array itself
                    v1 = p1.copy()
            else:
                v1 = model.legendre_inv(q1, p1)
        else:  # the generic form (Lagrangian or Hamiltonian unknowns): eq. (14a) / (15a)
            q1 = q + h * (b @ aux["V"])
            p1 = p + h * (b @ aux["W"])
            lam1 = aux["Lam"][..., -1, :]
            v1 = aux["u"][..., -1, :] if implicit else model.legendre_inv(q1, p1)
        history = [*(history or [])[-2:], x] if guess is not None else [x]
        carry = {"history": history, "h": h}
        if reuse == "steps" and result.jac_inv is not None:
            carry["jac_inv"] = result.jac_inv
        info = {
            "newton_iterations": int(result.iterations),
            "jacobians": int(result.n_jac),
            "structured_matrices": int(result.n_structured),
            "converged": converged,
            "residual": float(result.residual.max()),
        }
        if forced:  # the discrete work h sum_i b_i F(Q^i, V^i, u).V^i of the step
            if fast:
                V = equations.V
                if equations.staged:
                    V = np.moveaxis(V, 0, -2)
                Fe = hooks.external_force(equations.Q, equations.V, equations.staged)
                if equations.staged:
                    Fe = np.moveaxis(Fe, 0, -2)
            else:
                V = aux["V"]
                Fe = aux["F"]
            info["work"] = h * np.einsum("i,...i->...", b, np.einsum("...in,...in->...i", Fe, V))
        return State(
            t=state.t + h,
            q=q1,
            v=v1,
            p=p1,
            lam=np.array(lam1),
            n=state.n + 1,
            carry=carry,
            info=info,
        )


def _forced(system) -> bool:
    """True for a system built with ``force=`` (issue 20)."""
    return getattr(system, "has_force", False) is True


def _forced_generic(system, u, args, aux: dict, inner=None):
    """``(fun, jac, jac_rows)`` of the generic form (implicit ``v_k^i``, the IIIB variant,
    or the Hamiltonian unknowns of ``inner``) with the external force: the engine's
    ``prk_residual`` with :class:`NonholonomicHooks` (default: of ``args``) wrapped by the
    forced hooks of :mod:`chetaev.discrete_lagrangian.core._forcing` (``W^i`` gains
    ``F(Q^i, V^i, u)``, eq. (14c)/(15c), and ``p_k^i`` of (14d) the same ``W^i``; an
    unforced system keeps ``inner``). ``aux`` receives ``V, W, Lam, u`` and ``F`` (forced)."""
    q, p, lam, h, a, ahat, model, implicit, momenta = args
    s = a.shape[0]
    coeffs = eq._coefficients(a, ahat)
    if inner is None:
        inner = eq.NonholonomicHooks(model, s, implicit, momenta)

    def evaluate(x, q, p, lam, uu, jacobian):
        hooks = forced_hooks(system, inner, uu, s)
        R, J, ev = prk_residual(np.asarray(x), q, p, h, coeffs, model, hooks,
                                np.asarray(lam)[..., None, :], jacobian)
        return R, J, ev, hooks

    def fun(x):
        R, _J, ev, hooks = evaluate(x, q, p, lam, u, False)
        xe = ev.x_extra.reshape(*ev.V.shape[:-2], -1, model.n) if implicit else None
        aux.update(V=ev.V, W=ev.W, Lam=ev.Lam, u=xe)
        if hooks is not inner:
            aux["F"] = hooks.stage_force(ev.Q, ev.V)
        return R

    def jac(x):
        return evaluate(x, q, p, lam, u, True)[1]

    def jac_rows(xs, sl):
        us = u[sl] if u is not None and np.shape(u)[:-1] == q.shape[:-1] else u
        return evaluate(xs, q[sl], p[sl], lam[sl], us, True)[1]

    return fun, jac, jac_rows


def _per_entry(q, p, lam, x) -> bool:
    """Whether the step's inputs carry one entry per entry of the one-axis batch of ``x``
    (then the Jacobian of a block of the batch can be formed: ``newton_solve(jac_rows=...)``)."""
    return x.ndim == 2 and q.shape[:-1] == p.shape[:-1] == lam.shape[:-1] == x.shape[:-1]


def _predict(history: list[np.ndarray]) -> np.ndarray:
    """Initial guess from the solutions of the last steps (same h): polynomial
    extrapolation in the step index, of degree ``len(history) - 1`` (at most 2). The
    unknowns are smooth functions of the step's input, so the guess is O(h^3) accurate
    after three steps; the step's result does not depend on it beyond the solver
    tolerance."""
    if len(history) >= 3:
        return 3.0 * history[-1] - 3.0 * history[-2] + history[-3]
    if len(history) == 2:
        return 2.0 * history[-1] - history[-2]
    return history[-1]


# ---------------------------------------------------------------------- step linearization


def _momentum_rows(ev, model, s: int, implicit: bool, momenta: str):
    """∂(R2, R3)/∂p_k^i of the hooks' rows (eq. 14e; 14d's p_k^i enters nothing else):
    ``(Cp (..., s-1, m, n), implicit)``. Explicit FL⁻¹: R2_i = Φ(Q^i, FL⁻¹(Q^i, p_k^i)),
    Cp_i = Φ_v G⁻¹; the IIIB variant's inner rows Φ(Q^i, V^i) and the implicit form's R2 do
    not see p_k^i (Cp = 0; the implicit R3_i = D2L − p_k^i gives −I)."""
    Qc = ev.Q[..., 1:, :]
    lead = np.broadcast_shapes(ev.W.shape[:-2], Qc.shape[:-2])
    if implicit:
        return np.zeros((*lead, s - 1, model.m, model.n))
    vc = model.legendre_inv(Qc, ev.extra["pk"][..., 1:, :])
    Cv = model.A(Qc) if model.A is not None else model.phi_v(Qc, vc)
    Cp = np.swapaxes(np.linalg.solve(np.swapaxes(model.D22L(Qc, vc), -1, -2),
                                     np.swapaxes(Cv, -1, -2)), -1, -2)
    Cp = np.array(np.broadcast_to(Cp, (*lead, *Cp.shape[-3:])))
    if momenta == "iiib" and s > 2:
        Cp[..., : s - 2, :, :] = 0.0
    return Cp


def _nh_step_jacobians(x, q, p, lam1, h, coeffs, model, hooks, implicit: bool,
                      momenta: str = "iiia"):
    """Jacobians of the nonholonomic PRK step (eq. 14, App. D) by the implicit function theorem.

    ``x`` are the converged unknowns of the Lagrangian form ``[V, Λ²..Λˢ (, v_k^2..s)]``
    and ``hooks`` the step's hooks (:class:`._equations.NonholonomicHooks`, wrapped with the
    external force for a forced system). With z = (q_{k+1}, p_{k+1}) and R(x; q_k, p_k, Λ¹, u)
    = 0 the step's equations, dx/dθ = −J⁻¹ ∂R/∂θ (J the Newton matrix ∂R/∂x) and
    dz/dθ = ∂z/∂x dx/dθ + ∂z/∂θ. ∂R/∂(q_k, Λ¹) are the engine's own Jacobian columns
    (``QColumns(hooks, n + m, before=True)``: ∂Q^i/∂q_k = ∂q_{k+1}/∂q_k = I, ∂Λ¹/∂Λ¹ = I,
    eq. (14a, c), in K = n + m columns before the implicit v_k^i);
    ∂R/∂(p_k, u) are built from ∂P^i/∂p_k = ∂p_k^i/∂p_k = ∂p_{k+1}/∂p_k = I, ∂W^i/∂u = F_u
    (eq. 14b–d) and the hooks' rows in p_k^i (:func:`_momentum_rows`).

    Returns
    -------
    dz_dq, dz_dp : ndarray (..., 2n, n)
    dz_dlam : ndarray (..., 2n, m)
        The derivative in the given Λ¹ (chained by the caller with the multiplier rule).
    dz_du : ndarray (..., 2n, n_u)
    dlams : ndarray (..., m, n + n + m + n_u)
        The derivative of the last stage multiplier Λˢ (the state's next λ, eq. (14a)) in
        (q_k, p_k, Λ¹, u): the rows of Λˢ in dx (for s = 1, Λˢ = Λ¹).
    """
    from chetaev.discrete_lagrangian.extending import QColumns, constant_tangents, control_jacobian

    s, n, m = coeffs.s, model.n, model.m
    inner = getattr(hooks, "inner", hooks)
    e = int(getattr(inner, "n_extra", 0))
    N = x.shape[-1]
    c0 = N - e
    K = n + m
    free = np.asarray(hooks.free, dtype=bool)
    dV, dQ, dLam, dq1 = constant_tangents(coeffs, n, m, free, h, e + K)
    eye = np.eye(n)
    dQ[:, :, c0:c0 + n] = eye
    dq1[:, c0:c0 + n] = eye
    dLam[0, :, c0 + n:c0 + K] = np.eye(m)
    lead = x.shape[:-1]
    xq = np.concatenate([x[..., :c0], np.zeros((*lead, K)), x[..., c0:]], axis=-1)
    _, J, ev = prk_residual(xq, q, p, h, coeffs, model, QColumns(hooks, K, before=True),
                            np.asarray(lam1)[..., None, :], True, (dV, dQ, dLam, dq1))
    keep = np.r_[0:c0, c0 + K:N + K]
    Jx, Rql = J[..., keep], J[..., c0:c0 + K]
    batch = np.broadcast_shapes(Jx.shape[:-2], q.shape[:-1], p.shape[:-1])
    Fu = control_jacobian(hooks, ev)  # (..., s, n, n_u) or None
    nu = 0 if Fu is None else Fu.shape[-1]
    L = n + nu
    # ∂R/∂(p, u): R1 = D2L − P^i (14b), hooks' rows through p_k^i (14d, e)
    dWu = np.zeros((*batch, s, n, L))
    if nu:
        dWu[..., n:] = Fu
    dWf = dWu.reshape((*batch, s, n * L))
    dP = (coeffs.ahat @ dWf).reshape(dWu.shape) * h
    dP[..., :n] += eye
    dpk = (coeffs.a[1:] @ dWf).reshape((*batch, s - 1, n, L)) * h
    dpk[..., :n] += eye
    Cp = _momentum_rows(ev, model, s, implicit, momenta)
    rows = [-dP.reshape((*batch, s * n, L)), (Cp @ dpk).reshape((*batch, (s - 1) * m, L))]
    if implicit:
        rows.append(-dpk.reshape((*batch, (s - 1) * n, L)))
    Rpu = np.concatenate(rows, axis=-2)
    Rtheta = np.concatenate([np.broadcast_to(Rql, (*batch, N, K)), Rpu], axis=-1)
    dx = -np.linalg.solve(np.broadcast_to(Jx, (*batch, N, N)), Rtheta)  # (..., N, K + L)
    dq1_th = ev.dq1_dx[:, keep] @ dx
    dq1_th[..., :n] += eye
    dp1 = np.broadcast_to(ev.dp1_dx, (*batch, n, N + K))
    dp1_th = dp1[..., keep] @ dx
    dp1_th[..., :K] += dp1[..., c0:c0 + K]
    dp1_th[..., K:K + n] += eye
    if nu:
        dp1_th[..., K + n:] += h * (coeffs.bhat @ Fu.reshape((*Fu.shape[:-3], s, n * nu))
                                    ).reshape((*Fu.shape[:-3], n, nu))
    z = np.concatenate([dq1_th, dp1_th], axis=-2)  # (..., 2n, K + L)
    if s > 1:  # x = [V (s n), Λ²..Λˢ, (v_k^i)]: Λˢ's rows, columns (q, Λ¹, p, u)
        dls = dx[..., s * n + (s - 2) * m: s * n + (s - 1) * m, :]
    else:
        dls = np.zeros((*batch, m, K + L))
        dls[..., n:K] = np.eye(m)
    dlams = np.concatenate([dls[..., :n], dls[..., K:K + n], dls[..., n:K], dls[..., K + n:]],
                           axis=-1)
    return z[..., :n], z[..., K:K + n], z[..., n:K], z[..., K + n:], dlams


def _linearization_fd(system: Any, continuous: bool) -> tuple[str, ...]:
    """``StepLinearization.finite_differences`` of a nonholonomic method: the system's
    finite-difference second derivatives of L and force Jacobians (in the Newton matrix) and,
    for the ``"continuous"`` rule, the blocks of dΛ¹/d(q, v) formed by central differences
    (:attr:`~chetaev.discrete_lagrangian.ConstrainedSystem.multiplier_jacobian_fd`)."""
    out = []
    if getattr(system, "fd_second_derivatives", False):
        out.append("second_derivatives")
    if _forced(system) and getattr(system.system, "fd_force_derivatives", False):
        out.append("force_jacobians")
    if continuous:
        out += [f"multiplier:{k}" for k in system.multiplier_jacobian_fd]
    return tuple(out)
