"""The one root finder of chetaev: every implicit method of every package solves its step here.

``newton_solve(fun, x0, jac=None, options=NewtonOptions(), scale=None, ...)`` solves the
batched system ``fun(x) = 0`` with ``x`` of shape ``(..., N)``: each leading index is an
independent problem, and every decision (Jacobian refresh, stall, singular matrix,
non-finite residual) is taken per entry, so a batched solve gives bitwise the iterates of
the single solves (issue 18: an ensemble split in chunks equals the whole batch). The
unbatched path runs the same rule with Python scalars and direct LAPACK calls (a single
trajectory's step is dominated by per-call overhead).

* Strategies: full Newton; simplified/chord Newton with Jacobian reuse across iterations
  and steps (``jac_inv0``, ``refresh_rate``, blocked ``jac_rows`` inverse); the structured
  approximate-matrix solve of NH-PRK with per-entry fallback to the analytic Jacobian
  (``structured=``); Gauss–Newton for tall consistent systems with optional Armijo damping
  (``gauss_newton=True``); deflation of known roots (:func:`deflated`, Farrell et al.
  2015) as a residual transform for DSOCS root selection.
* Jacobian: analytic ``jac(x)`` → ``(..., N, N)``, or central finite differences in ONE
  call of ``fun`` with the 2N perturbations stacked on a new leading axis (``fun`` must
  therefore accept extra leading axes, which every broadcasting residual does).
* The one stopping rule: ``max|fun(x)| ≤ max(tol, 64·eps) · scale`` (and ≥ ``atol``),
  where ``scale`` is the magnitude of the terms that make up the residual (the caller knows
  it; e.g. ``|p| + h|W|``). The factor ``64·eps`` keeps the target above the round-off
  floor. (Gauss–Newton alone tests the step size instead, see :func:`_gauss_newton`.)
* Stall / divergence: the contraction rate ``r_{k+1}/r_k`` is monitored; an entry whose
  residual fails to decrease ``max_stall`` times in a row (or becomes non-finite, or meets
  a singular matrix) stops as not converged (scipy ``radau.solve_collocation_system`` does
  the same).

Callers raise :class:`~chetaev.discrete_lagrangian.ConvergenceError` when the result is not
converged (:func:`raise_unless_converged`): they know the step and the time.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
from scipy.linalg.lapack import dgetrf as _getrf
from scipy.linalg.lapack import dgetri as _getri
from scipy.linalg.lapack import dgetrs as _getrs

__all__ = [
    "NewtonOptions",
    "NewtonResult",
    "deflated",
    "fd_jacobian_of",
    "newton_solve",
    "raise_unless_converged",
]

_EPS = float(np.finfo(np.float64).eps)
_ROUNDOFF_FACTOR = 64.0


@attrs.frozen
class NewtonOptions:
    """Options of :func:`newton_solve`.

    Parameters
    ----------
    tol : float
        Residual tolerance relative to the problem scale (default 1e-12). It is raised to
        64·eps if smaller, so it always sits above the round-off floor.
    atol : float
        Absolute floor of the residual tolerance (default 1e-300: effectively none).
    max_iter : int
        Maximum number of Newton iterations per solve (default 50).
    simplified : bool
        Reuse the inverse Jacobian across iterations (and steps) while convergence is fast.
    refresh_rate : float
        Simplified Newton recomputes the Jacobian when the contraction rate exceeds this.
    max_stall : int
        Stop an entry after this many consecutive iterations without residual decrease.
    finite_differences : bool
        Ignore an analytic Jacobian and use finite differences (testing aid).
    """

    tol: float = attrs.field(default=1e-12)
    atol: float = attrs.field(default=1e-300)
    max_iter: int = attrs.field(default=50)
    simplified: bool = attrs.field(default=False)
    refresh_rate: float = attrs.field(default=0.2)
    max_stall: int = attrs.field(default=3)
    finite_differences: bool = attrs.field(default=False)

    def __attrs_post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "tol", _option_float(self.tol, "tol", positive=True))
        set_(self, "atol", _option_float(self.atol, "atol", positive=False))
        set_(self, "refresh_rate", _option_float(self.refresh_rate, "refresh_rate", True))
        set_(self, "max_iter", _option_int(self.max_iter, "max_iter"))
        set_(self, "max_stall", _option_int(self.max_stall, "max_stall"))
        for name in ("simplified", "finite_differences"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                _option_error(name, value, "must be True or False")
            set_(self, name, bool(value))


def _option_error(name: str, value, what: str):
    from .._util._errors import InputError

    raise InputError(f"NewtonOptions({name}=...) {what}, got {value!r}.")


def _option_float(value, name: str, positive: bool) -> float:
    """A finite real option (> 0, or >= 0 when not ``positive``)."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value):
        _option_error(name, value, "must be a real number")
    try:
        val = float(value)
    except (TypeError, ValueError):
        _option_error(name, value, "must be a real number")
    if not np.isfinite(val) or val < 0 or (positive and val == 0):
        _option_error(name, value, "must be positive and finite" if positive
                      else "must be non-negative and finite")
    return val


