"""Small input checks that return the cleaned value (STYLE.md §6)."""

from __future__ import annotations

import numpy as np

from ._errors import DSOCSInputError

__all__ = ["as_points", "as_step", "as_time", "fd_jacobian", "step_points"]


def as_points(x, name: str, n: int | None = None) -> np.ndarray:
    """Return ``x`` as a finite float64 array of shape ``(..., n)``.

    Raises
    ------
    DSOCSInputError
        If ``x`` is not numeric, not finite, or its last axis is not ``n``.
    """
    if np.iscomplexobj(x):
        raise DSOCSInputError(f"{name} must be real; got a complex array (pass its real part).")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DSOCSInputError(f"{name} must be a numeric array; got {type(x).__name__}.") from exc
    if arr.ndim == 0:
        raise DSOCSInputError(
            f"{name} must have shape (..., n) with n the configuration dimension; got a scalar."
        )
    if n is not None and arr.shape[-1] != n:
        raise DSOCSInputError(
            f"{name} must have shape (..., {n}) (configuration dimension {n}); "
            f"got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)):
        raise DSOCSInputError(f"{name} contains NaN or inf; pass finite values.")
    return arr


def as_step(h, name: str = "h", allow_negative: bool = True) -> float:
    """Return the time step as a float; zero, NaN and inf are rejected."""
    if isinstance(h, (bool, np.bool_, str, bytes)) or np.iscomplexobj(h):
        raise DSOCSInputError(f"{name} must be a real number; got {h!r}.")
    try:
        val = float(h)
    except (TypeError, ValueError) as exc:
        raise DSOCSInputError(f"{name} must be a real number; got {h!r}.") from exc
    if not np.isfinite(val) or val == 0.0 or (not allow_negative and val < 0.0):
        sign = "nonzero" if allow_negative else "positive"
        raise DSOCSInputError(f"{name} must be a finite {sign} number; got {h!r}.")
    return val


def as_time(t, name: str = "t0") -> float:
    """A finite real time."""
    if isinstance(t, (bool, np.bool_, str, bytes)) or np.iscomplexobj(t):
        raise DSOCSInputError(f"{name} must be a real number; got {t!r}.")
    try:
        val = float(t)
    except (TypeError, ValueError) as exc:
        raise DSOCSInputError(f"{name} must be a real number; got {t!r}.") from exc
    if not np.isfinite(val):
        raise DSOCSInputError(f"{name} must be finite; got {t!r}.")
    return val


def step_points(h, *points, names=("q0", "q1", "q2"), n: int | None = None):
    """Validate a step's nodes and step size: ``(h, q0, q1, ...)`` cleaned.

    Each node must be a finite ``(..., n)`` array (``n`` from the first one when not given)
    and the nodes must broadcast together; ``h`` must be finite and nonzero.

    Raises
    ------
    DSOCSInputError
        With the offending name, shape or value in the message.
    """
    h = as_step(h)
    out = []
    for x, name in zip(points, names):
        arr = as_points(x, name, n)
        n = arr.shape[-1]
        out.append(arr)
    try:
        np.broadcast_shapes(*(a.shape for a in out))
    except ValueError as exc:
        shapes = ", ".join(f"{nm}: {a.shape}" for nm, a in zip(names, out))
        raise DSOCSInputError(
            f"the batch shapes of the nodes do not broadcast ({shapes}); pass nodes with the "
            "same leading batch axes."
        ) from exc
    return (h, *out)


def fd_jacobian(fun, x: np.ndarray, rel_eps: float = 1e-6) -> np.ndarray:
    """Central finite-difference Jacobian of a batched map, in one broadcast call.

    Parameters
    ----------
    fun : callable
        Maps ``(..., n)`` to ``(..., m)`` and broadcasts over leading axes.
    x : ndarray, shape (..., n)
    rel_eps : float
        Step relative to ``1 + |x_j|``.

    Returns
    -------
    ndarray, shape (..., m, n)
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    eps = rel_eps * (1.0 + np.abs(x))  # (..., n)
    pert = np.eye(n) * eps[..., None, :]  # (..., n, n): row j perturbs coordinate j
    xp = x[..., None, :] + pert
    xm = x[..., None, :] - pert
    fp = np.asarray(fun(xp))
    fm = np.asarray(fun(xm))  # (..., n, m)
    d = (fp - fm) / (2.0 * eps[..., :, None])
    return np.swapaxes(d, -1, -2)
