"""Finite-difference derivatives formed in ONE broadcast call (DESIGN.md, performance).

The perturbations are stacked on a new *leading* axis, so any callable that broadcasts
over leading batch axes evaluates all of them at once. Steps are per entry
(``eps**(1/3) * max(1, |x_k|)`` for central differences) so a batched evaluation gives
the same numbers as a single one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["fd_jacobian", "group_perturb", "vector_perturb"]

_CBRT_EPS = float(np.finfo(np.float64).eps ** (1.0 / 3.0))


def vector_perturb(x: np.ndarray, dx: np.ndarray) -> np.ndarray:
    """Perturbation on a vector space: ``x + dx``."""
    return x + dx


def group_perturb(group) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Perturbation on a matrix group: ``g · exp(dξ)`` (left-trivialized derivatives)."""

    def perturb(g: np.ndarray, dxi: np.ndarray) -> np.ndarray:
        return group.compose(g, group.exp(dxi), check=False)

    return perturb


def fd_jacobian(
    f: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    n: int,
    perturb: Callable[[np.ndarray, np.ndarray], np.ndarray] = vector_perturb,
    batch_shape: tuple[int, ...] | None = None,
    out_ndim: int = 1,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """Central-difference Jacobian of ``f`` at ``x``, all 2n evaluations in one call.

    Parameters
    ----------
    f : callable
        Maps ``x`` (with extra leading axes) to an array whose last ``out_ndim`` axes are
        the output.
    x : ndarray
        The point: ``(..., n)`` on a vector space or a group element ``(..., k, k)``.
    n : int
        Number of coordinates (vector dimension or algebra dimension).
    perturb : callable
        ``perturb(x, dx)`` with ``dx`` of shape ``(2n, ..., n)``.
    batch_shape : tuple, optional
        Leading batch shape of ``x`` (default ``x.shape[:-1]``).
    out_ndim : int
        Number of trailing output axes of ``f``.
    scale : ndarray, optional
        Per-entry magnitude ``(..., n)`` for the step (default 1).

    Returns
    -------
    ndarray
        ``(..., *out, n)`` with ``[..., o, k] = ∂f_o/∂x_k``.
    """
    if batch_shape is None:
        batch_shape = x.shape[:-1]
    if scale is None:
        step = np.full((*batch_shape, n), _CBRT_EPS)
    else:
        step = _CBRT_EPS * np.maximum(1.0, np.abs(np.broadcast_to(scale, (*batch_shape, n))))
    step_k = np.moveaxis(step, -1, 0)  # (n, ...)
    eye = np.eye(n).reshape((n,) + (1,) * len(batch_shape) + (n,))
    dx = step_k[..., None] * eye  # (n, ..., n)
    both = np.concatenate([dx, -dx], axis=0)  # (2n, ..., n)
    fx = np.asarray(f(perturb(x, both)))
    # an output that does not depend on x carries no perturbation axis: broadcast it
    fx = np.broadcast_to(fx, (2 * n, *batch_shape, *fx.shape[fx.ndim - out_ndim:]))
    diff = (fx[:n] - fx[n:]) / (2.0 * step_k.reshape(step_k.shape + (1,) * out_ndim))
    return np.moveaxis(diff, 0, -1)