def _option_int(value, name: str) -> int:
    """An integer option >= 1 (an integral float such as 20.0 is accepted; 2.7 is not)."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value):
        _option_error(name, value, "must be an integer >= 1")
    try:
        val = float(value)
    except (TypeError, ValueError):
        _option_error(name, value, "must be an integer >= 1")
    if not (np.isfinite(val) and val.is_integer() and val >= 1):
        _option_error(name, value, "must be an integer >= 1")
    return int(val)


@attrs.frozen(eq=False)
class NewtonResult:
    """Result of :func:`newton_solve`.

    Attributes
    ----------
    x : ndarray (..., N)
        The last iterate.
    converged : ndarray of bool (...)
        Per-problem convergence flag.
    iterations : int
        Largest number of iterations any problem used.
    residual : ndarray (...)
        Final max-norm of ``fun(x)`` per problem.
    rate : float
        Largest last contraction rate (NaN if no iteration was needed).
    tol : ndarray (...)
        The absolute threshold each residual was compared with.
    jac_inv : ndarray or None
        Last inverse Jacobian (simplified Newton only), to pass to the next solve.
    n_jac : int
        Number of (analytic or finite-difference) Jacobian evaluations.
    n_structured : int
        Number of structured matrices built (structured strategy).
    step : ndarray (...) or None
        Last relative step size ``|dx| / (1 + |x|)`` (Gauss–Newton strategy).
    sigma_min : ndarray (...) or None
        Smallest relative singular value of the Jacobian at ``x0`` and at ``x`` (the
        smaller; ``rank_rtol`` only).
    """

    x: np.ndarray
    converged: np.ndarray
    iterations: int
    residual: np.ndarray
    rate: float
    tol: np.ndarray
    jac_inv: np.ndarray | None = None
    n_jac: int = 0
    n_structured: int = 0
    step: np.ndarray | None = None
    sigma_min: np.ndarray | None = None

    @property
    def all_converged(self) -> bool:
        """True when every problem converged."""
        return bool(np.all(self.converged))


DEFAULT_HINT = "halve h, or increase NewtonOptions(max_iter=...)"


def raise_unless_converged(res: NewtonResult, state, hint: str = DEFAULT_HINT) -> NewtonResult:
    """Return ``res`` if every batch entry converged, else raise ``ConvergenceError``.

    The one place where a step's Newton failure becomes an error: the message names the
    step ``state.n`` and time ``state.t`` the step starts from, the worst residual and the
    tolerance among the entries that did NOT converge (batched runs), the iteration count
    and ``hint``.
    """
    if res.all_converged:
        return res
    from .._util._errors import ConvergenceError

    bad = ~np.asarray(res.converged, dtype=bool)
    residual = np.asarray(res.residual)
    tol = np.asarray(res.tol)
    raise ConvergenceError(
        step=state.n, t=state.t,
        residual=float(np.max(np.broadcast_to(residual, bad.shape)[bad])),
        tol=float(np.min(np.broadcast_to(tol, bad.shape)[bad])),
        iterations=int(np.max(res.iterations)), hint=hint,
    )


def fd_jacobian_of(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian ``(..., N, N)`` of ``fun`` at ``x`` in one call."""
    N = x.shape[-1]
    step = _EPS ** (1.0 / 3.0) * np.maximum(1.0, np.abs(x))  # (..., N)
    step_k = np.moveaxis(step, -1, 0)  # (N, ...)
    eye = np.eye(N).reshape((N,) + (1,) * (x.ndim - 1) + (N,))
    dx = step_k[..., None] * eye
    F = np.asarray(fun(x + np.concatenate([dx, -dx], axis=0)))
    F = np.broadcast_to(F, (2 * N, *x.shape[:-1], F.shape[-1]))
    D = (F[:N] - F[N:]) / (2.0 * step_k[..., None])  # (N, ..., N): [k, ..., i]
    return np.moveaxis(D, 0, -1)


