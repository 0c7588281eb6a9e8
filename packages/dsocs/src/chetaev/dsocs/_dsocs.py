"""The DSOCS quadruple (Q, L_d, D_K, D_V) of Definition 3.1 and its one-step map.

Given (q_{k−1}, q_k), the next point q_{k+1} solves (Theorem 3.3, eq. (4); paper Def. 3.1, 3.2,
eqs. (2)–(4), Thm. 3.3)

    g(q_{k−1}, q_k, q_{k+1}) = 0                                  (D_K)
    φ∘β(q_{k−1}, q_k, q_{k+1}) = E·[D2L_d(q_{k−1}, q_k) + D1L_d(q_k, q_{k+1})] = 0,

E spanning D_V|(q_{k−1}, q_k, q_{k+1}) (eq. (3)). The flow Jacobian, the rank conditions of
Theorem 5.1 and the two-form identity of Theorem 5.3 are provided as diagnostics.

**External forces** (issue 20). A DSOCS built with ``force=F(q, v, u)`` (see :class:`DSOCS`)
follows the discrete Lagrange–d'Alembert principle of Marsden & West 2001 §3.2 restricted to
D_V: for every k and every δq_k ∈ D_V|(q_{k−1}, q_k, q_{k+1}),

    δ Σ_j L_d(q_j, q_{j+1}) + (s/h) Σ_j [f_d⁻(q_j, q_{j+1})·δq_j + f_d⁺(q_j, q_{j+1})·δq_{j+1}] = 0,

so that eq. (4) becomes E·[D2L_d(q_{k−1}, q_k) + D1L_d(q_k, q_{k+1}) + p_F] = 0 with the
discrete force at the middle point

    p_F = (s/h)[f_d⁺(q_{k−1}, q_k) + f_d⁻(q_k, q_{k+1})]
        = s·½[F(q_k, (q_k − q_{k−1})/h, u) + F(q_k, (q_{k+1} − q_k)/h, u)],

f_d^± the trapezoidal left and right discrete forces f_d⁻ = (h/2)F(q0, v̄, u),
f_d⁺ = (h/2)F(q1, v̄, u), v̄ = (q1 − q0)/h, of
:meth:`chetaev.discrete_lagrangian.DiscreteLagrangian.forces` (``"trapezoidal"``), and s/h the
normalization of the paper's L_d = s·L(q0, v̄) (no factor h, §4.1.2; s = ``lagrangian_scale``,
1 in the paper), which is (s/h) times the ``"alpha"``-0 rule h·L(q0, v̄). The left-rectangle
forces of that rule (f_d⁻ = hF(q0, v̄, u), f_d⁺ = 0) would put F(q_k, (q_{k+1} − q_k)/h) into
eq. (4): a forward difference of the velocity, O(h) off, which makes the scheme first order
for any velocity-dependent force; the trapezoidal pair averages the backward and forward
differences, F(q_k, ·) at the central difference (q_{k+1} − q_{k−1})/(2h) of φ_{D_K} up to
O(h²) (exactly for F affine in v), and a velocity-independent force gives the same s·F(q_k)
as both rules and as the potential term of L_d. The order of the unforced scheme is kept
(2, symmetric, for the paper's mechanical L). The control u is the one of the step that
solves this equation for q_{k+1} (held over the dual cell [t_k − h/2, t_k + h/2]).
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
import weakref
from collections.abc import Callable

import attrs
import numpy as np
from chetaev.discrete_lagrangian import DiscreteLagrangian, register_picklable

from ._constraints import KinematicConstraint, VariationalConstraint
from ._continuous import SOCS, lagrangian_functions
from ._errors import DSOCSInputError
from ._lagrangian import TwoPointLagrangian
from ._validation import as_points, as_step, step_points

__all__ = ["DSOCS", "FlowConditions", "TwoFormCheck", "central_difference"]

#: DSOCS.at(h) of a family over the step: one discretization per (family, h)
_AT_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: the step options a DSOCS still accepts for compatibility: they are the method's
_STEP_OPTIONS = ("solver", "root_filter", "tol", "max_iter", "max_deflations")
#: the two-point quadrature of the discrete forces (module docstring)
_FORCE_RULE = DiscreteLagrangian("trapezoidal")
#: True while the package itself builds a DSOCS with a step or step options (no warning)
_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("dsocs_quiet", default=False)


@contextlib.contextmanager
def _quiet():
    """Build DSOCS objects with ``h`` or step options without the deprecation warning (the
    package's own members of a family, and its model builders)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _compat_message(names, where: str) -> str:
    """What to write instead of the compatibility keywords ``names`` of ``where``."""
    parts = []
    opts = [n for n in names if n != "h"]
    if opts:
        kw = ", ".join(f"{n}=..." for n in opts)
        parts.append(
            f"the step options {', '.join(opts)} belong to the method: write "
            f"DSOCSIntegrator({kw}) (root_filter(q0, q1, q2, h) and solver(q0, q1, h) take "
            "the step's h) and pass it to integrate(...) or dsocs.step(q0, q1, method=...)"
        )
    if "h" in names:
        parts.append(
            "h belongs to the step: build DSOCS.from_continuous(...) without h (the family "
            "over the step; dsocs.at(h) gives its pieces at one h, and DSOCSIntegrator takes "
            "h from step); for pieces you make at a step, DSOCS(None, None, None, "
            "discretization=lambda h: DSOCS(<the pieces at h>)); leave h out when the pieces "
            "do not depend on it"
        )
    return (f"{where} with {', '.join(names)} is deprecated (compatibility only): "
            + "; ".join(parts) + ".")


def _warn_compat(names, where: str, stacklevel: int) -> None:
    if names and not _QUIET.get():
        warnings.warn(_compat_message(names, where), DeprecationWarning,
                      stacklevel=stacklevel + 1)


def _with_step_options(dsocs: DSOCS, **options) -> DSOCS:
    """``dsocs`` holding the compatibility step ``options`` (``solver(q0, q1)``,
    ``root_filter(q0, q1, q2)`` bound to its ``h``, ...) without the deprecation warning:
    for the package's model builders (``curvature_particle_dsocs(k, h)``,
    ``inertia_wheel_dsocs(h, solver=...)``), whose DSOCS keeps its documented default step."""
    with _quiet():
        return attrs.evolve(dsocs, **options)


def central_difference(q0, q1, q2, h: float):
    """φ_{D_K}^{-1}(q0, q1, q2) = (q1, (q2 − q0)/(2h), (q2 − 2q1 + q0)/h²) (§4.1.2 (3))."""
    h, q0, q1, q2 = step_points(h, q0, q1, q2)
    return q1, (q2 - q0) / (2.0 * h), (q2 - 2.0 * q1 + q0) / h**2


def _as_lagrangian(obj) -> TwoPointLagrangian | None:
    if obj is None or isinstance(obj, TwoPointLagrangian):
        return obj
    if callable(getattr(obj, "D1", None)) and callable(getattr(obj, "D2", None)):
        return TwoPointLagrangian(
            D1=obj.D1,
            D2=obj.D2,
            value=getattr(obj, "Ld", None) or getattr(obj, "value", None),
            D11=getattr(obj, "D11", None),
            D12=getattr(obj, "D12", None),
            D22=getattr(obj, "D22", None),
        )
    raise DSOCSInputError(
        "discrete_lagrangian must be a TwoPointLagrangian or an object with callables "
        f"D1(q0, q1) and D2(q0, q1); got {type(obj).__name__}."
    )


def _as_kinematic(obj) -> KinematicConstraint | None:
    if obj is None or isinstance(obj, KinematicConstraint):
        return obj
    if callable(obj):
        return KinematicConstraint(obj)
    raise DSOCSInputError(
        "kinematic_constraint must be a KinematicConstraint, a callable g(q0, q1, q2) or None "
        f"(no kinematic constraint); got {type(obj).__name__}."
    )


def _as_variational(obj) -> VariationalConstraint | None:
    if obj is None or isinstance(obj, VariationalConstraint):
        return obj
    if callable(obj):
        return VariationalConstraint(basis=obj)
    raise DSOCSInputError(
        "variational_constraint must be a VariationalConstraint or a callable "
        f"basis(q0, q1, q2) -> (r, n); got {type(obj).__name__}."
    )


def _optional_step(h):
    return None if h is None else as_step(h)


def _optional_callable(_inst, attribute, value):
    if value is not None and not callable(value):
        raise DSOCSInputError(
            f"{attribute.name.lstrip('_')} must be a callable or None; got "
            f"{type(value).__name__}."
        )


def _positive_tol(_inst, attribute, value):
    if not (isinstance(value, (int, float, np.floating)) and np.isfinite(value) and value > 0):
        raise DSOCSInputError(
            f"{attribute.name} must be a finite positive number (e.g. 1e-12); got {value!r}."
        )


def _optional(check):
    def optional(inst, attribute, value):
        if value is not None:
            check(inst, attribute, value)

    return optional


def _count(lowest: int):
    def check(_inst, attribute, value):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lowest:
            raise DSOCSInputError(
                f"{attribute.name} must be an integer >= {lowest}; got {value!r}."
            )

    return check


@attrs.frozen(eq=False)
class FlowConditions:
    """Theorem 5.1 diagnostics at a trajectory triple (q0, q1, q2).

    ``sv_forward``/``sv_backward``: singular values of the stacked Jacobian
    [D_3 g; D_3(φ∘β)] resp. [D_1 g; D_1(φ∘β)] (condition 2: injective ⟺ all n singular
    values > rtol·largest). ``rank``: rank of the full Jacobian D(g, φ∘β) (condition 1 asks
    it to be constant near the point).
    """

    sv_forward: np.ndarray
    sv_backward: np.ndarray
    rank: np.ndarray
    injective_forward: np.ndarray
    injective_backward: np.ndarray

    @property
    def ok(self) -> bool:
        """True when condition 2 of Theorem 5.1 holds at every batch entry."""
        return bool(np.all(self.injective_forward) and np.all(self.injective_backward))


@attrs.frozen(eq=False)
class TwoFormCheck:
    """Theorem 5.3: F*Ω − Ω − dξ, each a (..., 2n, 2n) matrix (restricted to T C_d if given)."""

    pullback: np.ndarray
    omega: np.ndarray
    dxi: np.ndarray

    @property
    def defect(self) -> np.ndarray:
        """F*Ω − Ω − dξ (zero by Theorem 5.3)."""
        return self.pullback - self.omega - self.dxi

    @property
    def symplectic_defect(self) -> np.ndarray:
        """F*Ω − Ω (zero iff the flow is symplectic, Remark 5.4)."""
        return self.pullback - self.omega


@attrs.frozen(eq=False)
class DSOCS:
    """A discrete second-order constrained Lagrangian system (Definition 3.1).

    Parameters
    ----------
    discrete_lagrangian : TwoPointLagrangian or object with ``D1``, ``D2``
        L_d: Q×Q → ℝ.
    kinematic_constraint : KinematicConstraint, callable g(q0, q1, q2) → (m,), or None
        D_K ⊂ Q³ (None: D_K = Q³).
    variational_constraint : VariationalConstraint or callable basis(q0, q1, q2) → (r, n)
        D_V, allowed variations of the middle point.
    h : float, optional
        **Deprecated** (a ``DeprecationWarning`` says what to write instead; a member
        ``family.at(h)`` of a family holds its ``h`` without it). The step the pieces were
        discretized at, when they depend on it. The system holds no step otherwise:
        :meth:`at` gives the pieces at any ``h`` of a DSOCS built by ``from_continuous``
        without ``h``, and the method takes ``h`` from ``step`` only — a DSOCS with its own
        ``h`` raises :class:`DSOCSInputError` for a step with another one.
    socs : SOCS, optional
        The continuous system the DSOCS discretizes (set by :meth:`from_continuous`); used
        by the second-order start and for energies.
    solver, root_filter, tol, max_iter, max_deflations : optional
        **Deprecated** (a ``DeprecationWarning`` says what to write instead: the step options
        belong to the method,
        :class:`~chetaev.dsocs.DSOCSIntegrator`, which holds ``solver``, ``root_filter``,
        ``tol``, ``max_iter``, ``max_deflations``). Set here, they are the defaults of
        :meth:`step`, :meth:`trajectory` and of a ``DSOCSIntegrator`` that leaves the option
        unset (``None``); the method's own value wins. ``solver(q0, q1)`` and
        ``root_filter(q0, q1, q2)`` here are bound to the DSOCS's ``h``. Unset everywhere:
        ``tol=1e-12``, ``max_iter=50``, ``max_deflations=3``, no solver, no filter.
    derivative_check : bool, keyword-only, default True
        Verify every supplied derivative (:meth:`check_derivatives`) once, before the first
        step of ``DSOCSIntegrator``; ``False`` skips it.
    discretization : callable, keyword-only, optional
        ``discretization(h)`` → the DSOCS at step ``h`` (set by :meth:`from_continuous`
        without ``h``); such a DSOCS holds no pieces itself (use :meth:`at`).
    force : callable, keyword-only, optional
        External generalized force ``force(q, v, u)`` → ``(..., n)`` of the continuous
        system (issue 20), with the conventions of
        :class:`chetaev.discrete_lagrangian.MechanicalSystem` (broadcasting over leading
        axes; ``u`` the control ``(..., n_controls)``, an empty ``(..., 0)`` array without
        controls, held over a step). It enters eq. (4) as the discrete force p_F of the
        module docstring (forced discrete Lagrange–d'Alembert principle, Marsden & West
        2001 §3.2) and the continuous equations (1) as E·(D_EL L + F) = 0. Needs the
        continuous Lagrangian system (a DSOCS of :meth:`from_continuous`): the force is
        evaluated by that system with ``attrs.evolve(system, force=..., ...)``, so that
        ``attrs.evolve(dsocs, force=..., n_controls=...)`` works on a DSOCS and on a family.
    force_derivatives : callable, keyword-only, optional
        ``(q, v, u)`` → ``(F_q, F_v, F_u)``, exact Jacobians of ``force``; **without it the
        system's central differences** (``MechanicalSystem.force_jacobians``, ~1e-10
        relative) are used in the Newton matrix and the step linearization.
    n_controls : int, keyword-only
        Number of control inputs (default 0).
    lagrangian_scale : float, keyword-only
        s of L_d = s·L(q0, (q1 − q0)/h) (set by :meth:`from_continuous` from its ``scale``):
        the discrete force is scaled alike (default 1, the paper's normalization).
    compiled_kernels : str, keyword-only, optional
        Numba-compilable source of eq. (4) for the compiled step of ``DSOCSIntegrator``
        (issue 17, ``backend="numba"``/``"auto"``): plain functions
        ``dsocs_residual(q0, q1, q2, h, out)`` (the rows [g; φ∘β] of eq. (4), unforced) and
        ``dsocs_jacobian_q2(q0, q1, q2, h, out)`` (their derivative in q2, ``(rows, n)``)
        on 1-d arrays (``math`` and ``np`` available), and the constant
        ``DSOCS_SHAPE = (n, rows)``. Checked against this DSOCS's ``residual`` and
        ``jacobian_q2`` at several seeded points when it is built (a family: through its
        members at two step sizes; :func:`chetaev.dsocs._compiled.check_kernels`), raising
        :class:`DSOCSInputError` on disagreement. Passed by :meth:`from_continuous` to the
        family and its members; :func:`~chetaev.dsocs.curvature_particle_dsocs` writes
        them for the particle.

    Notes
    -----
    One step is a two-step method: given (q_{k−1}, q_k) solve eq. (4) for q_{k+1}. The system
    is square when m + r = n; otherwise (redundant rows, annihilator form) it is solved by
    Gauss–Newton, which needs only injectivity (paper Def. 3.1, 3.2, eqs. (2)–(4), Thm. 3.3
    "Redundant rows"). The solve is :meth:`DSOCSIntegrator.solve`.
    """

    discrete_lagrangian: TwoPointLagrangian | None = attrs.field(converter=_as_lagrangian)
    kinematic_constraint: KinematicConstraint | None = attrs.field(converter=_as_kinematic)
    variational_constraint: VariationalConstraint | None = attrs.field(
        converter=_as_variational)
    h: float | None = attrs.field(default=None, converter=_optional_step)
    socs: SOCS | None = None
    solver: Callable | None = attrs.field(default=None, validator=_optional_callable)
    root_filter: Callable | None = attrs.field(default=None, validator=_optional_callable)
    tol: float | None = attrs.field(default=None, validator=_optional(_positive_tol))
    max_iter: int | None = attrs.field(default=None, validator=_optional(_count(1)))
    max_deflations: int | None = attrs.field(default=None, validator=_optional(_count(0)))
    tangent_basis: Callable | None = None
    name: str = "DSOCS"
    derivative_check: bool = attrs.field(default=True, kw_only=True)
    discretization: Callable | None = attrs.field(default=None, kw_only=True,
                                                  validator=_optional_callable)
    _force: Callable | None = attrs.field(default=None, kw_only=True,
                                          validator=_optional_callable)
    _force_derivatives: Callable | None = attrs.field(default=None, kw_only=True,
                                                      validator=_optional_callable)
    n_controls: int = attrs.field(default=0, kw_only=True, validator=_count(0))
    lagrangian_scale: float = attrs.field(default=1.0, kw_only=True,
                                          converter=lambda x: as_step(x, "lagrangian_scale"))
    compiled_kernels: str | None = attrs.field(default=None, kw_only=True)
    #: the continuous system carrying the force (built from ``socs.system``), or None
    _forced_system: object = attrs.field(default=None, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._init_force()
        if self.discretization is None and (self.discrete_lagrangian is None
                                            or self.variational_constraint is None):
            raise DSOCSInputError(
                "a DSOCS needs a discrete_lagrangian and a variational_constraint (or, for a "
                "family over the step, discretization=...: use DSOCS.from_continuous)."
            )
        names = [n for n in ("h", *_STEP_OPTIONS) if getattr(self, n) is not None]
        # caller -> attrs __init__ -> here
        _warn_compat(names, "DSOCS(...)", stacklevel=3)
        if self.compiled_kernels is not None:
            from ._compiled import check_kernels

            check_kernels(self)  # the kernels against the callables, at seeded points

    def _init_force(self) -> None:
        """Check ``force``/``force_derivatives``/``n_controls`` and build the forced continuous
        system that evaluates them (class docstring)."""
        f = self._force
        if f is None:
            if self._force_derivatives is not None or self.n_controls:
                raise DSOCSInputError(
                    "force_derivatives and n_controls need a force: pass "
                    "force=callable(q, v, u) -> (..., n)."
                )
            return
        system = getattr(self.socs, "system", None)
        if system is None:
            raise DSOCSInputError(
                "force= needs the continuous Lagrangian system the DSOCS discretizes: build "
                "the DSOCS with DSOCS.from_continuous(system, ..., force=...) (the discrete "
                "force is the quadrature of F(q, v, u) along (q0, (q1 - q0)/h))."
            )
        if self.discretization is None and self.h is None:
            raise DSOCSInputError(
                "a forced DSOCS needs its step h (the discrete force depends on it): build it "
                "with DSOCS.from_continuous(...) and use dsocs.at(h), or integrate the family."
            )
        try:
            forced = attrs.evolve(system, force=f, force_derivatives=self._force_derivatives,
                                  n_controls=self.n_controls)
        except (TypeError, AttributeError, attrs.exceptions.NotAnAttrsClassError) as exc:
            raise DSOCSInputError(
                "force= needs a chetaev.discrete_lagrangian system (MechanicalSystem, "
                "LagrangianSystem) as the continuous system of the DSOCS; got "
                f"{type(system).__name__} ({exc})."
            ) from None
        object.__setattr__(self, "_forced_system", forced)

    @property
    def has_force(self) -> bool:
        """True when the DSOCS carries an external force ``force(q, v, u)`` (issue 20)."""
        return self._force is not None

    @property
    def forced_system(self):
        """The continuous Lagrangian system with the external force (None without force):
        its ``generalized_force`` and ``force_jacobians`` evaluate F, F_q, F_v, F_u."""
        return self._forced_system

    def at(self, h: float) -> DSOCS:
        """The DSOCS at step ``h``: Theorem 3.3's pieces as functions of (q0, q1, q2) there.

        A DSOCS built by :meth:`from_continuous` without ``h`` discretizes at ``h`` (once per
        step size, cached); a DSOCS whose pieces do not depend on ``h`` is returned as is;
        a DSOCS with its own ``h`` is returned if ``h`` agrees with it (relative 1e-12).

        Raises
        ------
        DSOCSInputError
            ``h`` is not a finite nonzero real, or disagrees with the DSOCS's own ``h``.
        """
        h = as_step(h)
        if self.h is None and self.discretization is not None:
            cache = _AT_CACHE.setdefault(self, {})
            if h not in cache:
                member = self.discretization(h)
                if (member._force is not self._force or member.n_controls != self.n_controls
                        or member._force_derivatives is not self._force_derivatives):
                    # the family's force (e.g. attrs.evolve(family, force=...)) on its member
                    with _quiet():
                        member = attrs.evolve(member, force=self._force,
                                              force_derivatives=self._force_derivatives,
                                              n_controls=self.n_controls)
                cache[h] = member
            return cache[h]
        if self.h is not None and not np.isclose(h, self.h, rtol=1e-12, atol=0.0):
            raise DSOCSInputError(
                f"the DSOCS was discretized with h = {self.h:g} but the step is h = {h:g}; "
                "build the DSOCS with the same step, or build it by DSOCS.from_continuous "
                "without h (then every step size works)."
            )
        return self

    def _pieces(self) -> None:
        """Raise unless this DSOCS holds its pieces (not a family over the step)."""
        if self.discrete_lagrangian is None:
            raise DSOCSInputError(
                "this DSOCS (from_continuous without h) is a family over the step: its "
                "equations depend on h; use dsocs.at(h) (the method does this at every step)."
            )

    def check_derivatives(self, q0, q1, q2=None) -> None:
        """Compare every supplied derivative with a central finite difference.

        At ``(q0, q1, q2)`` (``q2 = 2q1 − q0`` by default) and two nearby points, slot by
        slot, with the derived tolerance of
        :func:`chetaev.discrete_lagrangian.compare_derivative`: the discrete Lagrangian's
        ``D1``, ``D2`` against ``value`` and ``D11``, ``D12``, ``D22`` against ``D1``, ``D2``
        (eq. (2)); the kinematic constraint's ``jacobian`` (D_1g, D_2g, D_3g) against ``g``;
        and, for a DSOCS built by :meth:`from_continuous`, the SOCS (its
        ``constraint_jacobian`` and its Lagrangian system) at the central-difference image
        ``(q1, (q2 − q0)/(2h), (q2 − 2q1 + q0)/h²)`` (§4.1.2 (3)), and for a forced DSOCS
        the force and its ``force_derivatives`` (the forced system's check). Pieces the package
        derives itself (finite-difference fallbacks) are not checked. ``DSOCSIntegrator``
        runs this once per DSOCS before the first step unless ``derivative_check=False``.

        Raises
        ------
        DerivativeError
            A derivative disagrees with the finite difference (names the argument, the slot,
            the worst entry and both values).
        DSOCSInputError
            Non-finite or mis-shaped points.
        """
        from ._derivcheck import check_kinematic, check_lagrangian

        self._pieces()
        q0 = as_points(q0, "q0")
        n = q0.shape[-1]
        q1 = as_points(q1, "q1", n)
        q2 = 2.0 * q1 - q0 if q2 is None else as_points(q2, "q2", n)
        q0, q1, q2 = (np.broadcast_to(x, np.broadcast_shapes(q0.shape, q1.shape, q2.shape))
                      .reshape(-1, n)[0] for x in (q0, q1, q2))
        Ld = self.discrete_lagrangian
        if Ld.derivative_check:
            check_lagrangian(Ld, q0, q1, "TwoPointLagrangian")
        K = self.kinematic_constraint
        if K is not None and K.derivative_check:
            check_kinematic(K, q0, q1, q2, "KinematicConstraint")
        if self.socs is not None and self.h is not None:
            self.socs.check_derivatives(*central_difference(q0, q1, q2, self.h))
        if self._forced_system is not None and self.h is not None:
            # the external force: its shape and its force_derivatives (issue 20), by the
            # forced continuous system's own check
            q, v, _ = central_difference(q0, q1, q2, self.h)
            self._forced_system.check_derivatives(q, v)

    # -- the equations of Theorem 3.3 ------------------------------------------------------
    def force(self, q0, q1, q2) -> np.ndarray:
        """p = D2L_d(q0, q1) + D1L_d(q1, q2) = 𝔽⁺L_d(q0,q1) − 𝔽⁻L_d(q1,q2) (eq. (3)), (..., n)."""
        self._pieces()
        Ld = self.discrete_lagrangian
        return np.asarray(Ld.D2(q0, q1), float) + np.asarray(Ld.D1(q1, q2), float)

    def external_force(self, q0, q1, q2, u=None) -> np.ndarray:
        """The discrete external force at q1, p_F = (s/h)[f_d⁺(q0, q1) + f_d⁻(q1, q2)]
        (module docstring; zero without ``force``), (..., n)."""
        self._pieces()
        q0, q1, q2 = np.broadcast_arrays(*(np.asarray(x, float) for x in (q0, q1, q2)))
        if self._forced_system is None:
            return np.zeros(q1.shape)
        h, sysf = self.h, self._forced_system
        fp = _FORCE_RULE.forces(sysf, q0, q1, h, u)[1]
        fm = _FORCE_RULE.forces(sysf, q1, q2, h, u)[0]
        return (self.lagrangian_scale / h) * (fp + fm)

    def external_force_jacobians(self, q0, q1, q2, u=None):
        """(∂p_F/∂q0, ∂p_F/∂q1, ∂p_F/∂q2, ∂p_F/∂u), (..., n, n) and (..., n, n_controls),
        from :meth:`~chetaev.discrete_lagrangian.DiscreteLagrangian.force_partials` of the
        two intervals (the system's ``force_jacobians``: exact or central differences)."""
        self._pieces()
        q0, q1, q2 = np.broadcast_arrays(*(np.asarray(x, float) for x in (q0, q1, q2)))
        n = q1.shape[-1]
        if self._forced_system is None:
            z = np.zeros((*q1.shape[:-1], n, n))
            return z, z, z, np.zeros((*q1.shape[:-1], n, 0))
        h, sysf, c = self.h, self._forced_system, self.lagrangian_scale / self.h
        _, _, _, dp0, dp1, dpu = _FORCE_RULE.force_partials(sysf, q0, q1, h, u)
        dm0, dm1, dmu, _, _, _ = _FORCE_RULE.force_partials(sysf, q1, q2, h, u)
        return c * dp0, c * (dp1 + dm0), c * dm1, c * (dpu + dmu)

    def discrete_work(self, q0, q1, u0=None, u1=None) -> np.ndarray:
        """The discrete work over [t0, t0 + h], (f_d⁻(q0, q1; u0) + f_d⁺(q0, q1; u1))·(q1 − q0)/h
        (the trapezoidal forces of the module docstring; ``u0``, ``u1`` the controls of the
        equations at q0 and q1), (...): ≈ ∫F·v dt, the energy change of the step."""
        self._pieces()
        q0, q1 = np.broadcast_arrays(np.asarray(q0, float), np.asarray(q1, float))
        if self._forced_system is None:
            return np.zeros(q0.shape[:-1])
        h, sysf = self.h, self._forced_system
        fm = _FORCE_RULE.forces(sysf, q0, q1, h, u0)[0]
        fp = _FORCE_RULE.forces(sysf, q0, q1, h, u1)[1]
        return np.einsum("...i,...i->...", fm + fp, (q1 - q0) / h)

    def total_force(self, q0, q1, q2, u=None) -> np.ndarray:
        """p + p_F: the covector eq. (4) restricts to D_V (``force`` plus
        ``external_force``)."""
        p = self.force(q0, q1, q2)
        if self._forced_system is None:
            return p
        return p + self.external_force(q0, q1, q2, u)

    def beta(self, q0, q1, q2, u=None) -> np.ndarray:
        """φ∘β(q0, q1, q2): the components of β (eq. (3)) in the chosen trivialization
        (with the discrete external force at control ``u`` for a forced DSOCS)."""
        return self.variational_constraint.components(q0, q1, q2,
                                                      self.total_force(q0, q1, q2, u))

    def constraint_residual(self, q0, q1, q2) -> np.ndarray:
        """g(q0, q1, q2), (..., m) (zero on D_K)."""
        self._pieces()
        if self.kinematic_constraint is None:
            return np.zeros((*np.broadcast_shapes(np.shape(q0), np.shape(q2))[:-1], 0))
        return self.kinematic_constraint.residual(q0, q1, q2)

    def residual(self, q0, q1, q2, u=None) -> np.ndarray:
        """Eq. (4) stacked: [g; φ∘β] → (..., m + r) (forced: control ``u``)."""
        return np.concatenate(
            [self.constraint_residual(q0, q1, q2), self.beta(q0, q1, q2, u)], axis=-1
        )

    def force_jacobians(self, q0, q1, q2):
        """(∂p/∂q0, ∂p/∂q1, ∂p/∂q2), each (..., n, n).

        These are D21L_d(q0,q1), D22L_d(q0,q1) + D11L_d(q1,q2) and D12L_d(q1,q2).
        """
        self._pieces()
        Ld = self.discrete_lagrangian
        return (
            np.swapaxes(Ld.d12(q0, q1), -1, -2),
            Ld.d22(q0, q1) + Ld.d11(q1, q2),
            Ld.d12(q1, q2),
        )

    def jacobians(self, q0, q1, q2, u=None):
        """Slot derivatives (D_1, D_2, D_3) of eq. (4), each (..., m + r, n) (forced:
        control ``u``)."""
        q0, q1, q2 = np.broadcast_arrays(*(np.asarray(x, float) for x in (q0, q1, q2)))
        V = self.variational_constraint
        p = self.total_force(q0, q1, q2, u)
        E = V.matrix(q0, q1, q2)
        dp = self.force_jacobians(q0, q1, q2)
        if self._forced_system is not None:
            dp = tuple(a + b for a, b in zip(dp, self.external_force_jacobians(q0, q1, q2, u)))
        dbeta = [E @ d for d in dp]
        for slot in V_depends(V):
            dbeta[slot] = dbeta[slot] + V.matrix_jvp(q0, q1, q2, p, slot)
        if self.kinematic_constraint is None:
            return tuple(dbeta)
        dg = self.kinematic_constraint.jacobians(q0, q1, q2)
        return tuple(np.concatenate([a, b], axis=-2) for a, b in zip(dg, dbeta))

    def energy(self, q, v) -> np.ndarray:
        """Continuous energy E(q, v) of the underlying system (used by ``Trajectory.energy``)."""
        system = getattr(self.socs, "system", None)
        if system is None or not callable(getattr(system, "energy", None)):
            raise DSOCSInputError(
                "this DSOCS has no continuous system attached; build it with "
                "DSOCS.from_continuous(...) to evaluate energies."
            )
        return np.asarray(system.energy(q, v))

    def discrete_energy(self, q0, q1) -> np.ndarray:
        """L_d(q0, q1) (for the particle: the conserved discrete energy, §4.1.2)."""
        self._pieces()
        if self.discrete_lagrangian.value is None:
            raise DSOCSInputError("the discrete Lagrangian has no value(q0, q1) function.")
        return np.asarray(self.discrete_lagrangian.value(q0, q1))

    def node_residuals(self, nodes) -> np.ndarray:
        """Eq. (4) at every interior node of a trajectory (N+1, ..., n) → (N−1, ..., m+r)."""
        x = np.asarray(nodes, float)
        return self.residual(x[:-2], x[1:-1], x[2:])

    def control_jacobian(self, q0, q1, q2, u=None) -> np.ndarray:
        """∂(eq. (4))/∂u, (..., m + r, n_controls): E·∂p_F/∂u (g does not depend on u)."""
        q0, q1, q2 = np.broadcast_arrays(*(np.asarray(x, float) for x in (q0, q1, q2)))
        E = self.variational_constraint.matrix(q0, q1, q2)
        dbeta = E @ self.external_force_jacobians(q0, q1, q2, u)[3]
        if self.kinematic_constraint is None:
            return dbeta
        m = self.constraint_residual(q0, q1, q2).shape[-1]
        return np.concatenate([np.zeros((*dbeta.shape[:-2], m, dbeta.shape[-1])), dbeta], -2)

    def jacobian_q2(self, q0, q1, q2, u=None) -> np.ndarray:
        """D_3 of eq. (4) only, (..., m + r, n): the Newton matrix of the step."""
        self._pieces()
        q0, q1, q2 = np.broadcast_arrays(*(np.asarray(x, float) for x in (q0, q1, q2)))
        V = self.variational_constraint
        E = V.matrix(q0, q1, q2)
        d3 = self.discrete_lagrangian.d12(q1, q2)
        if self._forced_system is not None:
            c = self.lagrangian_scale / self.h
            d3 = d3 + c * _FORCE_RULE.force_minus_dq1(self._forced_system, q1, q2, self.h, u)
        dbeta = E @ d3
        if 2 in V_depends(V):
            dbeta = dbeta + V.matrix_jvp(q0, q1, q2, self.total_force(q0, q1, q2, u), 2)
        if self.kinematic_constraint is None:
            return dbeta
        return np.concatenate([self.kinematic_constraint.jacobian_q2(q0, q1, q2), dbeta], -2)

    # -- one step ----------------------------------------------------------------------------
    def step(self, q0, q1, guess=None, *, step_index: int = 0, t: float = 0.0, method=None,
             u=None):
        """Solve eq. (4) for q2 given (q0, q1); returns ``(q2, info)`` (``u``: the control of
        a forced DSOCS).

        A convenience for :meth:`DSOCSIntegrator.solve` ``(self, q0, q1, self.h, ...)``
        with ``method`` (default: ``DSOCSIntegrator()``, whose unset options take this
        DSOCS's compatibility defaults): the solve belongs to the method.

        Raises
        ------
        DSOCSConvergenceError
            If Newton fails, or every root found is rejected by ``root_filter``.
        """
        from ._integrator import DSOCSIntegrator

        self._pieces()
        method = DSOCSIntegrator() if method is None else method
        return method.solve(self, q0, q1, self.h, guess, step_index=step_index, t=t, u=u)

    def trajectory(self, q0, q1, n_steps: int, *, method=None) -> np.ndarray:
        """Nodes q_0 .. q_N from (q0, q1): array (N + 1, ..., n) (no driver, no diagnostics).

        Each step is :meth:`step` (``method`` as there).

        Raises :class:`DSOCSConvergenceError` naming the failed step k and t_k = k h (``nan``
        when the DSOCS was built without ``h``).
        """
        q0 = as_points(q0, "q0")
        q1 = as_points(q1, "q1", q0.shape[-1])
        if int(n_steps) < 1:
            raise DSOCSInputError(f"n_steps must be >= 1; got {n_steps}.")
        out = np.empty((int(n_steps) + 1, *q0.shape))
        out[0], out[1] = q0, q1
        for k in range(1, int(n_steps)):
            # a failure names the step and, when the DSOCS knows h, the time t_k = k h
            t = k * self.h if self.h is not None else float("nan")
            out[k + 1], _ = self.step(out[k - 1], out[k], step_index=k, t=t,
                                       method=method)
        return out

    # -- Theorem 5.1 -------------------------------------------------------------------------
    def flow_jacobian(self, q0, q1, q2=None) -> np.ndarray:
        """DF of F(q0, q1) = (q1, q2(q0, q1)) by the implicit function theorem, (..., 2n, 2n).

        dq2 = −(D_3)⁺ (D_1 dq0 + D_2 dq1) with D_j the slot derivatives of eq. (4).
        """
        q0 = as_points(q0, "q0")
        q1 = as_points(q1, "q1", q0.shape[-1])
        if q2 is None:
            q2, _ = self.step(q0, q1)
        J0, J1, J2 = self.jacobians(q0, q1, q2)
        P = np.linalg.pinv(J2)
        n = q0.shape[-1]
        DF = np.zeros((*J2.shape[:-2], 2 * n, 2 * n))
        DF[..., :n, n:] = np.eye(n)
        DF[..., n:, :n] = -P @ J0
        DF[..., n:, n:] = -P @ J1
        return DF

    def check_flow_conditions(self, q0, q1, q2=None, rtol: float = 1e-10) -> FlowConditions:
        """Theorem 5.1 rank conditions at (q0, q1, q2) (paper §5, Thm. 5.1, 5.3, "Thm 5.1")."""
        q0 = as_points(q0, "q0")
        q1 = as_points(q1, "q1", q0.shape[-1])
        if q2 is None:
            q2, _ = self.step(q0, q1)
        J0, J1, J2 = self.jacobians(q0, q1, q2)
        s_f = np.linalg.svd(J2, compute_uv=False)
        s_b = np.linalg.svd(J0, compute_uv=False)
        full = np.concatenate([J0, J1, J2], axis=-1)
        s_all = np.linalg.svd(full, compute_uv=False)
        rank = np.sum(s_all > rtol * s_all[..., :1], axis=-1)
        n = q0.shape[-1]

        def inj(s):
            if s.shape[-1] < n:  # fewer rows than unknowns: never injective
                return np.zeros(s.shape[:-1], dtype=bool)
            return s[..., n - 1] > rtol * s[..., 0]

        return FlowConditions(s_f, s_b, rank, inj(s_f), inj(s_b))

    # -- Theorem 5.3 -------------------------------------------------------------------------
    def xi(self, q0, q1, q2=None) -> np.ndarray:
        """ξ(q0, q1) of eq. (12) as a covector on T(Q×Q): [0, p(q0, q1, q2)], (..., 2n)."""
        if q2 is None:
            q2, _ = self.step(q0, q1)
        p = self.force(q0, q1, q2)
        return np.concatenate([np.zeros_like(p), p], axis=-1)

    def dxi(self, q0, q1, q2=None) -> np.ndarray:
        """dξ as a (..., 2n, 2n) matrix, (dξ)_ab = ∂_a ξ_b − ∂_b ξ_a (analytic, via DF)."""
        q0 = as_points(q0, "q0")
        q1 = as_points(q1, "q1", q0.shape[-1])
        if q2 is None:
            q2, _ = self.step(q0, q1)
        n = q0.shape[-1]
        DF = self.flow_jacobian(q0, q1, q2)
        dp0, dp1, dp2 = self.force_jacobians(q0, q1, q2)
        dpdz = np.concatenate([dp0, dp1], axis=-1) + dp2 @ DF[..., n:, :]  # (..., n, 2n)
        K = np.zeros(DF.shape)
        K[..., :, n:] = np.swapaxes(dpdz, -1, -2)
        return K - np.swapaxes(K, -1, -2)

    def two_form_identity(self, q0, q1, tangent=None) -> TwoFormCheck:
        """Both sides of Theorem 5.3: F*Ω_{L_d} and Ω_{L_d} + dξ at (q0, q1).

        ``tangent`` (2n, d) restricts the forms to T C_d (needed when C_d is not open, e.g.
        for a DSOCS built from a discrete nonholonomic system); defaults to
        ``self.tangent_basis(q0, q1)`` when that is set.
        """
        q0 = as_points(q0, "q0")
        q1 = as_points(q1, "q1", q0.shape[-1])
        q2, _ = self.step(q0, q1)
        DF = self.flow_jacobian(q0, q1, q2)
        Ld = self.discrete_lagrangian
        pull = np.swapaxes(DF, -1, -2) @ Ld.omega(q1, q2) @ DF
        om = Ld.omega(q0, q1)
        dx = self.dxi(q0, q1, q2)
        if tangent is None and self.tangent_basis is not None:
            tangent = self.tangent_basis(q0, q1)
        if tangent is not None:
            T = np.asarray(tangent, float)
            Tt = np.swapaxes(T, -1, -2)
            pull, om, dx = (Tt @ X @ T for X in (pull, om, dx))
        return TwoFormCheck(pull, om, dx)

    # -- builders --------------------------------------------------------------------------
    @classmethod
    def from_continuous(
        cls,
        system,
        constraint: Callable,
        variations: Callable,
        h: float | None = None,
        *,
        constraint_jacobian: Callable | None = None,
        variations_depend_on: tuple[str, ...] = ("q", "v", "a"),
        scale: float = 1.0,
        **kwargs,
    ) -> DSOCS:
        """DSOCS of a continuous SOCS by the discretization maps of §4 (paper §4.1.2, §4.2.2).

        L_d = scale·L(q0, (q1 − q0)/h); D_K = φ_{D_K}(C_K) with the central-difference map
        φ_{D_K}^{-1}(q0,q1,q2) = (q1, (q2−q0)/(2h), (q2−2q1+q0)/h²); D_V = C_V at that image.

        Parameters
        ----------
        system : chetaev.discrete_lagrangian Lagrangian system
        constraint : callable ``constraint(q, v, a)`` → (..., m), C_K.
        variations : callable ``variations(q, v, a)`` → (..., r, n), rows spanning C_V.
        h : float, optional
            The time step. Without it (the system holds no step) the result is the family
            over the step: ``dsocs.at(h)`` discretizes at any ``h`` and ``DSOCSIntegrator``
            does so at the ``h`` of each ``step``. With it (deprecated: write
            ``DSOCS.from_continuous(...).at(h)``) the DSOCS is the discretization at that ``h``
            only and a step with another ``h`` raises.
        constraint_jacobian : callable, optional
            ``(q, v, a)`` → (c_q, c_v, c_a); chained through the central map
            (D_1g = −c_v/(2h) + c_a/h², D_2g = c_q − 2c_a/h², D_3g = c_v/(2h) + c_a/h²).
        variations_depend_on : subset of ("q", "v", "a")
            What ``variations`` depends on (() for a constant basis); saves derivatives.
        **kwargs : passed to the DSOCS (name, derivative_check, ``force``,
            ``force_derivatives``, ``n_controls``, and the deprecated options solver,
            root_filter, tol, ...: they belong to ``DSOCSIntegrator``). A ``system`` built
            with ``force=`` gives the DSOCS its force (unless ``force=`` is passed here).
        """
        _warn_compat([n for n in ("h", *_STEP_OPTIONS)
                      if (h if n == "h" else kwargs.get(n)) is not None],
                     "DSOCS.from_continuous(...)", stacklevel=2)
        if getattr(system, "has_force", False) is True and kwargs.get("force") is None:
            # a forced continuous system: its force (evaluated by the system itself) is the
            # DSOCS's force, never silently dropped
            kwargs.update(force=system.generalized_force,
                          force_derivatives=system.force_jacobians,
                          n_controls=int(system.n_controls))
        kwargs.setdefault("lagrangian_scale", scale)
        funcs = lagrangian_functions(system)
        dep = set(variations_depend_on)
        unknown = dep - {"q", "v", "a"}
        if unknown:
            raise DSOCSInputError(
                f"variations_depend_on may contain only 'q', 'v', 'a'; got {sorted(unknown)}."
            )
        socs = SOCS(system, constraint, variations, constraint_jacobian,
                    derivative_check=kwargs.get("derivative_check", True))

        def discretize(h: float) -> DSOCS:
            """The DSOCS at step h (the pieces below close over h)."""
            with _quiet():  # a member of the family knows its h (not a user's keyword)
                return cls(*cls._continuous_pieces(funcs, constraint, variations, h,
                                                   constraint_jacobian, dep, scale),
                           h=h, socs=socs, **kwargs)

        if h is not None:
            return discretize(as_step(h))
        with _quiet():
            return cls(None, None, None, socs=socs, discretization=discretize, **kwargs)

    @staticmethod
    def _continuous_pieces(funcs, constraint, variations, h, constraint_jacobian, dep, scale):
        """(L_d, D_K, D_V) of :meth:`from_continuous` at step ``h`` (paper §4.1.2, §4.2.2)."""
        Ld = TwoPointLagrangian.from_functions(
            funcs["dLdq"], funcs["dLdv"], h, lagrangian=funcs.get("lagrangian"),
            d2L_dqdq=funcs.get("d2L_dqdq"), d2L_dqdv=funcs.get("d2L_dqdv"),
            d2L_dvdv=funcs.get("d2L_dvdv"), scale=scale,
        )
        # derived from the system (checked by the SOCS check below), not user-supplied
        Ld = attrs.evolve(Ld, derivative_check=False)

        def g(q0, q1, q2):
            return np.asarray(constraint(*central_difference(q0, q1, q2, h)), float)

        jac = None
        if constraint_jacobian is not None:

            def jac(q0, q1, q2):
                cq, cv, ca = (np.asarray(x, float) for x in constraint_jacobian(
                    *central_difference(q0, q1, q2, h)))
                return (-cv / (2 * h) + ca / h**2, cq - 2 * ca / h**2, cv / (2 * h) + ca / h**2)

        def basis(q0, q1, q2):
            return np.asarray(variations(*central_difference(q0, q1, q2, h)), float)

        slots = set()
        if "q" in dep:
            slots.add(1)
        if "v" in dep:
            slots |= {0, 2}
        if "a" in dep:
            slots |= {0, 1, 2}
        V = VariationalConstraint(basis=basis, depends_on=tuple(sorted(slots)))
        # jac chains the user's constraint_jacobian, which the SOCS check compares directly
        return Ld, KinematicConstraint(g, jac, derivative_check=False), V

    @classmethod
    def from_discrete_nonholonomic(
        cls,
        discrete_lagrangian,
        discrete_constraint: Callable,
        constraint_matrix: Callable,
        *,
        discrete_constraint_jacobian: Callable | None = None,
        h: float | None = None,
        **kwargs,
    ) -> DSOCS:
        """The DSOCS of a discrete nonholonomic system (Remark 3.4; paper Rem. 3.4).

        D_K = (Q×𝒟_d) ∩ (𝒟_d×Q) = {g_d(q0, q1) = 0, g_d(q1, q2) = 0} and
        D_V|(q0,q1,q2) = 𝒟_{q1} = ker A(q1). Both systems have the same trajectories.

        Parameters
        ----------
        discrete_lagrangian : TwoPointLagrangian (or object with D1, D2)
        discrete_constraint : callable ``g_d(q0, q1)`` → (..., m): 𝒟_d = {g_d = 0}.
        constraint_matrix : callable ``A(q)`` → (..., m, n): 𝒟_q = ker A(q).
        discrete_constraint_jacobian : callable, optional
            ``(q0, q1)`` → (∂g_d/∂q0, ∂g_d/∂q1), each (..., m, n).

        Notes
        -----
        The rows g_d(q0, q1) do not involve q2: on consistent data they are identities, and
        the step is solved by Gauss–Newton (paper Def. 3.1, 3.2, eqs. (2)–(4), Thm. 3.3 "Redundant
        rows"). C_d ⊂ 𝒟_d is not
        open, so Theorem 5.3 is checked on T𝒟_d (``tangent_basis``).
        """
        from ._validation import fd_jacobian

        def gd_jac(q0, q1):
            if discrete_constraint_jacobian is not None:
                a, b = discrete_constraint_jacobian(q0, q1)
                return np.asarray(a, float), np.asarray(b, float)
            q0, q1 = np.broadcast_arrays(np.asarray(q0, float), np.asarray(q1, float))
            return (
                fd_jacobian(lambda x: discrete_constraint(x, q1[..., None, :]), q0),
                fd_jacobian(lambda x: discrete_constraint(q0[..., None, :], x), q1),
            )

        def g(q0, q1, q2):
            return np.concatenate(
                [np.asarray(discrete_constraint(q0, q1), float),
                 np.asarray(discrete_constraint(q1, q2), float)], axis=-1)

        def jac(q0, q1, q2):
            a0, a1 = gd_jac(q0, q1)
            b1, b2 = gd_jac(q1, q2)
            z = np.zeros_like(a0)
            return (
                np.concatenate([a0, z], -2),
                np.concatenate([a1, b1], -2),
                np.concatenate([z, b2], -2),
            )

        def annihilator(q0, q1, q2):
            return np.asarray(constraint_matrix(q1), float)

        def tangent(q0, q1):
            a0, a1 = gd_jac(q0, q1)
            G = np.concatenate([a0, a1], axis=-1)  # (..., m, 2n)
            vt = np.linalg.svd(G)[2]
            m = G.shape[-2]
            return np.swapaxes(vt[..., m:, :], -1, -2)  # (..., 2n, 2n − m)

        V = VariationalConstraint(annihilator=annihilator, depends_on=(1,))
        # without discrete_constraint_jacobian, jac is a finite difference: nothing to check
        K = KinematicConstraint(g, jac,
                                derivative_check=discrete_constraint_jacobian is not None)
        _warn_compat([n for n in ("h", *_STEP_OPTIONS)
                      if (h if n == "h" else kwargs.get(n)) is not None],
                     "DSOCS.from_discrete_nonholonomic(...)", stacklevel=2)
        with _quiet():
            return cls(discrete_lagrangian, K, V, h=h, tangent_basis=tangent, **kwargs)


def V_depends(V: VariationalConstraint) -> tuple[int, ...]:
    return tuple(V.depends_on)


# pickling a DSOCS whose callables are lambdas raises UnpicklableError (with advice)
register_picklable(DSOCS, KinematicConstraint, VariationalConstraint, TwoPointLagrangian, SOCS)
