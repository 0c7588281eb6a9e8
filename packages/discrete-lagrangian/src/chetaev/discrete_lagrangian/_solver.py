"""The one Newton solver used by every implicit method of chetaev.

``newton_solve(fun, x0, jac=None, options=NewtonOptions(), scale=None)`` solves the
batched square system ``fun(x) = 0`` with ``x`` of shape ``(..., N)``: each leading index
is an independent problem (all solved with one ``np.linalg.solve`` call per iteration);
an entry stops moving once it has converged, so a batched solve gives the same iterates
as the single solves.

* Jacobian: analytic ``jac(x)`` → ``(..., N, N)``, or central finite differences in ONE
  call of ``fun`` with the 2N perturbations stacked on a new leading axis (``fun`` must
  therefore accept extra leading axes, which every broadcasting residual does).
* Convergence: ``max|fun(x)| ≤ max(tol, 64·eps) · scale`` (and ≥ ``atol``), where ``scale``
  is the magnitude of the terms that make up the residual (the caller knows it; e.g.
  ``|p| + h|W|``). The factor ``64·eps`` keeps the target above the round-off floor.
* Stall / divergence: the contraction rate ``r_{k+1}/r_k`` is monitored; an entry whose
  residual fails to decrease ``max_stall`` times in a row (or becomes non-finite) stops
  as not converged (scipy ``radau.solve_collocation_system`` does the same).
* Simplified Newton (``simplified=True``): the inverse Jacobian is kept while the rate
  stays below ``refresh_rate`` (and may be passed in from the previous step via
  ``jac_inv0``); it is recomputed otherwise.

Callers raise :class:`~chetaev.discrete_lagrangian.ConvergenceError` when the result is not
converged: they know the step and the time.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

__all__ = [
    "NewtonOptions",
    "NewtonResult",
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
    from ._errors import InputError

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
        Number of Jacobian evaluations.
    """

    x: np.ndarray
    converged: np.ndarray
    iterations: int
    residual: np.ndarray
    rate: float
    tol: np.ndarray
    jac_inv: np.ndarray | None = None
    n_jac: int = 0

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
    from ._errors import ConvergenceError

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


