"""Small input checks that return the cleaned value (raise :class:`TableauError` otherwise)."""

from __future__ import annotations

import numbers

import numpy as np

from ._errors import TableauError

__all__ = ["as_matrix", "as_stage_count", "as_tolerance", "as_vector", "readonly"]


def readonly(x: np.ndarray) -> np.ndarray:
    """Return ``x`` with its write flag cleared (the caller owns the copy)."""
    x.setflags(write=False)
    return x


def _as_float_array(value, name: str) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise TableauError(
            f"{name} must be an array of real numbers; got {type(value).__name__} ({exc})."
        ) from None
    if not np.all(np.isfinite(arr)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        where = ", ".join(str(i) for i in bad)
        raise TableauError(
            f"{name} must contain finite values only; {name}[{where}] = {arr[bad]}. "
            "Check the coefficients for a division by zero."
        )
    return arr


def as_matrix(value, name: str = "a") -> np.ndarray:
    """Square float64 matrix, read-only."""
    arr = _as_float_array(value, name)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise TableauError(
            f"{name} must be a square (s, s) matrix with s >= 1; got shape {arr.shape}."
        )
    return readonly(arr)


def as_vector(value, name: str, s: int) -> np.ndarray:
    """Float64 vector of length ``s``, read-only."""
    arr = _as_float_array(value, name)
    if arr.ndim != 1 or arr.shape[0] != s:
        raise TableauError(
            f"{name} must be a vector of length s = {s} (the size of a); got shape {arr.shape}."
        )
    return readonly(arr)


def as_stage_count(s, family: str, minimum: int = 1) -> int:
    """Integer number of stages ``s >= minimum``."""
    if isinstance(s, bool) or not isinstance(s, numbers.Integral):
        raise TableauError(f"{family}: the number of stages s must be an integer; got {s!r}.")
    s = int(s)
    if s < minimum:
        raise TableauError(
            f"{family} needs s >= {minimum} stages; got s = {s}. Use s = {minimum} or more."
        )
    return s


def as_tolerance(tol, name: str = "tol") -> float:
    """Positive finite float."""
    try:
        t = float(tol)
    except (TypeError, ValueError):
        raise TableauError(f"{name} must be a positive number; got {tol!r}.") from None
    if not (np.isfinite(t) and t > 0):
        raise TableauError(f"{name} must be a positive finite number; got {tol!r}.")
    return t


def as_nonnegative_int(k, name: str) -> int:
    """Integer ``k >= 0`` (orders of simplifying assumptions, tree orders)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise TableauError(f"{name} must be a non-negative integer; got {k!r}.")
    return int(k)
