"""The integration driver: runs any method that implements the protocol.

A method implements (DESIGN.md "The shared protocol")::

    method.initial_state(system, q0, v0, t0=0.0) -> State   # checks and completes the data
    method.step(system, state, h) -> State                 # n + 1, t + h; raises on failure

and optionally ``method.order``, ``method.name`` and the post-step hook::

    method.check_step(system, previous, state, h) -> Warning | None

``integrate`` never looks inside a method: it loops, records every ``save_every``-th state,
and turns a :class:`ConvergenceError` into ``Trajectory(success=False, message=...)``.

``check_step`` is called after every converged, finite step. It checks what the method
guarantees of the new state (post-conditions): a violation raises
:class:`ConvergenceError`, which fails the run at that step like a Newton failure. It may
instead return a :class:`Warning` instance (a diagnostic that does not invalidate the step,
such as a growing parasitic mode): the driver emits it with :func:`warnings.warn`, once per
warning class and run, and appends its text to ``Trajectory.message``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ._derivcheck import verify_before_first_step
from ._errors import ConvergenceError, InputError
from ._state import State
from ._trajectory import Trajectory
from ._validation import as_float, as_int

__all__ = ["MESSAGES", "integrate"]

MESSAGES = {
    "success": "Integration finished: {n} steps of h = {h:g} to t = {t:.6g}.",
    "callback": "Stopped by the callback at step {n} (t = {t:.6g}).",
    "failed": "Step failed: {error}",
    "nonfinite": (
        "Step {n} (from t = {t:.6g}) produced non-finite values in {what}; the trajectory "
        "stops at the last finite state. Try: halve h (the method may be unstable at this step "
        "size) or check the system's callables for overflow."
    ),
}


def _stack(items: list[Any]) -> np.ndarray | None:
    if any(x is None for x in items):
        return None
    return np.stack([np.asarray(x) for x in items])


def integrate(
    system: Any,
    method: Any,
    q0: Any,
    v0: Any = None,
    h: float | None = None,  # type: ignore[assignment]
    t_final: float | None = None,
    n_steps: int | None = None,
    progress: bool = False,
    callback: Callable[[State], Any] | None = None,
    save_every: int = 1,
    t0: float = 0.0,
) -> Trajectory:
    """Integrate ``system`` with ``method`` using the fixed step ``h``.

    Parameters
    ----------
    system : system
        A system from :mod:`chetaev.discrete_lagrangian.systems` (or another package).
    method : integrator
        An integrator implementing ``initial_state`` / ``step``.
    q0, v0 : array_like
        Initial configuration and velocity; leading batch axes run an ensemble as one
        vectorized computation. ``q0`` may instead be a :class:`State` (e.g.
        ``traj.final_state()``) to continue a run bit-for-bit; ``v0`` is then ignored.
    h : float
        Step size (> 0).
    t_final, n_steps : float, int
        Exactly one; ``t_final - t0`` must be a multiple of ``h``.

    Other Parameters
    ----------------
    progress : bool
        Show a tqdm bar if tqdm is installed.
    callback : callable, optional
        ``callback(state)`` after every step; a truthy return value stops the run.
    save_every : int
        Keep every k-th state (the final state is always kept).
    t0 : float
        Initial time (ignored when ``q0`` is a State).

    Returns
    -------
    Trajectory
        ``t, q, v, p, lam`` with the time axis first, ``success``, ``message``, ``stats``
        (``n_steps``; ``newton_iterations`` and ``max_newton_iterations`` summed/maximized
        over the steps' ``info``; ``max_residual``; ``n_rejected``, the number of roots a
        root-selection safeguard rejected, from ``info["rejected_roots"]`` (e.g. DSOCS);
        ``fd_second_derivatives``; ``wall_time_s``).

    Raises
    ------
    InputError
        Bad arguments, or bad initial data (raised by ``method.initial_state``).
    """
    if h is None:
        raise InputError(
            "`h` (the step size) is required: integrate(system, method, q0, v0, h=...)."
        )
    h = as_float(h, "h", positive=True)
    save_every = as_int(save_every, "save_every", minimum=1)
    if (t_final is None) == (n_steps is None):
        raise InputError("Give exactly one of `t_final` and `n_steps`.")
    if isinstance(q0, State):
        state = q0
    else:
        t0 = as_float(t0, "t0")
        verify_before_first_step(system, q0, v0)  # user callables and derivatives, once
        state = method.initial_state(system, q0, v0, t0)
    if n_steps is None:
        span = as_float(t_final, "t_final") - state.t
        n_float = span / h
        n_steps = round(n_float)
        if n_steps < 0 or abs(n_steps - n_float) > 1e-9 * max(1.0, abs(n_float)):
            raise InputError(
                f"t_final - t0 = {span:g} is not a non-negative integer multiple of h = {h:g}; "
                "pass n_steps=... or adjust t_final."
            )
    n_steps = as_int(n_steps, "n_steps", minimum=0)

    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_steps)
        except ImportError:  # pragma: no cover - optional dependency
            bar = None

    ts, qs, vs, ps, lams = [state.t], [state.q], [state.v], [state.p], [state.lam]
    total_it = 0
    n_rejected = 0
    max_it = 0
    max_res = 0.0
    success, message = True, ""
    wall = time.perf_counter()
    last_saved = 0
    k = 0
    stopped = False
    check_step = getattr(method, "check_step", None)
    notes: list[str] = []
    warned: set[type] = set()
    for k in range(1, n_steps + 1):
        try:
            new = method.step(system, state, h)
        except ConvergenceError as err:
            success = False
            message = MESSAGES["failed"].format(error=err)
            k -= 1
            break
        bad = [name for name, x in (("q", new.q), ("v", new.v), ("p", new.p), ("lam", new.lam))
               if x is not None and not np.all(np.isfinite(x))]
        if bad:  # nothing returns NaN silently
            success = False
            message = MESSAGES["nonfinite"].format(n=state.n, t=state.t, what=", ".join(bad))
            k -= 1
            break
        if check_step is not None:
            try:
                note = check_step(system, state, new, h)
            except ConvergenceError as err:
                success = False
                message = MESSAGES["failed"].format(error=err)
                k -= 1
                break
            if note is not None and type(note) not in warned:
                warned.add(type(note))
                warnings.warn(note, stacklevel=2)
                notes.append(str(note))
        state = new
        it = state.info.get("newton_iterations", 0)
        total_it += int(it)
        max_it = max(max_it, int(it))
        max_res = max(max_res, float(state.info.get("residual", 0.0)))
        n_rejected += int(state.info.get("rejected_roots", 0))
        if k % save_every == 0:
            ts.append(state.t)
            qs.append(state.q)
            vs.append(state.v)
            ps.append(state.p)
            lams.append(state.lam)
            last_saved = k
        if bar is not None:
            bar.update(1)
        if callback is not None and callback(state):
            stopped = True
            break
    if last_saved != k and k > 0:
        ts.append(state.t)
        qs.append(state.q)
        vs.append(state.v)
        ps.append(state.p)
        lams.append(state.lam)
    if bar is not None:
        bar.close()
    if success:
        message = (MESSAGES["callback"] if stopped else MESSAGES["success"]).format(
            n=k, h=h, t=state.t)
    if notes:
        message = " ".join([message, *notes])
    stats = {
        "n_steps": k,
        "newton_iterations": total_it,
        "max_newton_iterations": max_it,
        "max_residual": max_res,
        "n_rejected": n_rejected,
        "fd_second_derivatives": bool(getattr(system, "fd_second_derivatives", False)),
        "wall_time_s": time.perf_counter() - wall,
    }
    return Trajectory(
        t=np.asarray(ts, dtype=float),
        q=np.stack([np.asarray(x) for x in qs]),
        v=np.stack([np.asarray(x) for x in vs]),
        p=_stack(ps),
        lam=_stack(lams),
        success=success,
        message=message,
        stats=stats,
        system=system,
        method=str(getattr(method, "name", type(method).__name__)),
        h=h,
        final=state,
    )