def _solve(J: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve J dx = -F per batch entry; return (dx, ok) with ok False where singular."""
    try:
        return -np.linalg.solve(J, F[..., None])[..., 0], np.ones(F.shape[:-1], dtype=bool)
    except np.linalg.LinAlgError:
        pass
    batch = F.shape[:-1]
    Jf = np.broadcast_to(J, batch + J.shape[-2:]).reshape((-1, *J.shape[-2:]))
    Ff = F.reshape((-1, F.shape[-1]))
    dx = np.zeros_like(Ff)
    ok = np.ones(Ff.shape[0], dtype=bool)
    for i in range(Ff.shape[0]):
        try:
            dx[i] = -np.linalg.solve(Jf[i], Ff[i])
        except np.linalg.LinAlgError:
            ok[i] = False
    return dx.reshape(F.shape), ok.reshape(batch)


def _inv(J: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    try:
        return np.linalg.inv(J), np.ones(J.shape[:-2], dtype=bool)
    except np.linalg.LinAlgError:
        Jf = J.reshape((-1, *J.shape[-2:]))
        out = np.zeros_like(Jf)
        ok = np.ones(Jf.shape[0], dtype=bool)
        for i in range(Jf.shape[0]):
            try:
                out[i] = np.linalg.inv(Jf[i])
            except np.linalg.LinAlgError:
                ok[i] = False
        return out.reshape(J.shape), ok.reshape(J.shape[:-2])


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
) -> NewtonResult:
    """Solve the batched square system ``fun(x) = 0`` by Newton's method.

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
        Inverse Jacobian from a previous solve (simplified Newton only).
    fun_jac : callable, optional
        ``fun_jac(x, want_jacobian)`` → ``(F, J or None)``: residual and Jacobian from one
        evaluation (shares the work); replaces ``fun`` and ``jac``.
    f0, j0 : ndarray, optional
        ``fun(x0)`` and the Jacobian at ``x0`` when the caller already has them.

    Returns
    -------
    NewtonResult
    """
    opts = options if options is not None else NewtonOptions()
    if fun_jac is None:
        if fun is None:
            from ._errors import InputError

            raise InputError("newton_solve needs `fun` or `fun_jac`.")
        use_fd = jac is None or opts.finite_differences
        if use_fd:
            fun_jac = _lazy_fd(fun)
        else:

            def fun_jac(x, want):
                F = np.asarray(fun(x), dtype=float)
                return F, (np.asarray(jac(x)) if want else None)

    elif opts.finite_differences:
        base = fun_jac
        fun_jac = _lazy_fd(lambda y: base(y, False)[0])
    lazy = bool(getattr(fun_jac, "lazy", False))

    x = np.array(x0, dtype=np.float64)
    batch = x.shape[:-1]
    if batch == () and not opts.simplified:
        return _newton_single(fun_jac, x, opts, scale, f0, j0, lazy)
    scale_arr = np.ones(batch) if scale is None else np.broadcast_to(
        np.asarray(scale, dtype=float), batch)
    thr = np.maximum(max(opts.tol, _ROUNDOFF_FACTOR * _EPS) * scale_arr, opts.atol)
    Jinv = jac_inv0 if opts.simplified else None
    want = Jinv is None and not lazy
    if f0 is not None:
        F, J = np.asarray(f0, dtype=float), j0
        n_jac = 0
    else:
        F, J = fun_jac(x, want)
        n_jac = int(want)
    if J is None and want and not opts.simplified:
        F, J = fun_jac(x, True)
        n_jac += 1
    r = _norm(F, batch)
    failed = ~np.isfinite(r)
    active = (r > thr) & ~failed
    stall = np.zeros(batch, dtype=int)
    iters = np.zeros(batch, dtype=int)
    rate = np.full(batch, np.nan)
    it = 0
    while np.any(active) and it < opts.max_iter:
        it += 1
        if opts.simplified:
            if Jinv is None:
                if J is None:
                    F, J = fun_jac(x, True)
                    n_jac += 1
                Jinv, ok = _inv(J)
                failed |= ~ok & active
                active &= ok
            dx = -np.einsum("...ij,...j->...i", Jinv, F)
        else:
            if J is None:  # lazy finite-difference Jacobian: only when an update is needed
                _, J = fun_jac(x, True)
                n_jac += 1
            dx, ok = _solve(J, F)
            failed |= ~ok & active
            active &= ok
        x_new = np.where(active[..., None], x + dx, x)
        want_new = not opts.simplified and not lazy
        F_new, J_new = fun_jac(x_new, want_new)
        n_jac += int(want_new)
        r_new = _norm(F_new, batch)
        bad = active & ~np.isfinite(r_new)
        failed |= bad
        upd = active & ~bad
        with np.errstate(divide="ignore", invalid="ignore"):
            rk = np.where(r > 0, r_new / r, 0.0)
        x = np.where(upd[..., None], x_new, x)
        F = np.where(upd[..., None], F_new, F)
        if J_new is not None:
            J = np.where(upd[..., None, None], J_new, J) if J is not None else J_new
        else:
            J = None
        r = np.where(upd, r_new, r)
        rate = np.where(upd, rk, rate)
        iters = iters + upd
        stall = np.where(upd & (rk >= 1.0), stall + 1, np.where(upd, 0, stall))
        active = upd & (r > thr) & (stall < opts.max_stall)
        if opts.simplified and np.any(upd & (rk > opts.refresh_rate) & (r > thr)):
            Jinv = None
    converged = (r <= thr) & ~failed
    finite_rates = rate[np.isfinite(rate)]
    return NewtonResult(
        x=x,
        converged=converged,
        iterations=int(np.max(iters)) if iters.size else 0,
        residual=r,
        rate=float(np.max(finite_rates)) if finite_rates.size else float("nan"),
        tol=thr,
        jac_inv=Jinv if opts.simplified else None,
        n_jac=n_jac,
    )


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

    fun_jac.lazy = True
    return fun_jac


def _newton_single(fun_jac, x, opts, scale, f0, j0, lazy=False) -> NewtonResult:
    """The same iteration as the batched loop for one problem, with Python scalars
    (the per-iteration overhead matters for small single-trajectory steps)."""
    sc = 1.0 if scale is None else float(np.asarray(scale))
    thr = max(max(opts.tol, _ROUNDOFF_FACTOR * _EPS) * sc, opts.atol)
    if f0 is not None and (j0 is not None or lazy):
        F, J = np.asarray(f0, dtype=float), j0
        n_jac = 0
    else:
        F, J = fun_jac(x, not lazy)
        n_jac = int(not lazy)
    r = float(np.max(np.abs(F))) if F.size else 0.0
    failed = not np.isfinite(r)
    it = stall = 0
    rate = float("nan")
    while not failed and r > thr and it < opts.max_iter and stall < opts.max_stall:
        it += 1
        if J is None:
            _, J = fun_jac(x, True)
            n_jac += 1
        if F.shape == (1,):
            j = float(J[0, 0])
            if j == 0.0 or not np.isfinite(j):
                failed = True
                break
            dx = F / j
        else:
            try:
                dx = np.linalg.solve(J, F)
            except np.linalg.LinAlgError:
                failed = True
                break
        x_new = x - dx
        F_new, J_new = fun_jac(x_new, not lazy)
        n_jac += int(not lazy)
        r_new = float(np.max(np.abs(F_new))) if F_new.size else 0.0
        if not np.isfinite(r_new):
            failed = True
            break
        rate = r_new / r if r > 0 else 0.0
        stall = stall + 1 if rate >= 1.0 else 0
        x, F, J, r = x_new, F_new, J_new, r_new
    return NewtonResult(
        x=x, converged=np.asarray(bool(r <= thr and not failed)), iterations=it,
        residual=np.asarray(r if np.isfinite(r) else np.inf), rate=rate, tol=np.asarray(thr),
        jac_inv=None, n_jac=n_jac)


def _norm(F: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    r = np.max(np.abs(F), axis=-1) if F.shape[-1] else np.zeros(batch)
    return np.where(np.isnan(r), np.inf, r)