class _Problem:
    """The residual and Jacobian of one solve behind three calls: ``fun(x)``, ``jac(x)``
    and ``both(x)`` (``eager``: the caller's ``fun_jac`` shares work between the two, so
    full Newton asks for both after each step; otherwise the Jacobian is formed only at the
    start of an iteration that needs it)."""

    __slots__ = ("both", "eager", "fun", "jac")

    def __init__(self, fun, jac, fun_jac, finite_differences: bool) -> None:
        if fun_jac is not None and not finite_differences:
            self.fun = lambda x: np.asarray(fun_jac(x, False)[0], dtype=float)
            self.jac = lambda x: np.asarray(fun_jac(x, True)[1])
            self.both = lambda x: fun_jac(x, True)
            # a ``lazy`` fun_jac (attribute ``lazy = True``) forms its Jacobian only on
            # request, reusing the residual evaluation at the same point: ask for it then
            self.eager = not getattr(fun_jac, "lazy", False)
            return
        if fun_jac is not None:
            base = fun_jac
            fun = lambda y: base(y, False)[0]  # noqa: E731
        if fun is None:
            from .._util._errors import InputError

            raise InputError("newton_solve needs `fun` or `fun_jac`.")
        if jac is None or finite_differences:
            lazy = _lazy_fd(fun)
            self.fun = lambda x: lazy(x, False)[0]
            self.jac = lambda x: lazy(x, True)[1]
        else:
            self.fun = lambda x: np.asarray(fun(x), dtype=float)
            self.jac = lambda x: np.asarray(jac(x))
        self.both = None
        self.eager = False

    def start(self, x, f0, j0, simplified: bool, jac_inv0):
        """``(F, J, n_jac)`` at ``x0``: the caller's ``f0``/``j0``, else the residual, with
        the Jacobian when it comes with it at no extra cost and will be needed."""
        if f0 is not None:
            return np.asarray(f0, dtype=float), j0, 0
        if self.eager and (not simplified or jac_inv0 is None):
            F, J = self.both(x)
            return np.asarray(F, dtype=float), J, 1
        return self.fun(x), None, 0

    def after_step(self, x, eager: bool):
        """``(F, J or None, n_jac)`` at a new iterate (``J`` when ``eager``)."""
        if eager:
            F, J = self.both(x)
            return np.asarray(F, dtype=float), J, 1
        return self.fun(x), None, 0


def newton_solve(
    fun: Callable[[np.ndarray], np.ndarray] | None,
    x0: np.ndarray,
    jac: Callable[[np.ndarray], np.ndarray] | None = None,
    options: NewtonOptions | None = None,
    scale: np.ndarray | float | None = None,
    jac_inv0: np.ndarray | None = None,
    fun_jac: Callable[[np.ndarray, bool], tuple[np.ndarray, np.ndarray | None]] | None = None,
    f0: np.ndarray | None = None,
    j0: np.ndarray | None = None,
    *,
    simplified: bool | None = None,
    want_inverse: bool = True,
    jac_rows: Callable[[np.ndarray, object], np.ndarray] | None = None,
    budget: np.ndarray | None = None,
    structured: Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]] | None = None,
    gauss_newton: bool = False,
    damped: bool = False,
    polish: float | None = None,
    rank_rtol: float | None = None,
) -> NewtonResult:
    """Solve the batched system ``fun(x) = 0`` (the one root finder of chetaev).

    Strategies (all with the one stopping rule of the module docstring, every decision per
    batch entry):

    * full Newton (default): the Jacobian at every iterate.
    * simplified / chord Newton (``simplified=True``, default ``options.simplified``): the
      inverse Jacobian is kept across iterations, and across steps through ``jac_inv0``,
      and refreshed for an entry whose contraction rate exceeds ``options.refresh_rate``.
    * structured (``structured=make_solver``): simplified Newton with a cheap approximate
      matrix ``J_0`` (``make_solver(x)`` returns ``solve(F) = J_0(x)^{-1} F``, e.g. the
      structured matrix of NH-PRK, paper eq. (14)), rebuilt when an entry's rate exceeds
      ``refresh_rate``; an entry whose freshly built matrix does not contract, or is
      singular (``solve`` returns non-finite rows for it), finishes with the analytic
      strategy above (full or simplified) within the iterations it has left.
    * Gauss–Newton (``gauss_newton=True``): ``fun`` may have more rows than unknowns
      (a consistent tall system, pseudo-inverse steps), with an optional Armijo
      backtracking on ``|F|_2`` (``damped``). It stops on the step size
      ``|dx|_inf <= tol (1 + |x|_inf)`` (DSOCS, whose rows carry ``1/h^2`` and ``1/h^3``
      factors; see :func:`_gauss_newton`).

    Deflation of known roots (Farrell et al. 2015) is the residual transform
    :func:`deflated`, which any strategy can solve.

    Parameters
    ----------
    fun : callable
        ``(..., N)`` → ``(..., N)``; must broadcast over extra leading axes (finite
        differences stack the perturbations there).
    x0 : ndarray, shape (..., N)
        Initial guess (warm start).
    jac : callable, optional
        ``(..., N)`` → ``(..., N, N)``; finite differences (one call of ``fun``) if None.
    options : NewtonOptions, optional
    scale : float or ndarray (...), optional
        Magnitude of the terms in the residual; the tolerance is ``tol * scale``.
        Default 1.
    jac_inv0 : ndarray (..., N, N), optional
        Inverse Jacobian from a previous solve (simplified Newton only); an entry holding
        NaN is refreshed.
    fun_jac : callable, optional
        ``fun_jac(x, want_jacobian)`` → ``(F, J or None)``: residual and Jacobian from one
        evaluation (shares the work); replaces ``fun`` and ``jac``.
    f0, j0 : ndarray, optional
        ``fun(x0)`` and the Jacobian at ``x0`` when the caller already has them.
    simplified : bool, optional
        Simplified Newton; default ``options.simplified``.
    want_inverse : bool
        Unbatched simplified Newton keeps LU factors; ``False`` says the caller does not
        keep the inverse, so it is not formed from them (``jac_inv`` of the result is None).
    jac_rows : callable, optional
        ``jac_rows(x[sel], sel)``: the Jacobian of the batch entries ``sel`` (slice or index
        array of a one-axis batch), so that simplified Newton forms the inverses of a large
        batch in blocks of ~1 MB (same result, small temporaries).
    budget : ndarray of int (...), optional
        Iterations each entry may still take (the fallback of the structured strategy).
    structured : callable, optional
        ``make_solver(x)`` of the structured strategy.
    gauss_newton, damped : bool
        The Gauss–Newton strategy, with Armijo damping.
    polish : float, optional
        Iterate to the round-off floor: an entry below the tolerance keeps iterating while
        its residual still contracts by at least this factor per iteration (and is above
        ``64 eps * scale``); it is converged when below the tolerance. For steps whose
        first integrals are kept at round-off level (the Lie-group NH-PRK, homogeneous-
        spaces paper §5.5). Simplified and full Newton only.
    rank_rtol : float, optional
        Rank check: the smallest singular value of the Jacobian relative to its largest is
        computed at ``x0`` and, for a converged entry, at the solution (``sigma_min`` of
        the result, the smaller of the two); an entry below ``rank_rtol`` is not converged
        (at ``x0``: not iterated). For systems that are singular on their solution set (the
        ``"weighted_sum"`` rule of the Lie-group NH-PRK).

    Returns
    -------
    NewtonResult
    """
    opts = options if options is not None else NewtonOptions()
    simp = bool(opts.simplified if simplified is None else simplified)
    if gauss_newton:
        if fun is None or jac is None:
            from .._util._errors import InputError

            raise InputError("newton_solve(gauss_newton=True) needs `fun` and `jac`.")
        return _gauss_newton(fun, jac, x0, opts, damped)
    prob = _Problem(fun, jac, fun_jac, opts.finite_differences)
    x = np.array(x0, dtype=np.float64)
    batch = x.shape[:-1]
    sc = 1.0 if scale is None else scale
    if rank_rtol is not None:
        return _rank_checked(prob, x, opts, sc, jac_inv0, simp, want_inverse, jac_rows,
                             budget, polish, float(rank_rtol))
    if structured is not None:
        def fallback(xs, left):
            o, b = opts, None
            if np.ndim(left):  # iterations left per batch entry
                b = left
            elif left < 1:  # no iteration left: report the unconverged iterate
                r = np.float64(np.abs(prob.fun(xs)).max())
                return NewtonResult(x=xs, converged=np.bool_(False), iterations=0,
                                    residual=r, rate=float("nan"),
                                    tol=np.float64(_threshold(opts, float(np.asarray(sc)))))
            elif left != opts.max_iter:
                o = attrs.evolve(opts, max_iter=int(left))
            return newton_solve(prob.fun, xs, prob.jac, options=o, scale=scale,
                                jac_inv0=jac_inv0, simplified=simp,
                                want_inverse=want_inverse, jac_rows=jac_rows, budget=b)

        if not batch:
            return _structured_single(prob.fun, structured, x, opts, float(np.asarray(sc)),
                                      fallback)
        return _structured_batch(prob.fun, structured, x, opts, sc, fallback)
    if not batch:
        return _newton_single(prob, x, opts, float(np.asarray(sc)), jac_inv0, simp,
                              want_inverse, f0, j0, polish)
    return _newton_batch(prob, x, opts, sc, jac_inv0, simp, jac_rows, budget, f0, j0, polish)


