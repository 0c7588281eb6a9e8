"""Input checks that return the cleaned value and raise messages that say what to do."""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import NewtonOptions

from ._errors import ConstraintViolationError, InputError


def as_points(x, *, name: str, n: int) -> np.ndarray:
    """``x`` as a float64 array ``(..., n)`` with finite entries."""
    if np.iscomplexobj(x):
        raise InputError(f"{name} must be real; got a complex array (pass its real part)")
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


def check_newton(instance, attribute, value) -> None:
    """attrs validator: ``newton`` must be a NewtonOptions."""
    if not isinstance(value, NewtonOptions):
        raise InputError(
            f"{type(instance).__name__}({attribute.name}=...) must be a NewtonOptions, e.g. "
            f"NewtonOptions(tol=1e-12); got {value!r}"
        )


def check_tol(instance, attribute, value) -> None:
    """attrs validator: a positive, finite, real tolerance."""
    ok = not isinstance(value, (bool, np.bool_, str, bytes)) and not np.iscomplexobj(value)
    try:
        ok = ok and bool(np.isfinite(float(value)) and float(value) > 0)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(
            f"{type(instance).__name__}({attribute.name}=...) must be a positive finite number; "
            f"got {value!r}"
        )


def broadcast_pair(a: np.ndarray, b: np.ndarray, names: tuple[str, str]):
    """Broadcast two ``(..., n)`` arrays over their batch axes (copies), or raise."""
    try:
        batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    except ValueError:
        raise InputError(
            f"the batch shapes of {names[0]} {a.shape[:-1]} and {names[1]} {b.shape[:-1]} do "
            "not broadcast; pass one per initial condition (same leading axes)"
        ) from None
    return (np.broadcast_to(a, (*batch, a.shape[-1])).copy(),
            np.broadcast_to(b, (*batch, b.shape[-1])).copy())


def check_on_constraint(residual: np.ndarray, *, tol: float, what: str, fix: str) -> None:
    """Raise ConstraintViolationError when ``max|residual| > tol``."""
    r = float(np.max(np.abs(residual))) if np.size(residual) else 0.0
    if not r <= tol:
        raise ConstraintViolationError(
            f"{what} violates the velocity constraint: max|Φ| = {r:.3e} > tol = {tol:.1e}. {fix}"
        )
