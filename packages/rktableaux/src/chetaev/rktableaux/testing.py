"""Small reference integrators and test problems for checking tableaux empirically.

Not a production integrator (see ``chetaev.discrete_lagrangian`` for those): a fixed-step
Runge–Kutta / partitioned Runge–Kutta driver with a full Newton solve of the stage equations,
used by the tests to confirm that the computed order shows up on a nonlinear problem.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import numpy as np

from ._errors import TableauError
from ._partitioned import PartitionedTableau
from ._tableau import Tableau

__all__ = [
    "fit_order",
    "pendulum",
    "pendulum_exact",
    "rk_solve",
]


def pendulum(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pendulum q' = p, p' = −sin q: returns f(y) (..., 2) and its Jacobian (..., 2, 2)."""
    q, p = y[..., 0], y[..., 1]
    f = np.stack([p, -np.sin(q)], axis=-1)
    J = np.zeros((*y.shape[:-1], 2, 2))
    J[..., 0, 1] = 1.0
    J[..., 1, 0] = -np.cos(q)
    return f, J


def pendulum_exact(q0: float, t: float, dps: int = 30) -> np.ndarray:
    """Exact (q, p)(t) of the pendulum from rest at q0 ∈ (0, π): q = 2 arcsin(k cd(t | k²)).

    k = sin(q0/2); evaluated with mpmath Jacobi elliptic functions at ``dps`` digits, p = q'
    by high-precision differentiation. Independent of every tableau in this package.
    """
    with mpmath.workdps(dps):
        k = mpmath.sin(mpmath.mpf(q0) / 2)

        def q(tt):
            return 2 * mpmath.asin(k * mpmath.ellipfun("cd", tt, m=k**2))

        tt = mpmath.mpf(t)
        return np.array([float(q(tt)), float(mpmath.diff(q, tt))])


def _coefficients(method: Tableau | PartitionedTableau, n: int, split: int | None):
    """Per-component coefficient arrays A (s, s, n) and B (s, n)."""
    if isinstance(method, Tableau):
        A = np.repeat(method.a[:, :, None], n, axis=2)
        B = np.repeat(method.b[:, None], n, axis=1)
        return A, B
    if isinstance(method, PartitionedTableau):
        if split is None or not 0 < split < n:
            raise TableauError(
                f"a PartitionedTableau needs split = number of components integrated by "
                f"`first` (0 < split < {n}); got split = {split!r}."
            )
        s = method.stages
        A = np.empty((s, s, n))
        B = np.empty((s, n))
        A[:, :, :split] = method.first.a[:, :, None]
        A[:, :, split:] = method.second.a[:, :, None]
        B[:, :split] = method.first.b[:, None]
        B[:, split:] = method.second.b[:, None]
        return A, B
    raise TableauError(f"method must be a Tableau or PartitionedTableau; got {type(method)}.")


def rk_solve(
    method: Tableau | PartitionedTableau,
    fun: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    y0,
    h: float,
    n_steps: int,
    split: int | None = None,
    tol: float = 1e-15,
    max_iter: int = 50,
) -> np.ndarray:
    """Integrate the autonomous y' = f(y) with a (partitioned) RK method at fixed step h.

    Parameters
    ----------
    method : Tableau, or PartitionedTableau (components ``[:split]`` use ``first``, the rest
        ``second``, i.e. q' = f(q, p) by (a, b) and p' = g(q, p) by (â, b̂)).
    fun : maps stage values (s, n) to (f (s, n), Jacobian (s, n, n)).
    y0 : (n,) initial value.

    Returns
    -------
    (n,) value after ``n_steps`` steps. The stage equations K_i = f(y + h Σ_j a_ij K_j) are
    solved by Newton's method with the exact Jacobian (all stages at once), started from
    K_i = f(y); a :class:`RuntimeError` is raised if it does not converge.
    """
    y = np.array(y0, dtype=np.float64)
    n = y.shape[0]
    A, B = _coefficients(method, n, split)
    s = A.shape[0]
    eye = np.eye(s * n)
    for step in range(n_steps):
        f0, _ = fun(y[None, :])
        K = np.repeat(f0, s, axis=0)
        for _it in range(max_iter):
            Y = y[None, :] + h * np.einsum("ijn,jn->in", A, K)
            fY, JY = fun(Y)
            F = K - fY
            # d F_i / d K_j = δ_ij I − h J(Y_i) diag(A_ij·)
            blocks = JY[:, None, :, :] * A[:, :, None, :]  # (i, j, n, m)
            jac = eye - h * blocks.transpose(0, 2, 1, 3).reshape(s * n, s * n)
            dK = np.linalg.solve(jac, F.reshape(-1)).reshape(s, n)
            K = K - dK
            if np.max(np.abs(dK)) <= tol * (1.0 + np.max(np.abs(K))):
                break
        else:
            raise RuntimeError(
                f"stage equations did not converge at step {step}: |ΔK| = "
                f"{np.max(np.abs(dK)):.1e}. Try a smaller h."
            )
        y = y + h * np.einsum("in,in->n", B, K)
    return y


def fit_order(hs, errors, floor: float = 1e-11, min_points: int = 3) -> float:
    """Observed convergence order: slope of the least-squares fit of log(error) on log(h).

    The one order fit of the project (re-exported as
    ``chetaev.discrete_lagrangian.testing.fit_order``, the same object). Points whose error
    is at or below the round-off ``floor`` are left out of the fit (DESIGN.md, "What done
    means": the order is fitted on points above the round-off floor); at least
    ``min_points`` (default 3) must remain, since a slope through two points cannot tell an
    asymptotic order from a pre-asymptotic one.

    Parameters
    ----------
    hs
        Step sizes, 1-d, positive and finite.
    errors
        Errors at those steps, same shape, non-negative and finite (a diverged run is not a
        point of a convergence study: leave it out before calling).
    floor
        Round-off floor (or the reference's accuracy); errors ``<= floor`` are excluded.
    min_points
        Least number of points above ``floor`` (>= 2).

    Returns
    -------
    float
        The fitted slope.

    Raises
    ------
    TableauError
        (a ``ValueError``) Shapes differ or are not 1-d, ``hs`` not positive and finite,
        ``errors`` negative or not finite, or fewer than ``min_points`` errors above
        ``floor`` (use larger steps).
    """
    h = np.asarray(hs, dtype=float)
    err = np.asarray(errors, dtype=float)
    if h.ndim != 1 or err.shape != h.shape:
        raise TableauError(
            f"fit_order: `hs` and `errors` must be 1-d of equal length, got shapes "
            f"{h.shape} and {err.shape}. Pass one error per step size."
        )
    if not np.all(np.isfinite(h)) or np.any(h <= 0):
        raise TableauError(f"fit_order: the step sizes `hs` must be positive and finite, got {h}.")
    if not np.all(np.isfinite(err)) or np.any(err < 0):
        raise TableauError(
            f"fit_order: `errors` must be non-negative and finite, got {err}. Leave "
            "diverged runs out of the study."
        )
    if not (isinstance(min_points, (int, np.integer)) and min_points >= 2):
        raise TableauError(f"fit_order: `min_points` must be an integer >= 2, got {min_points!r}.")
    keep = err > floor
    n_keep = int(np.count_nonzero(keep))
    if n_keep < min_points:
        raise TableauError(
            f"fit_order: only {n_keep} of the errors {err} lie above the round-off floor "
            f"{floor:g}; a fit needs at least {min_points}: use larger steps."
        )
    return float(np.polyfit(np.log(h[keep]), np.log(err[keep]), 1)[0])