def _relative_sigma_min(J: np.ndarray) -> np.ndarray:
    sv = np.linalg.svd(J, compute_uv=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sv[..., 0] > 0, sv[..., -1] / sv[..., 0], 0.0)


def _rank_checked(prob, x, opts, scale, jac_inv0, simp, want_inverse, jac_rows, budget,
                  polish, rtol) -> NewtonResult:
    """The rank check of :func:`newton_solve` (``rank_rtol``) around the Newton strategies."""
    batch = x.shape[:-1]
    if prob.eager:
        F0, J0 = prob.both(x)
        F0 = np.asarray(F0, dtype=float)
    else:
        F0, J0 = prob.fun(x), prob.jac(x)
    sig0 = _relative_sigma_min(J0)
    low = sig0 < rtol
    if not batch:
        if low:
            r = float(np.abs(F0).max()) if F0.size else 0.0
            return NewtonResult(x=x, converged=np.bool_(False), iterations=0,
                                residual=np.float64(r), rate=float("nan"),
                                tol=np.float64(_threshold(opts, float(np.asarray(scale)))),
                                n_jac=1, sigma_min=sig0)
        res = _newton_single(prob, x, opts, float(np.asarray(scale)), jac_inv0, simp,
                             want_inverse, F0, J0, polish)
    else:
        if low.any():
            cap = np.where(low, 0, opts.max_iter)
            budget = cap if budget is None else np.minimum(budget, cap)
        res = _newton_batch(prob, x, opts, scale, jac_inv0, simp, jac_rows, budget, F0, J0,
                            polish)
    if not np.any(res.converged):
        return attrs.evolve(res, sigma_min=sig0, n_jac=res.n_jac + 1)
    # the rank at the solution decides (a system singular on its solution set)
    sig = np.where(res.converged, np.minimum(sig0, _relative_sigma_min(prob.jac(res.x))), sig0)
    return attrs.evolve(res, converged=res.converged & (sig >= rtol), sigma_min=sig,
                        n_jac=res.n_jac + 2)


