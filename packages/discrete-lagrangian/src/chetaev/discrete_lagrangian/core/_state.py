"""The state passed between steps (DESIGN.md "The shared protocol")."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError

__all__ = ["State"]


_INF = float("inf")


def _as_time(t: Any) -> float:
    if type(t) is float and -_INF < t < _INF:  # the hot path: methods pass Python floats
        return t
    if isinstance(t, (bool, np.bool_, str, bytes)) or np.iscomplexobj(t):
        raise InputError(f"State(t=...) must be a real number, got {t!r}.")
    try:
        val = float(t)
    except (TypeError, ValueError):
        raise InputError(f"State(t=...) must be a real number, got {t!r}.") from None
    if not -_INF < val < _INF:
        raise InputError(f"State(t=...) must be finite, got {t!r}.")
    return val


def _as_count(n: Any) -> int:
    if type(n) is int:
        return n
    if isinstance(n, (bool, np.bool_, str, bytes)):
        raise InputError(f"State(n=...) must be an integer step counter, got {n!r}.")
    try:
        val = float(n)
    except (TypeError, ValueError):
        raise InputError(f"State(n=...) must be an integer step counter, got {n!r}.") from None
    if not val.is_integer():
        raise InputError(f"State(n=...) must be an integer step counter, got {n!r}.")
    return int(val)


def _as_grid(g: Any) -> tuple[float, int, float] | None:
    if g is None:
        return None
    t_ref, n_ref, h = g
    return (float(t_ref), int(n_ref), float(h))


@attrs.frozen(eq=False)
class State:
    """One point of a discrete trajectory.

    Attributes
    ----------
    t : float
        Time.
    q : ndarray
        Configuration ``(..., n)``, or a group element ``(..., k, k)``.
    v : ndarray
        Velocity ``(..., n)`` (trivialized velocity η on a group).
    p : ndarray or None
        Momentum ``(..., n)`` (trivialized momentum μ on a group), when the method has one.
    lam : ndarray or None
        Multiplier ``(..., m)`` assigned to this node, in the sign convention
        d/dt ∂L/∂v − ∂L/∂q = (∂Φ/∂v)ᵀλ. What it is depends on the method family (both
        conventions are pinned by ``tests/test_structure.py::test_lam_conventions``):

        * PRK methods (:class:`ConstrainedPRK`, ``LieVPRK`` with a constraint, the
          nonholonomic PRKs): the raw stage multiplier Λ^s of the step that ended at this
          node — an approximation of λ(t_k) of order s − 1 only (measured 2.0 and 3.0 for
          s = 3, 4; order 1 for s = 2), not of the method's order 2s − 2;
        * discretization-map methods (``chetaev.discrete_lagrangian.discretization_maps``):
          the consistent continuous λ(q_k, v_k) of ``ConstrainedSystem.multiplier``
          evaluated at the discrete node (their discrete multipliers carry arbitrary
          factors of h and are kept in ``info["lam_left"]``, ``info["lam_right"]``).

        In both, the initial state holds the consistent λ₀ = λ(q₀, v₀). For a λ comparable
        across methods use ``system.multiplier(traj.q, traj.v)``.
    n : int
        Step counter (0 for the initial state).
    carry : dict
        Method-private data carried between steps (warm-start guesses, previous point...).
        Saved with a :class:`Trajectory`, so a restart is bit-for-bit identical.
    info : dict
        Per-step diagnostics, e.g. ``{"newton_iterations": 3, "residual": 1e-15}``.
    grid : tuple (t_ref, n_ref, h) or None
        The time grid this state lies on, t = t_ref + (n − n_ref)·h, set by
        :func:`~chetaev.discrete_lagrangian.integrate` on the state a run starts from and
        passed on by :meth:`Method.step <chetaev.discrete_lagrangian.Method.step>`, which
        sets the time of a step of that h from it (exact times after any number of steps);
        kept on the final state so that a continued run with the same h stays on the same
        grid. None for states made by hand or by ``initial_state``.

    Derive modified copies with :func:`attrs.evolve`.
    """

    t: float = attrs.field(converter=_as_time)
    q: np.ndarray = attrs.field()
    v: np.ndarray = attrs.field()
    p: np.ndarray | None = None
    lam: np.ndarray | None = None
    n: int = attrs.field(default=0, converter=_as_count)
    carry: dict[str, Any] = attrs.field(factory=dict)
    info: dict[str, Any] = attrs.field(factory=dict)
    grid: tuple[float, int, float] | None = attrs.field(default=None, converter=_as_grid)
