"""Small input checks that return the cleaned value (float64 arrays).

Every check raises :class:`~chetaev.liegroups.LieGroupError` with a message of the form
``"<where>: expected <what>, got <what came>. <how to fix>"``.
"""

from __future__ import annotations

import numpy as np

from ._errors import LieGroupError

__all__ = ["as_array", "check_finite"]


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


def as_array(x, trailing: tuple[int, ...], name: str, where: str) -> np.ndarray:
    """Convert ``x`` to a float64 array whose trailing axes are ``trailing``.

    Parameters
    ----------
    x : array_like
        Input, shape ``(*batch, *trailing)``.
    trailing : tuple of int
        Required trailing shape, e.g. ``(3,)`` for an so(3) vector or ``(3, 3)`` for a rotation.
    name, where : str
        Argument name and calling function, used in the error message.
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise LieGroupError(
            f"{where}: `{name}` must be a real array of shape {_shape_str(trailing)}; "
            f"could not convert it to float64 ({exc})."
        ) from None
    k = len(trailing)
    if arr.ndim < k or arr.shape[arr.ndim - k :] != tuple(trailing):
        raise LieGroupError(
            f"{where}: expected `{name}` with shape {_shape_str(trailing)} "
            f"(any leading batch axes), got shape {arr.shape}."
        )
    return check_finite(arr, name, where)