def _threshold(opts: NewtonOptions, scale, batch=None):
    """The one stopping threshold ``max(max(tol, 64 eps) * scale, atol)``."""
    tol = max(opts.tol, _ROUNDOFF_FACTOR * _EPS)
    if batch is None:
        return max(tol * scale, opts.atol)
    return np.maximum(tol * np.broadcast_to(np.asarray(scale, dtype=float), batch), opts.atol)


def _norm(F: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    r = np.max(np.abs(F), axis=-1) if F.shape[-1] else np.zeros(batch)
    return np.where(np.isnan(r), np.inf, r)


def _newton_batch(prob, x, opts, scale, jac_inv0, simplified, jac_rows, budget, f0, j0,
                  polish=None):
    """Full or simplified Newton on a batch, every decision per entry (issue 18: an
    ensemble split in chunks equals the whole batch bitwise): an entry's inverse is
    refreshed when its own rate exceeds ``refresh_rate``, and an entry that stalls, turns
    non-finite or meets a singular Jacobian is frozen and reported not converged while the
    others continue; each entry's iterates are exactly those of a batch of that entry
    alone. An entry without a valid inverse holds NaN (also in the returned ``jac_inv``,
    which a later call then refreshes for that entry only)."""
    batch = x.shape[:-1]
    N = x.shape[-1]
    thr = _threshold(opts, scale, batch)
    max_iter, refresh, max_stall = opts.max_iter, opts.refresh_rate, opts.max_stall
    if budget is not None:
        budget = np.broadcast_to(np.asarray(budget), batch)
        max_iter = min(max_iter, int(budget.max(initial=0)))
    eager = prob.eager and not simplified
    F, J, n_jac = prob.start(x, f0, j0, simplified, jac_inv0)
    r = _norm(F, batch)
    if polish is not None:
        floor = _threshold(attrs.evolve(opts, tol=_ROUNDOFF_FACTOR * _EPS), scale, batch)
        contracting = np.ones(batch, bool)
    Jinv = None
    valid = np.zeros(batch, bool)
    owned = False  # Jinv is our own array (jac_inv0 is never written into)
    if simplified and jac_inv0 is not None:
        Jinv = jac_inv0
        valid = ~np.isnan(Jinv[..., 0, 0])
    stall = np.zeros(batch, np.int64)
    frozen = np.zeros(batch, bool)
    iters = np.zeros(batch, np.int64)
    last_rate = np.full(batch, np.nan)
    it = 0
    while it < max_iter:
        active = (r > thr) & (r < np.inf) & ~frozen  # r < inf: not inf, not NaN
        if polish is not None:  # below the tolerance, on to the round-off floor
            active |= (r > floor) & contracting & (r < np.inf) & ~frozen
        if budget is not None:
            active &= budget > it
        if not active.any():
            break
        it += 1
        if simplified:
            need = active & ~valid
            if need.any():
                given = J is not None and need.all()  # the Jacobian at x is at hand
                if given:
                    try:
                        Jinv = np.linalg.inv(J)
                        bad = None
                    except np.linalg.LinAlgError:
                        Jinv = np.full((*batch, N, N), np.nan)
                        bad = _inverse_rows(lambda _x, J=J: J, None, x, need, Jinv)
                    owned = True
                elif need.all():
                    try:
                        Jinv = _inverse_jacobian(prob.jac, jac_rows, x)
                        bad = None
                    except np.linalg.LinAlgError:
                        Jinv = np.full((*batch, N, N), np.nan)
                        bad = _inverse_rows(prob.jac, jac_rows, x, need, Jinv)
                    owned = True
                else:
                    if not owned:
                        Jinv = np.full((*batch, N, N), np.nan) if Jinv is None else Jinv.copy()
                        owned = True
                    bad = _inverse_rows(prob.jac, jac_rows, x, need, Jinv)
                n_jac += int(not given)
                valid |= need
                if bad is not None:  # singular Jacobian: that entry is not converged
                    valid &= ~bad
                    frozen |= bad
                    active &= ~bad
            with np.errstate(invalid="ignore", over="ignore"):
                dx = (Jinv @ F[..., None])[..., 0]
        else:
            if J is None:
                J = prob.jac(x)
                n_jac += 1
            try:
                dx = np.linalg.solve(J, F[..., None])[..., 0]
            except np.linalg.LinAlgError:  # find the singular entries, one by one
                dx = np.zeros_like(x)
                Jb = np.broadcast_to(J, (*batch, N, N))
                for i in zip(*np.nonzero(active)):
                    try:
                        dx[i] = np.linalg.solve(Jb[i][None], F[i][None, :, None])[0, :, 0]
                    except np.linalg.LinAlgError:
                        frozen[i] = True
                        active[i] = False
        x = x - dx if active.all() else np.where(active[..., None], x - dx, x)  # others stay
        F, J, n_new = prob.after_step(x, eager)
        n_jac += n_new
        r_new = _norm(F, batch)
        with np.errstate(invalid="ignore"):
            rate = r_new / np.maximum(r, 1e-300)
        r = r_new
        iters += active
        last_rate = np.where(active, rate, last_rate)
        if polish is not None:
            contracting = np.where(active, rate <= polish, contracting)
        if simplified:
            stale = active & (rate > refresh) & (r > thr)
            if stale.any():
                if not owned:
                    Jinv, owned = Jinv.copy(), True
                Jinv[stale] = np.nan
                valid &= ~stale
        stall = np.where(active, np.where(rate >= 1.0, stall + 1, 0), stall)
        frozen |= active & (stall >= max_stall)
    converged = r <= thr
    if not simplified or not valid.any():
        Jinv = None
    finite = last_rate[np.isfinite(last_rate)]
    return NewtonResult(
        x=x, converged=converged, iterations=it, residual=r,
        rate=float(finite.max()) if finite.size else float("nan"), tol=thr,
        jac_inv=Jinv, n_jac=n_jac,
    )


def _newton_single(prob, x, opts, scale, jac_inv0, simplified, want_inverse, f0, j0,
                   polish=None):
    """:func:`_newton_batch` for one unbatched system: the same rule with Python scalars
    (a single trajectory's step is dominated by per-call overhead) and LAPACK ``getrf`` /
    ``getrs`` called directly. Simplified Newton keeps the LU factors (~4 times cheaper than
    forming the inverse); a passed-in ``jac_inv0`` is used as an inverse, and the inverse is
    returned (formed from the factors) only when they were refreshed and ``want_inverse``."""
    thr = _threshold(opts, scale)
    eager = prob.eager and not simplified
    F, J, n_jac = prob.start(x, f0, j0, simplified, jac_inv0)
    r = float(np.abs(F).max()) if F.size else 0.0
    floor = thr
    if polish is not None:
        floor = max(_ROUNDOFF_FACTOR * _EPS * scale, opts.atol)
    Jinv = jac_inv0 if simplified else None
    stall = it = 0
    rate = float("nan")
    max_iter, refresh, max_stall = opts.max_iter, opts.refresh_rate, opts.max_stall
    lu = None  # (lu, piv) of the current Jacobian (simplified Newton)
    scalar = x.shape == (1,)
    while it < max_iter and r > floor and r < np.inf:  # r < inf: stops on inf and NaN
        if r <= thr and it > 0 and not rate <= polish:  # polish: on while it contracts
            break
        if simplified and Jinv is not None:
            dx = Jinv @ F
        else:
            if J is None and (lu is None or not simplified):
                J = prob.jac(x)
                n_jac += 1
            if scalar and not simplified:
                j = float(J[0, 0])
                if j == 0.0 or not np.isfinite(j):  # singular: not converged
                    break
                dx = F / j
            else:
                if lu is None or not simplified:
                    lu_, piv, info = _getrf(J)
                    if info != 0:  # singular Jacobian: not converged
                        break
                    lu = (lu_, piv)
                dx = _getrs(lu[0], lu[1], F)[0]
        it += 1
        x = x - dx
        F, J, n_new = prob.after_step(x, eager)
        n_jac += n_new
        r, rate, stall = _single_progress(F, r, stall)
        if simplified and rate > refresh and r > thr:
            Jinv = None
            lu = None
        if stall >= max_stall:
            break
    if simplified and lu is not None and want_inverse:
        inv_, info = _getri(lu[0], lu[1])
        Jinv = inv_ if info == 0 else None
    return _single_result(x, r, thr, it, rate, Jinv if simplified else None, n_jac, 0)


def _structured_batch(fun, make_solver, x, opts, scale, fallback) -> NewtonResult:
    """The structured strategy on a batch, per entry (issue 18): an entry's matrix is built
    at its own build point ``xb``, rebuilt (``xb`` moved to its iterate) when its own judged
    rate exceeds ``refresh_rate``; ``make_solver`` is elementwise, so the entries not rebuilt
    get bitwise their old matrix. An entry whose fresh matrix does not contract, or is
    singular (non-finite step), is set aside with its iterations left and finished by one
    fallback call at the end (budget per entry).

    The per-entry masks are updated only when some entry departs from the common case (all
    entries iterating, every matrix built, no entry stalling): Python flags say when, so that
    a batch whose entries all behave alike costs a few array operations per iteration."""
    batch = x.shape[:-1]
    thr = _threshold(opts, scale, batch)
    thr16 = 16.0 * thr
    F = fun(x)
    r = _norm(F, batch)
    # the max-norm; a NaN residual stays NaN inside the loop (it fails every comparison
    # as inf would: the entry stops) and is reported as inf
    norm = (lambda F: np.abs(F).max(axis=-1)) if x.shape[-1] else (lambda F: _norm(F, batch))
    max_iter, refresh, max_stall = opts.max_iter, opts.refresh_rate, opts.max_stall
    it = 0
    n_built = 0
    solve = None
    xb = None
    built = np.zeros(batch, bool)  # the entry has a matrix (at xb)
    all_built = False  # built.all()
    fresh = None  # entries whose matrix was built at the previous iterate (None: none)
    stall = None  # consecutive non-decreasing iterations per entry (None: all zero)
    out = np.zeros(batch, bool)  # frozen (stalled) or handed to the fallback
    any_out = False
    left = np.zeros(batch, np.int64)  # > 0: handed to the fallback with that many iterations
    to_fallback = np.zeros(batch, bool)
    # an iteration whose every rate is below lo (no entry over refresh_rate, none without
    # decrease) needs none of the per-entry bookkeeping below: one test says so
    lo = min(refresh, 1.0)
    while it < max_iter:
        active = (r > thr) & (r < np.inf)
        if any_out:
            active &= ~out
        n_active = np.count_nonzero(active)
        if not n_active:
            break
        all_active = n_active == active.size
        if not all_built:
            need = active & ~built
            if need.any():
                xn = x if xb is None or need.all() else np.where(need[..., None], x, xb)
                try:
                    solve_new = make_solver(xn)
                except np.linalg.LinAlgError:
                    # a make_solver that cannot tell which entry is singular: the entries
                    # being rebuilt go to the fallback (a solver that returns non-finite
                    # rows for its singular entries keeps this decision per entry, below)
                    to_fallback |= need
                    out |= need
                    any_out = True
                    left[need] = max_iter - it
                    active &= ~need
                    all_active = False
                    if not active.any():
                        break
                else:
                    solve, xb = solve_new, xn
                    n_built += 1
                    built |= need
                    all_built = bool(built.all())
                    fresh = need
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            dx = solve(F)
        if fresh is not None:
            singular = active & fresh & ~np.all(np.isfinite(dx), axis=-1)
            if singular.any():  # singular fresh matrix: that entry alone goes to the fallback
                to_fallback |= singular
                out |= singular
                any_out = True
                left[singular] = max_iter - it
                active &= ~singular
                built &= ~singular
                all_built = False
                all_active = False
                if not active.any():
                    break
        it += 1
        x = x - dx if all_active else np.where(active[..., None], x - dx, x)  # others stay
        F = fun(x)
        r_new = norm(F)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = r_new / np.maximum(r, 1e-300)
        if not (ratio >= lo).any():  # every entry contracts faster than refresh_rate
            r = r_new
            fresh = None
            if stall is not None:
                stall = np.where(active, 0, stall)
            continue
        # the matrix is judged on entries clear of the round-off floor (an entry within a
        # few units of the tolerance, whose rate is noise, needs no better matrix)
        over = (ratio > refresh) & (r > thr16) & (r_new > thr)
        if not all_active:
            over &= active
        r = r_new
        if over.any():
            if fresh is not None:
                give_up = over & fresh & (ratio < np.inf)
                to_fallback |= give_up
                out |= give_up
                any_out = any_out or bool(give_up.any())
                left[give_up] = max_iter - it
            built &= ~over
            all_built = False
        fresh = None
        worse = ratio >= 1.0  # the stall count of an active entry
        if not all_active:
            worse &= active
        if worse.any():
            stall = np.where(worse, (0 if stall is None else stall) + 1,
                             0 if stall is None else np.where(active, 0, stall))
            stuck = active & (stall >= max_stall)
            if stuck.any():
                out |= stuck
                any_out = True
        elif stall is not None:
            stall = np.where(active, 0, stall)
    if to_fallback.any():
        return _finish(fallback(x, np.where(to_fallback, left, 0)), it, n_built)
    return NewtonResult(x=x, converged=r <= thr, iterations=it,
                        residual=np.where(np.isnan(r), np.inf, r), rate=float("nan"), tol=thr,
                        n_structured=n_built)


def _structured_single(fun, make_solver, x, opts, scale, fallback) -> NewtonResult:
    """:func:`_structured_batch` for one unbatched system."""
    thr = _threshold(opts, scale)
    F = fun(x)
    r = float(np.abs(F).max())
    max_iter, refresh, max_stall = opts.max_iter, opts.refresh_rate, opts.max_stall
    it = 0
    stall = 0
    solve = None
    fresh = False  # solve was built at the previous iterate
    n_built = 0
    rate = float("nan")
    while it < max_iter:
        if not r > thr or not r < np.inf:
            break
        if solve is None:
            try:
                solve = make_solver(x)
            except np.linalg.LinAlgError:  # singular structured matrix
                return _finish(fallback(x, max_iter - it), it, n_built)
            fresh = True
            n_built += 1
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            dx = solve(F)
        if fresh and not np.all(np.isfinite(dx)):  # singular structured matrix
            return _finish(fallback(x, max_iter - it), it, n_built)
        it += 1
        x = x - dx
        F = fun(x)
        r_old = r
        r, ratio, stall = _single_progress(F, r, stall)
        # judged as in _structured_batch: only clear of the round-off floor
        rate = ratio if (r_old > 16.0 * thr) and (r > thr) else 0.0
        if rate > refresh:
            if fresh and rate < np.inf:
                return _finish(fallback(x, max_iter - it), it, n_built)
            solve = None
        fresh = False
        if stall >= max_stall:
            break
    return _single_result(x, r, thr, it, rate, None, 0, n_built)


def _single_progress(F: np.ndarray, r: float, stall: int) -> tuple[float, float, int]:
    """The bookkeeping after one Newton step of an unbatched system, in Python scalars.

    Parameters
    ----------
    F : ndarray (N,)
        The residual at the new iterate.
    r : float
        The residual's max-norm at the previous iterate.
    stall : int
        Consecutive steps that did not decrease the residual, before this one.

    Returns
    -------
    r_new : float
        ``max |F|`` (0 for an empty system).
    ratio : float
        ``r_new / r`` (``r`` bounded below by 1e-300).
    stall : int
        The count including this step (reset to 0 by a decrease).
    """
    r_new = float(np.abs(F).max()) if F.size else 0.0
    ratio = r_new / max(r, 1e-300)
    return r_new, ratio, (stall + 1 if ratio >= 1.0 else 0)


def _single_result(x: np.ndarray, r: float, thr: float, it: int, rate: float,
                   jac_inv: np.ndarray | None, n_jac: int, n_structured: int) -> NewtonResult:
    """The :class:`NewtonResult` of an unbatched solve; a NaN residual is reported as inf
    (not converged, and ordered above every tolerance)."""
    if r != r:
        r = float("inf")
    return NewtonResult(x=x, converged=np.bool_(r <= thr), iterations=it,
                        residual=np.float64(r), rate=rate, tol=np.float64(thr),
                        jac_inv=jac_inv, n_jac=n_jac, n_structured=n_structured)


def _finish(result: NewtonResult, it_before: int, n_built: int) -> NewtonResult:
    return attrs.evolve(result, iterations=result.iterations + it_before, n_structured=n_built)


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
        J = np.broadcast_to(jac(x), (*x.shape, N))[need]
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


def _lazy_fd(fun):
    """``fun_jac`` for a finite-difference Jacobian: the residual at the last point is
    cached, so asking for the Jacobian afterwards costs one (broadcast) call, and the
    Jacobian is only formed when Newton needs another update."""
    cache: dict = {"x": None, "F": None}

    def fun_jac(x, want):
        if cache["x"] is not None and cache["x"].shape == x.shape and np.array_equal(
                cache["x"], x):
            F = cache["F"]
        else:
            F = np.asarray(fun(x), dtype=float)
            cache["x"], cache["F"] = np.array(x), F
        return F, (fd_jacobian_of(fun, x) if want else None)

    return fun_jac


def _lstsq_step(J: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Least-squares/regular solution of J dx = F, batched."""
    if J.shape[-1] == J.shape[-2]:
        try:
            return np.linalg.solve(J, F[..., None])[..., 0]
        except np.linalg.LinAlgError:
            pass
    return np.einsum("...ij,...j->...i", np.linalg.pinv(J), F)


def _gauss_newton(fun, jac, x0, opts: NewtonOptions, damped: bool) -> NewtonResult:
    """Gauss–Newton for a consistent (possibly tall) system, batched; converged entries
    are frozen. With ``damped`` a backtracking line search on ``|F|_2`` (Armijo, halving up
    to ``2^-10``) globalizes the iteration; near a regular root the full step is always
    accepted, so the local convergence stays quadratic.

    The stopping test is on the step size, ``|dx|_inf <= tol (1 + |x|_inf)`` at a full
    step, the residual's size being unknown here: DSOCS's rows carry factors such as
    ``1/h^2`` and ``1/h^3`` whose round-off floor makes a residual test unattainable
    (docs' theory page "Scaled stopping test"). ``step`` of the result holds the last
    relative step size.
    """
    tol, max_iter = opts.tol, opts.max_iter
    x = np.array(x0, dtype=float, copy=True)
    batch = x.shape[:-1]
    done = np.zeros(batch, dtype=bool)
    rel = np.full(batch, np.inf)
    it = 0
    F = np.asarray(fun(x), dtype=float)
    n_jac = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        J = np.asarray(jac(x), dtype=float)
        n_jac += 1
        dx = _lstsq_step(J, F)
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
    return NewtonResult(x=x, converged=ok, iterations=it, residual=res, rate=float("nan"),
                        tol=np.full(batch, tol), n_jac=n_jac, step=rel)


def deflated(fun: Callable, jac: Callable, roots: list[np.ndarray], shift: float = 1.0,
             scale: float = 1.0, power: int = 2):
    """Deflated residual ``m(x) F(x)`` and its Jacobian, for root selection.

    ``m(x) = prod_k (1 / (|x - x_k| / scale)^power + shift)`` removes the known roots
    ``x_k`` (Farrell, Birkisson & Funke 2015), so that Newton from the same guess converges
    to a different root; used by the root-selection safeguard of DSOCS (paper §4.2,
    eqs. (8)–(10)). Returns ``(f, j)`` for :func:`newton_solve`.
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
