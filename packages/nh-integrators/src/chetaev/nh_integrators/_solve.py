"""A lean batched Newton loop for the per-step systems of NH-PRK.

Same stopping rule and options as ``chetaev.discrete_lagrangian.newton_solve``
(``NewtonOptions.tol`` relative to a per-problem scale, floored at 64 eps; ``atol``;
``max_iter``; ``simplified`` with ``refresh_rate``; ``max_stall``), but with the per-call
bookkeeping cut to what one step needs: the general solver costs ~0.1 ms per call in
pure Python overhead, which is most of a single-trajectory step (benchmarks/). The
step's typed error (``ConvergenceError``) is raised by the caller.

:func:`newton_structured` is the same loop with a cheap approximate Newton matrix (the
structured matrix of ``LagrangianStep.structured_solver``), falling back to :func:`newton`
with the analytic Jacobian when that matrix does not contract.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.linalg.lapack import dgetrf as _getrf
from scipy.linalg.lapack import dgetri as _getri
from scipy.linalg.lapack import dgetrs as _getrs

__all__ = ["SolveResult", "newton", "newton_structured"]

_EPS = float(np.finfo(np.float64).eps)


class SolveResult:
    """``x``, ``converged`` (bool array ``(...)``), ``iterations``, ``residual`` (``(...)``),
    ``jac_inv`` (simplified Newton only), ``n_jac`` (analytic Jacobians), ``n_structured``
    (structured matrices, :func:`newton_structured`)."""

    __slots__ = ("converged", "iterations", "jac_inv", "n_jac", "n_structured", "residual", "x")

    def __init__(self, x, converged, iterations, residual, jac_inv, n_jac, n_structured=0):
        self.x = x
        self.converged = converged
        self.iterations = iterations
        self.residual = residual
        self.jac_inv = jac_inv
        self.n_jac = n_jac
        self.n_structured = n_structured


def newton(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    options,
    scale: np.ndarray | float = 1.0,
    jac_inv0: np.ndarray | None = None,
    simplified: bool | None = None,
    want_inverse: bool = True,
    jac_rows: Callable[[np.ndarray, slice], np.ndarray] | None = None,
    budget: np.ndarray | None = None,
) -> SolveResult:
    """Solve ``fun(x) = 0`` (batched over leading axes) by Newton's method.

    Full Newton solves with ``jac(x)`` at every iteration. Simplified Newton
    (``simplified``, default ``options.simplified``) reuses the inverse Jacobian
    ``jac_inv0`` (for instance from the previous step) and recomputes it when the
    contraction rate exceeds ``options.refresh_rate``; ``want_inverse=False`` tells an
    unbatched solve that the caller does not keep the inverse (LU factors suffice). An entry
    whose residual stops decreasing for
    ``options.max_stall`` iterations is abandoned (reported as not converged).

    ``jac_rows(x[sl], sl)``, the Jacobian of the batch entries ``sl`` (a slice of a
    one-axis batch), lets simplified Newton form the inverse of a large batch in blocks of
    ~1 MB of Jacobian: the temporaries of one block stay small (a whole-batch Jacobian of
    10^4 trajectories allocates arrays of ~100 MB, whose page faults cost about as much as
    the arithmetic); the result is the same. A refresh of some entries only forms their
    Jacobians (``jac_rows`` with an index array, else rows of ``jac(x)``).

    Batched, every decision is per entry (issue 18: an ensemble split in chunks equals the
    whole batch bitwise): an entry's inverse is refreshed when its own rate exceeds
    ``refresh_rate``, and an entry that stalls, turns non-finite or meets a singular
    Jacobian is frozen and reported not converged while the others continue; each entry's
    iterates are exactly those of a batch of that entry alone. ``budget`` (``(...)`` ints)
    caps each entry's iterations (the fallback of :func:`newton_structured`).
    ``iterations`` and ``n_jac`` count over the batch (diagnostics).
    """
    x = np.array(x0, dtype=np.float64)
    batch = x.shape[:-1]
    if not batch:
        return _newton_single(
            fun, jac, x, options, float(scale), jac_inv0, simplified, want_inverse
        )
    thr = np.maximum(max(options.tol, 64.0 * _EPS) * np.broadcast_to(scale, batch), options.atol)
    F = fun(x)
    r = np.abs(F).max(axis=-1)
    simplified = bool(options.simplified if simplified is None else simplified)
    max_iter, refresh, max_stall = options.max_iter, options.refresh_rate, options.max_stall
    if budget is not None:
        budget = np.broadcast_to(np.asarray(budget), batch)
        max_iter = min(max_iter, int(budget.max(initial=0)))
    N = x.shape[-1]
    # Every decision is taken per entry, so an entry's iterates are exactly those it would
    # have alone (issue 18): its own inverse Jacobian (refreshed, when its own rate exceeds
    # refresh_rate, from its own iterate), its own stall counter, its own non-finite and
    # singular-Jacobian stops. An entry without a valid inverse holds NaN (also in the
    # returned ``jac_inv``, which a later call then refreshes for that entry only).
    Jinv = None
    valid = np.zeros(batch, bool)
    owned = False  # Jinv is our own array (jac_inv0 is never written into)
    if simplified and jac_inv0 is not None:
        Jinv = jac_inv0
        valid = ~np.isnan(Jinv[..., 0, 0])
    stall = np.zeros(batch, np.int64)
    frozen = np.zeros(batch, bool)
    n_jac = 0
    it = 0
    while it < max_iter:
        active = (r > thr) & (r < np.inf) & ~frozen  # r < inf: not inf, not NaN
        if budget is not None:
            active &= budget > it
        if not active.any():
            break
        it += 1
        if simplified:
            need = active & ~valid
            if need.any():
                if need.all():
                    try:
                        Jinv = _inverse_jacobian(jac, jac_rows, x)
                        bad = None
                    except np.linalg.LinAlgError:
                        Jinv, owned = np.full((*batch, N, N), np.nan), True
                        bad = _inverse_rows(jac, jac_rows, x, need, Jinv)
                    owned = True
                else:
                    if not owned:
                        Jinv = np.full((*batch, N, N), np.nan) if Jinv is None else Jinv.copy()
                        owned = True
                    bad = _inverse_rows(jac, jac_rows, x, need, Jinv)
                n_jac += 1
                valid |= need
                if bad is not None:  # singular Jacobian: that entry is not converged
                    valid &= ~bad
                    frozen |= bad
                    active &= ~bad
            with np.errstate(invalid="ignore", over="ignore"):
                dx = (Jinv @ F[..., None])[..., 0]
        else:
            J = jac(x)
            n_jac += 1
            try:
                dx = np.linalg.solve(J, F[..., None])[..., 0]
            except np.linalg.LinAlgError:  # find the singular entries, one by one
                dx = np.zeros_like(x)
                for i in zip(*np.nonzero(active)):
                    try:
                        dx[i] = np.linalg.solve(J[i][None], F[i][None, :, None])[0, :, 0]
                    except np.linalg.LinAlgError:
                        frozen[i] = True
                        active[i] = False
        x = x - dx if active.all() else np.where(active[..., None], x - dx, x)  # others stay
        F = fun(x)
        r_new = np.abs(F).max(axis=-1)
        with np.errstate(invalid="ignore"):
            rate = r_new / np.maximum(r, 1e-300)
        r = r_new
        if simplified:
            stale = active & (rate > refresh)
            if stale.any():
                if not owned:
                    Jinv, owned = Jinv.copy(), True
                Jinv[stale] = np.nan
                valid &= ~stale
        stall = np.where(active, np.where(rate >= 1.0, stall + 1, 0), stall)
        frozen |= active & (stall >= max_stall)
    converged = np.isfinite(r) & (r <= thr)
    if not simplified or not valid.any():
        Jinv = None
    return SolveResult(x, converged, it, r, Jinv, n_jac)


def newton_structured(
    fun: Callable[[np.ndarray], np.ndarray],
    make_solver: Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]],
    x0: np.ndarray,
    options,
    scale: np.ndarray | float,
    fallback: Callable[[np.ndarray, int], SolveResult],
) -> SolveResult:
    """Simplified Newton with a cheap structured matrix, falling back to an exact one.

    ``make_solver(x)`` returns ``solve(F) -> J_0(x)^{-1} F`` for an approximate Jacobian
    ``J_0`` (``LagrangianStep.structured_solver``); it is built at ``x0`` and rebuilt at
    the current iterate when the contraction rate exceeds ``options.refresh_rate``. If the
    rate still exceeds it right after a rebuild (``J_0`` too far from the Jacobian, e.g.
    stiff forces), or ``J_0`` is singular, ``fallback(x, iterations_left)`` finishes the
    solve from the current iterate (the analytic-Jacobian :func:`newton`). Same stopping
    rule as :func:`newton`; the rate is taken over the entries not yet converged after the
    iteration (an entry that reached the tolerance needs no better matrix). ``n_jac`` of
    the result counts the analytic Jacobians of the fallback only, ``n_structured`` the
    structured matrices built.
    """
    x = np.array(x0, dtype=np.float64)
    batch = x.shape[:-1]
    if not batch:
        return _structured_single(fun, make_solver, x, options, scale, fallback)
    thr = np.maximum(max(options.tol, 64.0 * _EPS) * np.broadcast_to(scale, batch), options.atol)
    F = fun(x)
    r = np.abs(F).max(axis=-1)
    max_iter, refresh, max_stall = options.max_iter, options.refresh_rate, options.max_stall
    # Per entry, as in newton (issue 18): an entry's matrix is built at its own build point
    # xb, rebuilt (xb moved to its iterate) when its own judged rate exceeds refresh_rate;
    # make_solver is elementwise, so the entries not rebuilt get bitwise their old matrix.
    # An entry whose fresh matrix does not contract is set aside with its iterations left
    # and finished by one fallback call at the end (budget per entry).
    it = 0
    n_built = 0
    solve = None
    xb = None
    built = np.zeros(batch, bool)  # the entry has a matrix (at xb)
    fresh = np.zeros(batch, bool)  # ... built at the previous iterate
    stall = np.zeros(batch, np.int64)
    frozen = np.zeros(batch, bool)
    left = np.zeros(batch, np.int64)  # > 0: handed to the fallback with that many iterations
    to_fallback = np.zeros(batch, bool)
    while it < max_iter:
        active = (r > thr) & (r < np.inf) & ~frozen & ~to_fallback
        if not active.any():
            break
        need = active & ~built
        if need.any():
            xn = x if xb is None or need.all() else np.where(need[..., None], x, xb)
            try:
                solve_new = make_solver(xn)
            except np.linalg.LinAlgError:
                # singular structured matrix: which entry is not known (the solver is
                # built for the whole batch), so the entries being rebuilt go to the
                # fallback, the others keep their matrix (the one remaining
                # batch-dependent choice; S is singular only for degenerate constraints)
                to_fallback |= need
                left[need] = max_iter - it
                active &= ~need
                if not active.any():
                    break
            else:
                solve, xb = solve_new, xn
                n_built += 1
                built |= need
                fresh = need
        it += 1
        with np.errstate(invalid="ignore", over="ignore"):
            dx = solve(F)
        x = x - dx if active.all() else np.where(active[..., None], x - dx, x)  # others stay
        F = fun(x)
        r_new = np.abs(F).max(axis=-1)
        with np.errstate(invalid="ignore"):
            ratio = r_new / np.maximum(r, 1e-300)
        # the matrix is judged on entries clear of the round-off floor (an entry within a
        # few units of the tolerance, whose rate is noise, needs no better matrix)
        judged = active & (r > 16.0 * thr) & (r_new > thr)
        over = judged & (ratio > refresh)
        r = r_new
        if over.any():
            give_up = over & fresh & (ratio < np.inf)
            to_fallback |= give_up
            left[give_up] = max_iter - it
            built &= ~over
        fresh = np.zeros(batch, bool)
        stall = np.where(active, np.where(ratio >= 1.0, stall + 1, 0), stall)
        frozen |= active & (stall >= max_stall)
    if to_fallback.any():
        return _finish(fallback(x, np.where(to_fallback, left, 0)), it, n_built)
    converged = np.isfinite(r) & (r <= thr)
    return SolveResult(x, converged, it, r, None, 0, n_built)


def _structured_single(fun, make_solver, x, options, scale, fallback) -> SolveResult:
    """:func:`newton_structured` for one unbatched system."""
    thr = max(max(options.tol, 64.0 * _EPS) * float(scale), options.atol)
    F = fun(x)
    r = np.abs(F).max(axis=-1)
    max_iter, refresh, max_stall = options.max_iter, options.refresh_rate, options.max_stall
    it = 0
    stall = 0
    solve = None
    fresh = False  # solve was built at the previous iterate
    n_built = 0
    while it < max_iter:
        if not r > thr or not np.isfinite(r):
            break
        if solve is None:
            try:
                solve = make_solver(x)
            except np.linalg.LinAlgError:  # singular structured matrix
                return _finish(fallback(x, max_iter - it), it, n_built)
            fresh = True
            n_built += 1
        it += 1
        x = x - solve(F)
        F = fun(x)
        r_new = np.abs(F).max(axis=-1)
        ratio = r_new / max(r, 1e-300)
        judged = (r > 16.0 * thr) & (r_new > thr)
        rate = float(ratio) if judged else 0.0
        r = r_new
        if rate > refresh:
            if fresh and rate < np.inf:
                return _finish(fallback(x, max_iter - it), it, n_built)
            solve = None
        fresh = False
        stall = stall + 1 if float(ratio) >= 1.0 else 0
        if stall >= max_stall:
            break
    converged = np.bool_(np.isfinite(r) & (r <= thr))
    return SolveResult(x, converged, it, np.float64(r), None, 0, n_built)


def _finish(result: SolveResult, it_before: int, n_built: int) -> SolveResult:
    result.iterations = result.iterations + it_before
    result.n_structured = n_built
    return result


# Entries of a block of a blocked Jacobian refresh: about 1 MB of Jacobian per block, at
# least 256 entries (measured on 10^4 trajectories: 256-512 entries for N = 23-31; small
# systems gain nothing from blocks, whose Python overhead then dominates).
_BLOCK_VALUES = 2**17
_BLOCK_MIN = 256


def _inverse_jacobian(jac, jac_rows, x: np.ndarray) -> np.ndarray:
    """``inv(jac(x))``, by blocks of batch entries when ``jac_rows`` is given."""
    B = x.shape[0]
    N = x.shape[-1]
    block = max(_BLOCK_MIN, _BLOCK_VALUES // (N * N))
    if jac_rows is None or x.ndim != 2 or B <= 2 * block:
        return np.linalg.inv(jac(x))
    out = np.empty((B, N, N))
    for i in range(0, B, block):
        sl = slice(i, min(i + block, B))
        out[sl] = np.linalg.inv(jac_rows(x[sl], sl))
    return out


def _inverse_rows(jac, jac_rows, x: np.ndarray, need: np.ndarray, out: np.ndarray):
    """Write ``inv(jac(x))`` of the entries ``need`` into ``out[need]`` (by blocks of
    ``jac_rows`` with index arrays on a one-axis batch, else rows of ``jac(x)``); return the
    mask of the entries whose Jacobian is singular (their rows stay NaN), or None."""
    N = x.shape[-1]
    if jac_rows is not None and x.ndim == 2:
        idx = np.flatnonzero(need)
        block = max(_BLOCK_MIN, _BLOCK_VALUES // (N * N))
        parts = [idx[i : i + block] for i in range(0, idx.size, block)]
        J = None
    else:
        J = jac(x)[need]
        parts = [None]
    bad = None
    for part in parts:
        Jp = J if part is None else jac_rows(x[part], part)
        try:
            inv = np.linalg.inv(Jp)
        except np.linalg.LinAlgError:  # find the singular entries, one by one
            inv = np.full(Jp.shape, np.nan)
            for k in range(Jp.shape[0]):
                try:
                    inv[k] = np.linalg.inv(Jp[k][None])[0]
                except np.linalg.LinAlgError:
                    pass
            sing = np.isnan(inv[:, 0, 0])
            if sing.any():
                if bad is None:
                    bad = np.zeros(need.shape, bool)
                if part is None:
                    bad[need] = sing
                else:
                    bad.flat[part[sing]] = True
        if part is None:
            out[need] = inv
        else:
            out[part] = inv
    return bad


def _newton_single(
    fun, jac, x, options, scale, jac_inv0, simplified, want_inverse=False
) -> SolveResult:
    """:func:`newton` for one unbatched system (same rule, Python scalars: a single
    trajectory's step is dominated by per-call overhead). Simplified Newton keeps the LU
    factors of the Jacobian (LAPACK getrf/getrs: ~4 times cheaper than forming the inverse);
    a passed-in ``jac_inv0`` is used as an inverse, and the inverse is returned (formed from
    the factors) only when the factors were refreshed and ``want_inverse`` is set."""
    thr = max(max(options.tol, 64.0 * _EPS) * scale, options.atol)
    F = fun(x)
    r = float(np.abs(F).max())
    simplified = bool(options.simplified if simplified is None else simplified)
    Jinv = jac_inv0 if simplified else None
    n_jac = 0
    stall = 0
    it = 0
    max_iter, refresh, max_stall = options.max_iter, options.refresh_rate, options.max_stall
    lu = None  # (lu, piv) of the current Jacobian
    while it < max_iter and r > thr and r < np.inf:  # r < inf: stops on inf and NaN
        it += 1
        if simplified and Jinv is not None:
            dx = Jinv @ F
        else:
            if lu is None or not simplified:
                lu_, piv, info = _getrf(jac(x))
                n_jac += 1
                if info != 0:  # singular Jacobian: report as not converged
                    break
                lu = (lu_, piv)
            dx = _getrs(lu[0], lu[1], F)[0]
        x = x - dx
        F = fun(x)
        r_new = float(np.abs(F).max())
        rate = r_new / max(r, 1e-300)
        r = r_new
        if simplified and rate > refresh:
            Jinv = None
            lu = None
        stall = stall + 1 if rate >= 1.0 else 0
        if stall >= max_stall:
            break
    converged = bool(r <= thr)  # False for NaN
    if simplified and lu is not None and want_inverse:
        inv_, info = _getri(lu[0], lu[1])
        Jinv = inv_ if info == 0 else None
    return SolveResult(
        x, np.bool_(converged), it, np.float64(r), Jinv if simplified else None, n_jac
    )
