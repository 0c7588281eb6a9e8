"""Small helpers shared by the nonholonomic and homogeneous-space model modules."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.integrate import solve_ivp

__all__ = ["dop853", "row"]


def row(*entries: np.ndarray) -> np.ndarray:
    """Stack arrays of equal shape into a ``(..., 1, n)`` constraint matrix."""
    return np.stack(entries, axis=-1)[..., None, :]


def dop853(rhs: Callable[[float, np.ndarray], np.ndarray], z0: np.ndarray, t: np.ndarray,
           rtol: float = 1e-13, atol: float = 1e-13) -> np.ndarray:
    """Solve ``z' = rhs(t, z)`` with scipy DOP853; returns ``z`` at the times ``t``, ``(T, n)``.

    Raises
    ------
    ValueError
        If ``t`` is not increasing or the solver fails.
    """
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size < 1 or np.any(np.diff(t) <= 0):
        raise ValueError(f"`t` must be a 1-d increasing array of output times, got {t!r}.")
    z0 = np.asarray(z0, dtype=float)
    if t.size == 1:
        return z0[None, :].copy()
    sol = solve_ivp(rhs, (t[0], t[-1]), z0, method="DOP853", rtol=rtol, atol=atol, t_eval=t)
    if not sol.success:
        raise ValueError(f"the reference ODE solver failed: {sol.message}")
    return sol.y.T
