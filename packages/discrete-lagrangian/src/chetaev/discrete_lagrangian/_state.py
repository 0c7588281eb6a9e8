"""The state passed between steps (DESIGN.md "The shared protocol")."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

__all__ = ["State"]


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
        Multiplier ``(..., m)`` assigned to this node.
    n : int
        Step counter (0 for the initial state).
    carry : dict
        Method-private data carried between steps (warm-start guesses, previous point...).
        Saved with a :class:`Trajectory`, so a restart is bit-for-bit identical.
    info : dict
        Per-step diagnostics, e.g. ``{"newton_iterations": 3, "residual": 1e-15}``.

    Derive modified copies with :func:`attrs.evolve`.
    """

    t: float = attrs.field(converter=float)
    q: np.ndarray = attrs.field()
    v: np.ndarray = attrs.field()
    p: np.ndarray | None = None
    lam: np.ndarray | None = None
    n: int = attrs.field(default=0, converter=int)
    carry: dict[str, Any] = attrs.field(factory=dict)
    info: dict[str, Any] = attrs.field(factory=dict)
