"""Small input checks that return the cleaned value (float64 arrays).

Every check raises :class:`~chetaev.liegroups.LieGroupError` with a message of the form
``"<where>: expected <what>, got <what came>. <how to fix>"``.

Input policy (README, "Input policy"): shapes and dtypes are checked on every call (cheap: a
conversion and a tuple comparison); values -- finiteness, membership of group elements,
points on S^2, tangency -- are checked unless the caller passes ``check=False``.  Membership
tolerances scale with the rounding unit of the input's dtype and the matrix size
(:func:`membership_tol`).
"""

from __future__ import annotations

import math

import numpy as np

from ._errors import LieGroupError

__all__ = [
    "as_array", "broadcast_batch", "check_finite", "input_eps", "membership_tol", "predicate_array",
]

_EPS64 = float(np.finfo(np.float64).eps)


def _shape_str(shape: tuple[int, ...]) -> str:
    inner = ", ".join(str(s) for s in shape)
    return f"(..., {inner})" if shape else "(...)"


def check_finite(x: np.ndarray, name: str, where: str) -> np.ndarray:
    """Raise if ``x`` holds NaN or inf; return ``x``."""
    if not np.isfinite(x).all():
        n_bad = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
        raise LieGroupError(
            f"{where}: `{name}` contains {n_bad} NaN or inf entr{'y' if n_bad == 1 else 'ies'}; "
            "expected finite float values. Check the computation that produced it."
        )
    return x


def input_eps(x) -> float:
    """Rounding unit of the input's dtype (float16/32/64/longdouble); float64's for exact
    (integer) inputs and anything else."""
    dt = getattr(x, "dtype", None)
    if dt is not None and dt.kind == "f":
        return max(float(np.finfo(dt).eps), _EPS64)
    return _EPS64


def membership_tol(eps: float, n: int) -> float:
    """Default tolerance of the membership tests: ``n * sqrt(eps)``.

    ``eps`` is the rounding unit of the input's dtype and ``n`` the matrix size.  An element that
    went through k products in that precision is off the group by about ``k n eps``; the
    default accepts the drift of ~1/sqrt(eps) (~7e7 in float64) products and rejects any
    matrix that is off the group by more than ~1e-8 relative in float64 (3e-4 in float32)."""
    return n * math.sqrt(eps)


def _bad_dtype(where: str, name: str, trailing, what: str) -> LieGroupError:
    return LieGroupError(
        f"{where}: `{name}` must be a real array (float or integer dtype) of shape "
        f"{_shape_str(trailing)}; got {what}. Pass a float64 array (for complex data, "
        "split real and imaginary parts yourself)."
    )


def as_array(x, trailing: tuple[int, ...], name: str, where: str,
             check: bool = True) -> np.ndarray:
    """Convert ``x`` to a float64 array whose trailing axes are ``trailing``.

    Parameters
    ----------
    x : array_like
        Input, shape ``(*batch, *trailing)``; real dtype (float or integer).  Complex, boolean,
        string and object data that is not real numbers are refused.
    trailing : tuple of int
        Required trailing shape, e.g. ``(3,)`` for an so(3) vector or ``(3, 3)`` for a rotation.
    name, where : str
        Argument name and calling function, used in the error message.
    check : bool
        Also refuse NaN/inf entries (default).  Shape and dtype are always checked.
    """
    if type(x) is np.ndarray and x.dtype == np.float64:  # fast path of the common case
        arr = x
    else:
        kind = getattr(getattr(x, "dtype", None), "kind", None)
        if kind is None:
            kind = np.asarray(x).dtype.kind if not isinstance(x, (str, bytes)) else "U"
        if kind in "cbUSVMm":
            what = {"c": "complex", "b": "boolean", "M": "datetime", "m": "timedelta"}.get(
                kind, "non-numeric")
            raise _bad_dtype(where, name, trailing, f"{what} data")
        try:
            with np.errstate(all="ignore"):
                arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise _bad_dtype(where, name, trailing,
                             f"data that cannot be converted to float64 ({exc})") from None
    k = len(trailing)
    if arr.ndim < k or arr.shape[arr.ndim - k :] != tuple(trailing):
        raise LieGroupError(
            f"{where}: expected `{name}` with shape {_shape_str(trailing)} "
            f"(any leading batch axes), got shape {arr.shape}."
        )
    return check_finite(arr, name, where) if check else arr


def broadcast_batch(where: str, **items: tuple[np.ndarray, int]) -> tuple[int, ...]:
    """Common batch shape of arrays given as ``name=(array, n_trailing_axes)``; raises a
    :class:`LieGroupError` naming the arguments when their leading batch axes do not
    broadcast."""
    shapes = {nm: a.shape[: a.ndim - k] for nm, (a, k) in items.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        desc = ", ".join(f"`{nm}` batch {s}" for nm, s in shapes.items())
        raise LieGroupError(
            f"{where}: the leading batch axes of the arguments do not broadcast ({desc}). "
            "Give them equal batch shapes, or shapes that broadcast (e.g. add axes of size 1)."
        ) from None


def predicate_array(x) -> np.ndarray | None:
    """``x`` as float64 for a membership predicate, or ``None`` when it is not real numeric
    data (the predicate then answers False)."""
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind is None:
        try:
            kind = np.asarray(x).dtype.kind
        except (TypeError, ValueError):
            return None
    if kind not in "fiuO":
        return None
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        return None
