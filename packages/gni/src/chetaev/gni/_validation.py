"""Input checks that return the cleaned value and raise messages that say what to do."""

from __future__ import annotations

import numpy as np

from ._errors import ConstraintViolationError, InputError


def as_points(x, *, name: str, n: int) -> np.ndarray:
    """``x`` as a float64 array ``(..., n)`` with finite entries."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{name} must be an array of floats of shape (..., {n}); got {x!r}"
        ) from exc
    if arr.ndim == 0 or arr.shape[-1] != n:
        raise InputError(
            f"{name} must have shape (..., {n}) (last axis = system dimension {n}); "
            f"got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or inf; pass finite values")
    return arr


def as_step(h) -> float:
    """A finite, non-zero step size (negative steps run the method backwards)."""
    try:
        hf = float(h)
    except (TypeError, ValueError) as exc:
        raise InputError(f"step size h must be a real number; got {h!r}") from exc
    if not np.isfinite(hf) or hf == 0.0:
        raise InputError(f"step size h must be finite and non-zero; got {h!r}")
    return hf


def check_on_constraint(residual: np.ndarray, *, tol: float, what: str, fix: str) -> None:
    """Raise ConstraintViolationError when ``max|residual| > tol``."""
    r = float(np.max(np.abs(residual))) if np.size(residual) else 0.0
    if not r <= tol:
        raise ConstraintViolationError(
            f"{what} violates the velocity constraint: max|Φ| = {r:.3e} > tol = {tol:.1e}. {fix}"
        )
