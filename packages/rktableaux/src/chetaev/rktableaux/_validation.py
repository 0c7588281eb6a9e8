"""Small input checks that return the cleaned value (raise :class:`TableauError` otherwise)."""

from __future__ import annotations

import numbers

import numpy as np

from ._errors import TableauError

__all__ = [
    "MAX_ASSUMPTION_ORDER",
    "MAX_STAGES",
    "as_matrix",
    "as_nonnegative_int",
    "as_stage_count",
    "as_tolerance",
    "as_vector",
    "readonly",
]

#: Largest number of stages the families (``gauss(s)``, ``lobatto_iiia(s)``, ...) build.  Two
#: reasons: (i) float64: a method of order 2s has an error constant below 1e-30 for s = 16
#: (Gauss: (s!)^4 / ((2s+1) ((2s)!)^3) ~ 1e-41), far under the rounding of any float64
#: computation, so more stages cannot improve a float64 result; the nodes also cluster at the
#: ends of [0, 1] (spacing ~ 1/s^2) and the rounded coefficients meet the order conditions only
#: to ~s^2 eps; (ii) cost: the coefficients are solved in mpmath at 60 + 2s digits and the time
#: grows like s^4 (measured on the development machine: s = 16: 1.7 s, 20: 7 s, 40: 41 s,
#: 400: hours).  Build larger tableaux yourself (``Tableau(a, b, c)``) if you need them.
MAX_STAGES = 16

#: Largest order p, q, r accepted by ``B_residual``/``C_residual``/``D_residual`` and the
#: predicates: B(p) holds at most for p = 2s (<= 2 MAX_STAGES = 32 for the families), and
#: the residual array has p rows (memory and time grow linearly in p).
MAX_ASSUMPTION_ORDER = 256


def readonly(x: np.ndarray) -> np.ndarray:
    """Return ``x`` with its write flag cleared (the caller owns the copy)."""
    x.setflags(write=False)
    return x


def _as_float_array(value, name: str) -> np.ndarray:
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind is None and not isinstance(value, (str, bytes)):
        try:
            kind = np.asarray(value).dtype.kind
        except (TypeError, ValueError):
            kind = "O"
    if kind in ("c", "b", "U", "S", "M", "m") or isinstance(value, (str, bytes)):
        what = {"c": "complex", "b": "boolean"}.get(kind, "non-numeric")
        raise TableauError(
            f"{name} must be an array of real numbers (float or integer); got {what} data. "
            "Runge-Kutta coefficients are real: pass the real coefficients as floats."
        )
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


def as_stage_count(s, family: str, minimum: int = 1, maximum: int | None = MAX_STAGES) -> int:
    """Integer number of stages ``minimum <= s <= maximum`` (:data:`MAX_STAGES`)."""
    if isinstance(s, bool) or not isinstance(s, numbers.Integral):
        raise TableauError(f"{family}: the number of stages s must be an integer; got {s!r}.")
    s = int(s)
    if s < minimum:
        raise TableauError(
            f"{family} needs s >= {minimum} stages; got s = {s}. Use s = {minimum} or more."
        )
    if maximum is not None and s > maximum:
        raise TableauError(
            f"{family}: s = {s} stages exceeds the limit s <= {maximum} (MAX_STAGES): beyond it "
            "the order-2s accuracy is far below float64 rounding and the high-precision "
            "construction takes minutes to hours. Use s <= "
            f"{maximum}, or build the tableau yourself with Tableau(a, b, c)."
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


def as_nonnegative_int(k, name: str, maximum: int | None = None, why: str = "") -> int:
    """Integer ``0 <= k <= maximum`` (orders of simplifying assumptions, tree orders)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise TableauError(f"{name} must be a non-negative integer; got {k!r}.")
    if maximum is not None and k > maximum:
        raise TableauError(
            f"{name} = {k} exceeds the limit {maximum}{why}. Use {name} <= {maximum}."
        )
    return int(k)


def as_digits(digits, name: str = "digits") -> int | None:
    """``None`` or an integer number of significant digits in 1..17."""
    if digits is None:
        return None
    if (isinstance(digits, bool) or not isinstance(digits, numbers.Integral)
            or not 1 <= digits <= 17):
        raise TableauError(
            f"{name} must be None (shortest round-trip form) or an integer in 1..17; "
            f"got {digits!r}."
        )
    return int(digits)


def as_nonnegative_float(x, name: str) -> float:
    """Finite float ``>= 0``."""
    try:
        t = float(x)
    except (TypeError, ValueError):
        raise TableauError(f"{name} must be a non-negative number; got {x!r}.") from None
    if not (np.isfinite(t) and t >= 0):
        raise TableauError(f"{name} must be a finite number >= 0; got {x!r}.")
    return t
