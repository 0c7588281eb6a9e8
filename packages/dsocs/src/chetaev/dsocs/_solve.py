"""Batched (Gauss–)Newton with an optional deflation of rejected roots.

Used for the step equations of Theorem 3.3. The stopping test is on the step size,
|Δx|∞ ≤ tol·(1 + |x|∞), because the rows of the DSOCS residual carry factors such as
I/h² and 1/h³ whose round-off floor makes a pure residual test unattainable
(the docs' theory page "Scaled stopping test").
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

__all__ = ["SolveResult", "deflated", "gauss_newton"]


@attrs.frozen(eq=False)
class SolveResult:
    """Outcome of :func:`gauss_newton` (arrays over the batch shape)."""

    x: np.ndarray
    converged: np.ndarray
    iterations: int
    residual: np.ndarray  # ‖F(x)‖∞
    step: np.ndarray  # last relative step size


def _linsolve(J: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Least-squares/regular solution of J dx = F, batched."""
    if J.shape[-1] == J.shape[-2]:
        try:
            return np.linalg.solve(J, F[..., None])[..., 0]
        except np.linalg.LinAlgError:
            pass
    return np.einsum("...ij,...j->...i", np.linalg.pinv(J), F)


def gauss_newton(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    tol: float = 1e-12,
    max_iter: int = 50,
    damped: bool = True,
) -> SolveResult:
    """Solve F(x) = 0 for x of shape (..., n); F may have more rows than n (consistent).

    Newton's method (square J) or Gauss–Newton (tall J, pseudo-inverse), batched over
    leading axes; converged entries are frozen. With ``damped`` a backtracking line search
    on ‖F‖₂ (Armijo, halving up to 2⁻¹⁰) globalizes the iteration; near a regular root the
    full step is always accepted, so the local convergence stays quadratic.
    """
    x = np.array(x0, dtype=float, copy=True)
    batch = x.shape[:-1]
    done = np.zeros(batch, dtype=bool)
    rel = np.full(batch, np.inf)
    it = 0
    F = np.asarray(fun(x), dtype=float)
    for it in range(1, max_iter + 1):  # noqa: B007
        J = np.asarray(jac(x), dtype=float)
        dx = _linsolve(J, F)
        dx = np.where(done[..., None], 0.0, dx)
        if not np.all(np.isfinite(dx)):
            bad = ~np.all(np.isfinite(dx), axis=-1)
            rel = np.where(bad, np.inf, rel)
            break
        alpha = np.ones(batch)
        xn = x - dx
        Fn = np.asarray(fun(xn), dtype=float)
        if damped:
            f0 = np.sum(F * F, axis=-1)
            for _ in range(10):
                fn = np.sum(Fn * Fn, axis=-1)
                ok = (fn <= (1.0 - 1e-4 * alpha) * f0) | done | ~np.isfinite(f0)
                # a tiny full step near the root may not decrease ‖F‖ (round-off): accept it
                small = np.max(np.abs(dx), axis=-1) <= 1e3 * tol * (1.0 + np.max(np.abs(x), -1))
                ok = ok | (small & (alpha == 1.0))
                if np.all(ok):
                    break
                alpha = np.where(ok, alpha, 0.5 * alpha)
                xn = x - alpha[..., None] * dx
                Fn = np.asarray(fun(xn), dtype=float)
        step = alpha * np.max(np.abs(dx), axis=-1) / (1.0 + np.max(np.abs(xn), axis=-1))
        x, F = xn, Fn
        rel = np.where(done, rel, step)
        done = done | ((step <= tol) & (alpha == 1.0))
        if np.all(done):
            break
    res = np.max(np.abs(F), axis=-1) if F.shape[-1] else np.zeros(batch)
    ok = done & np.isfinite(res) & np.all(np.isfinite(x), axis=-1)
    return SolveResult(x=x, converged=ok, iterations=it, residual=res, step=rel)


def deflated(fun: Callable, jac: Callable, roots: list[np.ndarray], shift: float = 1.0,
             scale: float = 1.0, power: int = 2):
    """Deflated residual m(x)·F(x), m(x) = Π_k (1/(‖x − x_k‖/scale)^power + shift), and Jacobian.

    Deflation (Farrell, Birkisson & Funke 2015) removes known roots x_k so that Newton
    from the same guess converges to a different root; used by the root-selection
    safeguard of :class:`~chetaev.dsocs.DSOCS` (paper §4.2, eqs. (8)–(10) "Root selection").
    """

    def m_and_grad(x):
        m = np.ones(x.shape[:-1])
        grad = np.zeros(x.shape)
        for r in roots:
            d = (x - r) / scale
            d2 = np.maximum(np.sum(d * d, axis=-1), 1e-300)
            dn = d2 ** (power / 2)
            mk = 1.0 / dn + shift
            gk = -power * d / (d2 ** (power / 2 + 1))[..., None] / scale
            grad = grad * mk[..., None] + m[..., None] * gk
            m = m * mk
        return m, grad

    def f(x):
        m, _ = m_and_grad(x)
        return m[..., None] * np.asarray(fun(x))

    def j(x):
        m, g = m_and_grad(x)
        F = np.asarray(fun(x))
        return m[..., None, None] * np.asarray(jac(x)) + F[..., :, None] * g[..., None, :]

    return f, j
