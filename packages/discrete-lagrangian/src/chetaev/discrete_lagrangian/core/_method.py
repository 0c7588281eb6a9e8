"""``Method``: the one base class of every integrator (DESIGN.md "The shared protocol").

The shape is scipy's ``OdeSolver`` (``scipy/integrate/_ivp/base.py``): the public
:meth:`Method.initial_state` and :meth:`Method.step` do the bookkeeping once, for every
method of every package, and call the method's own part, :meth:`Method._initial_state_impl`
and :meth:`Method._step_impl`::

    method.initial_state(system, q0, v0, t0=0.0, **options) -> State   # t0 checked once
    method.step(system, state, h) -> State                             # h checked once;
                                                                       # n + 1, t on the grid

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
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from .._util._errors import InputError
from ._state import State

__all__ = ["Method", "check_step_size"]

_INF = float("inf")


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


class Method(abc.ABC):
    """Base class of every integrator: public ``initial_state`` / ``step``, private hooks.

    Subclasses (usually frozen attrs classes holding the method's data) write:

    ``_initial_state_impl(system, q0, v0, t0, **options) -> State``
        check and complete the initial data (momenta, consistent multipliers); ``t0`` is
        already a finite float. Return ``State(t=t0, ..., n=0)``.
    ``_step_impl(system, state, h) -> State``
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
    """

    __slots__ = ()

    name: ClassVar[str] = "Method"
    order: ClassVar[int | None] = None
    symmetric: ClassVar[bool] = False
    guarantees: ClassVar[Mapping[str, float] | None] = None
    negative_steps: ClassVar[bool] = True

    # -- the public protocol -------------------------------------------------------------------
    def initial_state(self, system: Any, q0: Any, v0: Any, t0: float = 0.0,
                      **options: Any) -> State:
        """Check and complete the initial data: the State at node 0 (``n = 0``, ``t = t0``).

        Parameters
        ----------
        system : system
            The system to integrate.
        q0, v0 : array_like
            Initial configuration (or group element) and velocity; leading batch axes allowed.
        t0 : float
            Initial time (finite).
        **options
            Method-specific keywords (e.g. ``lam0=`` of the nonholonomic PRKs).

        Raises
        ------
        InputError
            Bad initial data (the method's own checks) or a non-finite ``t0``.
        """
        if type(t0) is not float or not -_INF < t0 < _INF:
            t0 = _check_t0(t0)
        return self._initial_state_impl(system, q0, v0, t0, **options)

    def step(self, system: Any, state: State, h: float) -> State:
        """One step from ``state``: the State at ``t + h`` with ``n + 1`` (module docstring).

        Raises
        ------
        InputError
            ``h`` not finite and nonzero (or negative for a method with
            ``negative_steps = False``).
        ConvergenceError
            The step's equations could not be solved (names step, time and residual).
        """
        h = check_step_size(h, self.negative_steps)
        new = self._step_impl(system, state, h)
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
