"""Small input-checking helpers; each returns the cleaned value (scipy ``_ivp/common.py``).

Messages name the argument, what was expected and what came, and say how to fix it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._errors import InputError, SingularMatrixError

__all__ = [
    "as_float",
    "as_group_element",
    "as_int",
    "as_matrix",
    "as_vector",
    "check_finite",
    "check_spd",
    "real_array",
]


def real_array(x: Any, name: str) -> np.ndarray:
    """Convert ``x`` to a float64 array; refuse complex, boolean, string and non-numbers.

    Integers (and object arrays of real numbers) are converted to float64; a complex
    value is refused even when its imaginary part is zero (no silent ``.real``).
    """
    try:
        raw = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise InputError(f"`{name}` must be an array of real numbers, got {exc}.") from None
    kind = raw.dtype.kind
    if kind == "c" or (kind == "O" and any(isinstance(e, complex) for e in raw.flat)):
        raise InputError(
            f"`{name}` must be real, got a complex array (dtype {raw.dtype}). Pass "
            f"np.real({name}) if the imaginary part is meant to be zero."
        )
    if kind in "bUSV" or kind == "M" or kind == "m":
        raise InputError(
            f"`{name}` must be an array of real numbers, got dtype {raw.dtype}."
        )
    try:
        return np.array(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"`{name}` must be an array of real numbers, got {type(x).__name__}: {exc}."
        ) from None


def check_finite(x: np.ndarray, name: str) -> np.ndarray:
    """Raise :class:`InputError` if ``x`` holds NaN or inf; return ``x``."""
    if not np.all(np.isfinite(x)):
        bad = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
        raise InputError(
            f"`{name}` must be finite, but {bad} of its {np.size(x)} entries are NaN or inf. "
            f"Check how `{name}` was computed."
        )
    return x


def as_vector(x: Any, name: str, n: int | None = None, batch: bool = True) -> np.ndarray:
    """Convert ``x`` to a finite float64 array of shape ``(..., n)``.

    Parameters
    ----------
    x : array_like
        The value to convert.
    name : str
        Argument name used in messages.
    n : int, optional
        Required length of the last axis.
    batch : bool
        Whether leading batch axes are allowed.
    """
    arr = real_array(x, name)
    if arr.ndim == 0:
        arr = arr.reshape(1)
        if n is not None and n != 1:
            raise InputError(
                f"`{name}` must have shape (..., {n}), got a scalar. Pass an array of length {n}."
            )
    if n is not None and arr.shape[-1] != n:
        raise InputError(
            f"`{name}` must have shape (..., {n}) (last axis = system dimension {n}), "
            f"got shape {arr.shape}."
        )
    if not batch and arr.ndim != 1:
        raise InputError(f"`{name}` must be one-dimensional, got shape {arr.shape}.")
    return check_finite(arr, name)


def as_group_element(g: Any, group: Any, name: str, tol: float = 1e-9) -> np.ndarray:
    """Convert ``g`` to a float64 array of shape ``(..., *group.shape)`` lying on ``group``."""
    arr = real_array(g, name)
    shape = tuple(group.shape)
    if arr.shape[arr.ndim - len(shape):] != shape or arr.ndim < len(shape):
        raise InputError(
            f"`{name}` must have shape (..., {', '.join(map(str, shape))}) for the group "
            f"{getattr(group, 'name', type(group).__name__)}, got shape {arr.shape}."
        )
    check_finite(arr, name)
    ok = np.asarray(group.is_element(arr, tol=tol))
    if not np.all(ok):
        raise InputError(
            f"`{name}` is not an element of the group "
            f"{getattr(group, 'name', type(group).__name__)} (tolerance {tol:g}). "
            f"Project it onto the group first (e.g. via exp/log)."
        )
    return arr


def as_float(x: Any, name: str, positive: bool = False, nonzero: bool = False) -> float:
    """Convert ``x`` to a finite Python float, optionally requiring ``x > 0`` or ``x != 0``."""
    if np.iscomplexobj(x):
        raise InputError(f"`{name}` must be a real number, got the complex {x!r}.")
    try:
        val = float(x)
    except (TypeError, ValueError):
        raise InputError(f"`{name}` must be a real number, got {x!r}.") from None
    if not np.isfinite(val):
        raise InputError(f"`{name}` must be finite, got {val}.")
    if positive and val <= 0:
        raise InputError(f"`{name}` must be positive, got {val}.")
    if nonzero and val == 0:
        raise InputError(f"`{name}` must be nonzero, got 0.")
    return val


def as_int(x: Any, name: str, minimum: int | None = None) -> int:
    """Convert ``x`` to an int, optionally requiring ``x >= minimum``."""
    if isinstance(x, bool) or not float(x).is_integer():
        raise InputError(f"`{name}` must be an integer, got {x!r}.")
    val = int(x)
    if minimum is not None and val < minimum:
        raise InputError(f"`{name}` must be >= {minimum}, got {val}.")
    return val


def as_matrix(x: Any, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Convert ``x`` to a finite float64 array with the given trailing shape."""
    arr = real_array(x, name)
    if shape is not None and arr.shape[arr.ndim - len(shape):] != tuple(shape):
        raise InputError(f"`{name}` must have shape (..., {shape}), got {arr.shape}.")
    return check_finite(arr, name)


def check_spd(M: np.ndarray, name: str) -> np.ndarray:
    """Check that ``M`` (..., n, n) is symmetric positive definite; return it.

    Raises :class:`SingularMatrixError` when it is singular or not positive definite.
    """
    if M.ndim < 2 or M.shape[-1] != M.shape[-2]:
        raise InputError(f"`{name}` must be a square matrix (..., n, n), got shape {M.shape}.")
    scale = np.max(np.abs(M)) if M.size else 1.0
    if not np.allclose(M, np.swapaxes(M, -1, -2), rtol=1e-12, atol=1e-14 * max(scale, 1.0)):
        raise InputError(f"`{name}` must be symmetric; symmetrize it as (M + M.T) / 2.")
    try:
        np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        ev = np.linalg.eigvalsh(M)
        raise SingularMatrixError(
            f"`{name}` must be symmetric positive definite (an invertible mass/inertia "
            f"matrix), but its smallest eigenvalue is {np.min(ev):.3g}. Check the masses "
            f"and inertias (all must be > 0)."
        ) from None
    return M
