"""Input checks shared by the public entry points of ``chetaev.nh_integrators``: every bad
value raises :class:`InputError` (a ``ValueError``) naming the argument and the fix."""

from __future__ import annotations

from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import InputError
from chetaev.discrete_lagrangian.validation import as_float

__all__ = ["check_state", "real_array", "real_int", "real_scalar"]


def real_array(x: Any, name: str) -> np.ndarray:
    """``x`` as a finite float64 array; complex, object, string or None data is refused."""
    arr = np.asarray(x) if x is not None and not isinstance(x, str) else None
    if arr is None or arr.dtype.kind not in "biuf":
        what = (
            "None" if x is None else (f"dtype {arr.dtype}" if arr is not None else type(x).__name__)
        )
        raise InputError(
            f"`{name}` must be an array of real numbers, got {what}. Pass real (float) data; "
            "take the real part explicitly if that is what you mean."
        )
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise InputError(
            f"`{name}` must be finite, but it holds NaN or inf. Check how it was computed."
        )
    return arr


def real_scalar(x: Any, name: str, positive: bool = False, nonzero: bool = False) -> float:
    """``x`` as a finite real float (``positive``: > 0; ``nonzero``: != 0). Only numbers are
    accepted (bools and strings are refused); the value checks are
    :func:`chetaev.discrete_lagrangian.validation.as_float`."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise InputError(f"`{name}` must be a real number, got {type(x).__name__} ({x!r}).")
    return as_float(x, name, positive=positive, nonzero=nonzero)


def real_int(x: Any, name: str, minimum: int) -> int:
    """``x`` as an int >= ``minimum`` (floats such as 2.5 are refused, not truncated)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise InputError(f"`{name}` must be an integer >= {minimum}, got {x!r}.")
    if x < minimum:
        raise InputError(f"`{name}` must be an integer >= {minimum}, got {x}.")
    return int(x)


def check_state(state: Any, q_tail: tuple[int, ...], d: int, m: int) -> None:
    """A step's input ``state``: q of shape (..., *q_tail), v (and p) (..., d), lam (..., m),
    one batch, finite. Cheap (shape compares and three ``isfinite``); a bad state would
    otherwise surface as a numpy broadcast error or a NaN residual deep in Newton."""
    q, v, lam = (getattr(state, k, None) for k in ("q", "v", "lam"))
    if q is None or v is None or not hasattr(state, "carry"):
        raise InputError(
            f"`state` must be a chetaev.discrete_lagrangian.State (from method.initial_state or "
            f"a previous step), got {type(state).__name__}."
        )
    q, v = np.asarray(q), np.asarray(v)
    k = len(q_tail)
    batch = q.shape[: q.ndim - k]
    bad = q.shape[q.ndim - k :] != q_tail or v.shape != (*batch, d)
    if lam is not None:
        lam = np.asarray(lam)
        bad = bad or lam.shape != (*batch, m)
    p = getattr(state, "p", None)
    if p is not None:
        bad = bad or np.shape(p) != (*batch, d)
    if bad:
        raise InputError(
            f"`state` does not fit this system: q {q.shape} (expected (..., "
            f"{', '.join(map(str, q_tail))})), v {v.shape} and p {np.shape(p)} (expected "
            f"{(*batch, d)}), lam {None if lam is None else lam.shape} (expected "
            f"{(*batch, m)}). Start from method.initial_state(system, q0, v0) for this system."
        )
    if not (
        np.isfinite(q).all() and np.isfinite(v).all() and (lam is None or np.isfinite(lam).all())
    ):
        raise InputError("`state` holds NaN or inf; continue only from a finite state.")
