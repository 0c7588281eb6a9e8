"""``Method``: the one base class of every integrator (DESIGN.md "The shared protocol").

The shape is scipy's ``OdeSolver`` (``scipy/integrate/_ivp/base.py``): the public
:meth:`Method.initial_state` and :meth:`Method.step` do the bookkeeping once, for every
method of every package, and call the method's own part, :meth:`Method._initial_state_impl`
and :meth:`Method._step_impl`::

    method.initial_state(system, q0, v0, t0=0.0, **options) -> State   # t0 checked once
    method.step(system, state, h) -> State                             # h checked once;
                                                                       # n + 1, t on the grid
    method.step(system, state, h, u=u) -> State                        # with a control u

What the base does, so that no method does it again:

* **the step size, one rule for all methods**: ``step`` accepts any finite nonzero real
  ``h``; a negative ``h`` steps backwards in time (every method except those that declare
  ``negative_steps = False``, which reject it with the same error class). Zero, NaN, inf and
  non-numbers raise :class:`~chetaev.discrete_lagrangian.InputError` (a ``ValueError``)
  naming ``h`` and the fix. The driver :func:`~chetaev.discrete_lagrangian.integrate`
  further requires ``h > 0``;
* **the counter and the time grid**: the returned state has ``n = state.n + 1`` and, when
  ``state.grid = (t_ref, n_ref, h)`` was set by the driver for this ``h``,
  ``t = t_ref + (n − n_ref)·h`` exactly (no accumulated rounding after any number of steps);
  otherwise ``t = state.t + h``. The grid is passed on to the new state;
* **``info``**: always a dict (``{}`` when the method reports nothing);
* **error context**: a Newton failure inside ``_step_impl`` raises
  :class:`~chetaev.discrete_lagrangian.ConvergenceError` naming the step ``state.n``, the time
  ``state.t`` and the residual (``raise_unless_converged(res, state)`` builds it).

A method declares, as class attributes (or properties), what the driver reads: ``name``,
``order`` (``None`` when it depends on data, e.g. a custom start), ``symmetric``,
``guarantees`` (the constraint levels held at every node and their tolerance, ``None``: not
declared, ``{}``: none by design) and the post-step hook :meth:`check_step`.

**External forces and controls** (issue 20). A system built with ``force=`` (or a control
``u`` passed to :meth:`Method.step`) reaches only the methods that declare
``supports_forces = True``; their ``_step_impl`` takes the keyword ``u=`` (the checked
control ``(..., n_controls)``, or None for a forced system without controls) and puts the
force into its discrete equations (the forced discrete Euler–Lagrange / Lagrange–d'Alembert
equations, Marsden & West 2001 §3.2). Every other method raises
:class:`ForcesNotSupportedError` (an :class:`InputError`) in ``initial_state`` and ``step``:
a force is never silently ignored. Every integrator of the project takes forces: ``VPRK``,
``ConstrainedPRK``, ``DiscreteEulerLagrange``, ``LieVPRK``, the discretization-map methods
(``DiscretizationMapMethod``, ``Rattle``, their compositions, ``ExtrinsicEulerBA``,
``StageConstrainedBaseline``, ``LieDiscretizationMapMethod``), ``chetaev.nh_integrators``'
``NonholonomicPRK`` and ``LieNonholonomicPRK``, ``chetaev.gni``'s ``GNI``, ``ReducedGNI`` and
``Composition``, and ``chetaev.dsocs.DSOCSIntegrator``.

**Step linearizations** (issue 20). :meth:`Method.step_linearization` takes the step and
returns a :class:`~chetaev.discrete_lagrangian.core._linearization.StepLinearization` (the next
state and the Jacobians of the step with respect to the state and the control, from the
converged Newton matrix by the implicit function theorem). A method implements
``_step_linearization_impl(system, state, h, u, new)``; the others raise
:class:`~chetaev.discrete_lagrangian.core._linearization.LinearizationNotSupportedError`
(an :class:`InputError`). Implemented by every integrator of the project (the list above); a
method written outside the project without the hook raises.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from .._util._errors import InputError
from ._linearization import LinearizationNotSupportedError, StepLinearization
from ._state import State

__all__ = ["ForcesNotSupportedError", "Method", "check_step_size"]

_INF = float("inf")


class ForcesNotSupportedError(InputError):
    """A forced system (``force=``) or a control ``u`` given to a method without forces."""


def _forced(system: Any) -> bool:
    """True for a system built with ``force=`` (a ConstrainedSystem forwards ``has_force``)."""
    return getattr(system, "has_force", False) is True


def _unsupported(method: Method, system: Any, u: Any) -> ForcesNotSupportedError:
    what = ("a system with an external force (force=...)" if _forced(system)
            else "a control `u`")
    return ForcesNotSupportedError(
        f"{method.name} does not take external forces yet; use VPRK or ConstrainedPRK. It was "
        f"given {what}: integrate the forced system with VPRK or DiscreteEulerLagrange "
        "(unconstrained), ConstrainedPRK or a discretization-map method (holonomic "
        "constraints), chetaev.nh_integrators.NonholonomicPRK or chetaev.gni.GNI (velocity "
        "constraints); on a Lie group LieVPRK, LieDiscretizationMapMethod or "
        "chetaev.nh_integrators.LieNonholonomicPRK."
    )


def configuration_ndim(system: Any) -> int:
    """Trailing axes of one configuration ``q`` of a state of ``system``: the system's
    ``configuration_ndim`` when it declares one (``chetaev.gni.ReducedSystem``: its states
    hold the shape coordinates, although it carries a group), else 1 on a vector space and
    ``len(group.shape)`` on a group. The leading axes are the batch (of controls too)."""
    nd = getattr(system, "configuration_ndim", None)
    if nd is not None:
        return int(nd)
    group = getattr(system, "group", None)
    return 1 if group is None else len(tuple(group.shape))


def check_control(system: Any, q: Any, u: Any) -> Any:
    """The control ``u`` of a step as a float array ``(..., n_controls)`` (or None).

    ``q`` is the configuration batch of the state (the control's leading axes must
    broadcast to it). None stays None (the system supplies the empty control when it has
    no control inputs, and raises when it needs one).

    Raises
    ------
    InputError
        ``u`` given to a system without force, not real, not finite, of a wrong last axis
        (``n_controls``) or with leading axes that do not broadcast to the batch of ``q``.
    """
    import numpy as np

    from .._util._validation import real_array

    if u is None:
        if getattr(system, "n_controls", 0):
            raise InputError(
                f"This system has n_controls={system.n_controls}: pass the control "
                f"u=array of shape (..., {system.n_controls}) to step (or controls= to "
                "integrate)."
            )
        return None
    if not _forced(system):
        raise InputError(
            "A control `u` was given but the system has no external force: build it with "
            "force=callable(q, v, u) and n_controls=..., or drop `u`."
        )
    u = real_array(u, "u")
    m = int(system.n_controls)
    if u.ndim == 0 or u.shape[-1] != m:
        raise InputError(
            f"The control `u` must have shape (..., {m}) (the system's n_controls={m}), got "
            f"shape {u.shape}."
        )
    if not np.all(np.isfinite(u)):
        raise InputError("The control `u` must be finite, but it holds NaN or inf.")
    qb = np.shape(q)[: np.ndim(q) - configuration_ndim(system)]
    try:
        ok = np.broadcast_shapes(qb, u.shape[:-1]) == qb
    except ValueError:
        ok = False
    if not ok:
        raise InputError(
            f"The control `u` of shape {u.shape} does not broadcast to the state batch "
            f"{qb}: pass one control per batch member, shape (*batch, {m}) (or ({m},) for all)."
        )
    return u


def check_step_size(h: Any, negative: bool = True) -> float:
    """Return the step size ``h`` as a float: finite, nonzero, and positive unless ``negative``.

    The one rule of :meth:`Method.step` (module docstring).

    Raises
    ------
    InputError
        ``h`` is not a real number, is zero, NaN or inf, or negative where the method does
        not support negative steps.
    """
    if type(h) is float and (0.0 < h < _INF or (negative and -_INF < h < 0.0)):
        return h  # the hot path: one type test and one comparison
    if isinstance(h, (bool, str, bytes)) or not _is_real(h):
        raise InputError(
            f"The step size `h` must be a real number, got {h!r} ({type(h).__name__}). "
            "Pass a float, e.g. h=0.01."
        )
    val = float(h)
    if not -_INF < val < _INF or val == 0.0:
        raise InputError(
            f"The step size `h` must be finite and nonzero, got {h!r}. Pass an h that is "
            "finite and non-zero (a negative h steps backwards in time)."
        )
    if val < 0.0 and not negative:
        raise InputError(
            f"The step size `h` must be positive for this method, got {h!r}: it does not "
            "support negative steps. Pass h > 0."
        )
    return val


def _check_t0(t0: Any) -> float:
    """``t0`` as a finite float; bools, strings and complex numbers are not times."""
    if isinstance(t0, (bool, str, bytes)) or not _is_real(t0):
        raise InputError(f"`t0` must be a real number, got {t0!r}. Pass a float, e.g. t0=0.0.")
    val = float(t0)
    if not -_INF < val < _INF:
        raise InputError(f"`t0` must be finite, got {t0!r}.")
    return val


def _is_real(h: Any) -> bool:
    import numpy as np

    if isinstance(h, np.bool_) or np.iscomplexobj(h) or np.ndim(h) != 0:
        return False
    try:
        float(h)
    except (TypeError, ValueError):
        return False
    return True


def _with_backend(factory: Any, args: tuple, backend: str) -> Any:
    """Unpickling helper of :meth:`Method.__reduce_ex__`: the object with its backend."""
    obj = factory(*args)
    object.__setattr__(obj, "_backend", backend)
    return obj


class _MethodMeta(abc.ABCMeta):
    """Takes the keyword ``backend=`` (issue 17) off every method's constructor call, checks
    it once (:func:`~chetaev.discrete_lagrangian.core._backend.check_backend`) and stores it on
    the instance: one mechanism for attrs and plain subclasses alike."""

    def __call__(cls, *args: Any, backend: str = "auto", **kwargs: Any) -> Any:
        from ._backend import check_backend

        check_backend(backend, getattr(cls, "name", cls.__name__)
                      if isinstance(getattr(cls, "name", None), str) else cls.__name__,
                      bool(getattr(cls, "compiled_backend", False)))
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_backend", backend)
        return obj


class Method(abc.ABC, metaclass=_MethodMeta):
    """Base class of every integrator: public ``initial_state`` / ``step``, private hooks.

    Subclasses (usually frozen attrs classes holding the method's data) write:

    ``_initial_state_impl(system, q0, v0, t0, **options) -> State``
        check and complete the initial data (momenta, consistent multipliers); ``t0`` is
        already a finite float. Return ``State(t=t0, ..., n=0)``.
    ``_step_impl(system, state, h) -> State``
        (``_step_impl(system, state, h, u=None)`` when ``supports_forces``)
        one step from ``state`` with the already checked ``h``; return the new State (its
        ``t`` and ``n`` are set by :meth:`step`; write ``t=state.t + h, n=state.n + 1``
        for readability). Raise ``ConvergenceError`` via ``raise_unless_converged(res,
        state)`` when the solve fails.

    and declare ``name``, ``order``, ``symmetric`` (and, if they hold, ``guarantees`` and a
    :meth:`check_step` hook). ``docs/architecture.rst`` has a worked example.

    Attributes
    ----------
    name : str
        Display name (``Trajectory.method``).
    order : int or None
        Classical order of the global error (None: depends on data).
    symmetric : bool
        Whether the one-step map is symmetric (``Φ_{-h} = Φ_h^{-1}``).
    guarantees : dict or None
        ``{"position": tol, "velocity": tol}``: the constraint levels held at every node,
        solved to ``tol``; the driver checks them after every step. ``None``: not declared;
        ``{}``: none by design (the driver then skips its checks of a State ``q0``).
    negative_steps : bool
        Whether ``step`` accepts ``h < 0`` (default True).
    supports_forces : bool
        Whether the method takes external forces and controls (then ``_step_impl`` and
        ``_initial_state_impl`` accept the keyword ``u=``); default False.
    """

    __slots__ = ("_backend",)

    name: ClassVar[str] = "Method"
    #: Whether the method has a compiled (numba) path for some configurations (issue 17):
    #: it then implements ``_compiled_plan(system, iface) -> (why_not, plan or None)``.
    compiled_backend: ClassVar[bool] = False
    order: ClassVar[int | None] = None
    symmetric: ClassVar[bool] = False
    guarantees: ClassVar[Mapping[str, float] | None] = None
    negative_steps: ClassVar[bool] = True
    supports_forces: ClassVar[bool] = False

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickle (and copy) with the ``backend`` choice (attrs' slotted state holds only the
        fields)."""
        rv = super().__reduce_ex__(protocol)
        backend = getattr(self, "_backend", "auto")
        if backend == "auto" or not isinstance(rv, tuple) or len(rv) < 2:
            return rv
        return (_with_backend, (rv[0], tuple(rv[1]), backend), *rv[2:])

    @property
    def backend(self) -> str:
        """The ``backend`` keyword of the constructor: ``"numpy"``, ``"numba"`` or ``"auto"``
        (default; compiled when numba is installed, the system has kernels and the method a
        compiled path, see :mod:`~chetaev.discrete_lagrangian.core._backend`)."""
        return getattr(self, "_backend", "auto")

    def evolve(self, **changes: Any) -> Method:
        """A copy of this method with the attrs fields ``changes`` replaced and the same
        :attr:`backend` (``attrs.evolve`` alone calls the constructor without ``backend=``,
        which resets the copy's backend to ``"auto"``).

        Parameters
        ----------
        **changes
            New values of the method's fields, e.g. ``newton=NewtonOptions(tol=1e-14)``.

        Returns
        -------
        Method
            The new method, of the same class.
        """
        new = attrs.evolve(self, **changes)
        object.__setattr__(new, "_backend", self.backend)
        return new

    # -- the public protocol -------------------------------------------------------------------
    def initial_state(self, system: Any, q0: Any, v0: Any, t0: float = 0.0, *,
                      u: Any = None, **options: Any) -> State:
        """Check and complete the initial data: the State at node 0 (``n = 0``, ``t = t0``).

        Parameters
        ----------
        system : system
            The system to integrate.
        q0, v0 : array_like
            Initial configuration (or group element) and velocity; leading batch axes allowed.
        t0 : float
            Initial time (finite).
        u : array_like, optional
            The control at t0 (``(..., n_controls)``), for a method that supports forces
            (e.g. the consistent multiplier of a forced constrained system).
        **options
            Method-specific keywords (e.g. ``lam0=`` of the nonholonomic PRKs).

        Raises
        ------
        InputError
            Bad initial data (the method's own checks) or a non-finite ``t0``.
        ForcesNotSupportedError
            A forced system (or ``u``) given to a method with ``supports_forces = False``.
        """
        if type(t0) is not float or not -_INF < t0 < _INF:
            t0 = _check_t0(t0)
        if u is not None or _forced(system):
            if not self.supports_forces:
                raise _unsupported(self, system, u)
            if u is not None:
                u = check_control(system, q0, u)
                return self._initial_state_impl(system, q0, v0, t0, u=u, **options)
        return self._initial_state_impl(system, q0, v0, t0, **options)

    def step(self, system: Any, state: State, h: float, *, u: Any = None) -> State:
        """One step from ``state``: the State at ``t + h`` with ``n + 1`` (module docstring).

        Parameters
        ----------
        system, state, h
            The system, the current State and the step size.
        u : array_like, optional
            The control ``(..., n_controls)`` held constant over the step (a forced system
            with ``n_controls > 0`` needs it; methods with ``supports_forces`` only).

        Raises
        ------
        InputError
            ``h`` not finite and nonzero (or negative for a method with
            ``negative_steps = False``); a bad control ``u``.
        ForcesNotSupportedError
            A forced system (or ``u``) given to a method with ``supports_forces = False``.
        BackendError
            ``backend="numba"`` where the step has no compiled path (a forced system, or
            one without kernels).
        ConvergenceError
            The step's equations could not be solved (names step, time and residual).
        """
        h = check_step_size(h, self.negative_steps)
        if u is None and not _forced(system):
            new = self._step_impl(system, state, h)
        elif not self.supports_forces:
            raise _unsupported(self, system, u)
        elif getattr(self, "backend", "auto") == "numba":  # as integrate: never numpy quietly
            from ._backend import BackendError

            raise BackendError(
                f"backend='numba': {self.name} has no compiled path for a forced system "
                "(external forces run on numpy for now). Use backend='numpy' or 'auto'."
            )
        else:
            new = self._step_impl(system, state, h, u=check_control(system, state.q, u))
        n = state.n + 1
        g = state.grid
        t = g[0] + (n - g[1]) * h if g is not None and g[2] == h else state.t + h
        if new is state:
            return attrs.evolve(state, t=t, n=n)
        setattr_ = object.__setattr__  # the fresh State of the method: set in place, no copy
        if new.t != t:
            setattr_(new, "t", t)
        if new.n != n:
            setattr_(new, "n", n)
        if new.grid is not g:
            setattr_(new, "grid", g)
        return new

    def step_linearization(self, system: Any, state: State, h: float,
                           u: Any = None) -> StepLinearization:
        """One step from ``state`` and its exact linearization (issue 20).

        The Jacobians of the step map (q_k, p_k, u) ↦ (q_{k+1}, p_{k+1}) at ``state``, from
        the converged Newton matrix of the step by the implicit function theorem (no finite
        differences; :mod:`~chetaev.discrete_lagrangian.core._linearization`), batched over
        the leading axes of the state. The step is taken on the numpy path whatever the
        method's ``backend`` (the compiled step keeps no Newton matrix).

        Parameters
        ----------
        system, state, h, u
            As for :meth:`step` (``u``: the control held over the step).

        Returns
        -------
        StepLinearization
            ``state`` (the next State), ``A = ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k)``
            ``(..., 2n, 2n)`` and ``B = ∂(q_{k+1}, p_{k+1})/∂u`` ``(..., 2n, n_controls)``
            in the coordinates (q, p) (on a group: the tangent coordinates (ξ, μ) of the
            method's retraction); for a constrained system also tangent bases of the
            constraint manifold and (A, B) in them.

        Raises
        ------
        LinearizationNotSupportedError
            The method does not implement step linearizations.
        InputError, ForcesNotSupportedError, ConvergenceError
            As :meth:`step`.
        """
        if type(self)._step_linearization_impl is Method._step_linearization_impl:
            raise LinearizationNotSupportedError(
                f"{self.name} does not implement step_linearization (its class defines no "
                "_step_linearization_impl); every integrator of chetaev does, e.g. VPRK, "
                "ConstrainedPRK, NonholonomicPRK, LieVPRK, GNI, Rattle or DSOCSIntegrator."
            )
        h = check_step_size(h, self.negative_steps)
        from ._backend import numpy_only

        with numpy_only():  # the linearization reads the numpy step's converged unknowns
            new = self.step(system, state, h, u=u)
        if u is not None or _forced(system):
            u = check_control(system, state.q, u)
        return self._step_linearization_impl(system, state, h, u, new)

    def _step_linearization_impl(self, system: Any, state: State, h: float, u: Any,
                                 new: State) -> StepLinearization:
        """The method's linearization of the step ``state`` → ``new`` (default: none)."""
        raise LinearizationNotSupportedError(f"{self.name} does not implement step_linearization.")

    def check_step(self, system: Any, previous: State, state: State,
                   h: float) -> Warning | None:
        """Post-step hook the driver calls after every converged step (default: nothing).

        Raise ``ConvergenceError`` to fail the step, or return a :class:`Warning` instance
        (a diagnostic that does not invalidate it)."""
        return None

    # -- the method's own part -----------------------------------------------------------------
    @abc.abstractmethod
    def _initial_state_impl(self, system: Any, q0: Any, v0: Any, t0: float,
                            **options: Any) -> State:
        """The method's initial-data checks and completion (class docstring)."""

    @abc.abstractmethod
    def _step_impl(self, system: Any, state: State, h: float) -> State:
        """The method's step with the checked ``h`` (class docstring)."""
