"""The integration driver: runs any method that implements the protocol.

A method is a :class:`~chetaev.discrete_lagrangian.Method` (DESIGN.md "The shared
protocol")::

    method.initial_state(system, q0, v0, t0=0.0) -> State   # checks and completes the data
    method.step(system, state, h) -> State                 # n + 1, t on the grid; raises on
                                                           # failure

with the declared class attributes ``name``, ``order``, ``symmetric``, the declaration of
what it guarantees::

    method.guarantees -> {"position": tol, "velocity": tol}   # constraint levels held at
                                                              # every node, solved to tol

and the post-step hook::

    method.check_step(system, previous, state, h) -> Warning | None

``integrate`` never looks inside a method: it loops, records every ``save_every``-th state
into preallocated arrays, and turns a :class:`ConvergenceError` into
``Trajectory(success=False, message=...)``.

**Time grid.** The driver puts the grid (t_ref, k_ref, h) on the state it starts from and
:meth:`Method.step` sets the time of node k from it, t_k = t_ref + (k − k_ref)·h (not by
accumulating t + h), so ``sol.t[-1] == t0 + n·h`` to rounding after any number of
steps. The grid (t_ref, k_ref, h) is kept in ``State.grid`` of the final state, so a run
continued from ``traj.final_state()`` with the same h stays on the same grid, bit for bit.

**Post-conditions.** After every step the driver checks, in this order:

1. finiteness and overflow: every entry of q, v, p, λ finite and the Euclidean norm of each
   below ``OVERFLOW_BOUND`` = √(largest float) ≈ 1.3e154 (beyond it the quadratic energy
   overflows; one ``vdot`` per field checks both);
2. the constraint residual, for each level the method lists in ``guarantees``
   (``"position"``: ``system.residual(q, v)``, i.e. Φ(q) for a holonomic constraint and
   Φ(q, v) for a velocity constraint; ``"velocity"``: ``system.velocity_residual(q, v)``):
   ``max|residual| ≤ POSTCONDITION_FACTOR · max(tol, 64·eps) · S²`` with
   ``S = max(1, max|q_0|, max|v_0|)`` taken from the state the run starts from (S² because
   the residuals of mechanical constraints are at most bilinear in (q, v); S is fixed for
   the run, so a blow-up whose residual is small *relative* to its own huge state still
   fails). ``POSTCONDITION_FACTOR`` = 1e4. Measured in normal runs, the largest ratio
   ``max|residual| / (max(tol, 64·eps)·S²)`` over every step of the discrete-lagrangian
   structure, Lie, discretization-map and broadcast tests and of the integration tests is
   2.8 (``LieDiscretizationMapMethod("euler_b")``; ConstrainedPRK 0.99, RATTLE 1.0, GNI
   3e-4, ReducedGNI 9e-4), so the factor leaves a margin of more than 3000, while a step
   beyond the stability limit (GNI at h = 3, 10, 100 on the nonholonomic particle) exceeds
   it within a few steps, long before an overflow;
3. ``method.check_step`` (a no-op unless the method overrides it).

A violation of 1 ends the run with ``success=False`` at the last good state and the
``MESSAGES["nonfinite"]`` or ``MESSAGES["overflow"]`` text; a violation of 2 raises
:class:`PostConditionError` (a :class:`ConvergenceError`) that names the step, the time and
the residual and suggests a smaller h, and, like a Newton failure, ends the run the same
way. ``check_step`` checks further method-specific post-conditions: a violation raises
:class:`ConvergenceError`, which fails the run at that step like a Newton failure. It may
instead return a :class:`Warning` instance (a diagnostic that does not invalidate the
step, such as a growing parasitic mode): the driver emits it with :func:`warnings.warn`,
once per warning class and run, and appends its text to ``Trajectory.message``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from .._util._errors import ConvergenceError, InputError, PostConditionError
from .._util._validation import as_float, as_int
from ..core._backend import resolve_backend
from ..core._method import Method
from ..core._state import State
from ..systems import _pickling  # noqa: F401  (registers the typed pickling errors of systems)
from ..systems._derivcheck import verify_before_first_step
from ._blas import limit_blas_for_batches
from ._trajectory import Trajectory

__all__ = ["MESSAGES", "OVERFLOW_BOUND", "POSTCONDITION_FACTOR", "integrate"]

#: A converged step fails when its constraint residual exceeds this multiple of the tolerance
#: the method guarantees (times the run's scale S², see the module docstring).
POSTCONDITION_FACTOR = 1e4
#: A state field whose Euclidean norm exceeds this (≈ 1.3e154, the square root of the largest
#: float) counts as an overflow: its square, e.g. in the kinetic energy, is not finite.
OVERFLOW_BOUND = float(np.sqrt(np.finfo(np.float64).max))
_vdot = np.vdot
_isfinite = math.isfinite
_EPS = float(np.finfo(np.float64).eps)

MESSAGES = {
    "success": "Integration finished: {n} steps of h = {h:g} to t = {t:.6g}.",
    "callback": "Stopped by the callback at step {n} (t = {t:.6g}).",
    "failed": "Step failed: {error}",
    "nonfinite": (
        "Step {n} (from t = {t:.6g}) produced non-finite values in {what}; the trajectory "
        "stops at the last finite state. Try: halve h (the method may be unstable at this step "
        "size) or check the system's callables for overflow."
    ),
    "overflow": (
        "Step {n} (from t = {t:.6g}) produced values of norm above {bound:.1e} in {what} "
        "(overflow: the method is unstable at this step size); the trajectory stops at the "
        "last good state. Try: halve h."
    ),
}

_FIELDS = ("q", "v", "p", "lam")


class _Recorder:
    """Saved nodes written into arrays preallocated for the whole run (lean storage).

    A field whose shape changes during the run (a method that does so) falls back to a
    list of rows, stacked at the end.
    """

    def __init__(self, state: State, capacity: int) -> None:
        self.t = np.empty(capacity)
        self.k = 0
        self.buffers: dict[str, Any] = {}
        for name in _FIELDS:
            x = getattr(state, name)
            if x is None:
                self.buffers[name] = None
            else:
                x = np.asarray(x)
                self.buffers[name] = np.empty((capacity, *x.shape), dtype=np.result_type(x, float))
        self.record(state)

    def record(self, state: State) -> None:
        k = self.k
        self.t[k] = state.t
        for name in _FIELDS:
            buf = self.buffers[name]
            x = getattr(state, name)
            if buf is None and x is None:
                continue
            if type(buf) is np.ndarray and x is not None and np.shape(x) == buf.shape[1:]:
                buf[k] = x
            else:
                self._fallback(name, x, k)
        self.k = k + 1

    def _fallback(self, name: str, x: Any, k: int) -> None:
        buf = self.buffers[name]
        if isinstance(buf, np.ndarray):
            buf = list(buf[:k])
        elif buf is None:
            buf = [None] * k
        buf.append(None if x is None else np.asarray(x))
        self.buffers[name] = buf

    def arrays(self) -> dict[str, Any]:
        k, cap = self.k, self.t.shape[0]
        out: dict[str, Any] = {"t": self.t[:k] if k == cap else self.t[:k].copy()}
        for name, buf in self.buffers.items():
            if isinstance(buf, np.ndarray):
                out[name] = buf if k == cap else buf[:k].copy()
            elif buf is None:
                out[name] = None
            else:
                out[name] = _stack(buf)
        return out


def _too_big(state: State) -> list[tuple[str, float]]:
    """The fields of ``state`` with a non-finite entry or whose squared norm overflows
    (one reduction per field: ``vdot(x, x)`` is finite iff every entry is finite and the
    Euclidean norm is below ``OVERFLOW_BOUND``)."""
    out = []
    for name in _FIELDS:
        x = getattr(state, name)
        if x is not None and not _isfinite(_vdot(x, x)):
            x = np.asarray(x)
            out.append((name, float(np.abs(x).max()) if np.all(np.isfinite(x)) else np.inf))
    return out


def _stack(items: list[Any]) -> np.ndarray | None:
    if any(x is None for x in items):
        return None
    return np.stack([np.asarray(x) for x in items])


def _constraint_checks(method: Any, system: Any, state: State) -> list[tuple[str, Any, float]]:
    """(level name, residual function, bound) for each level the method guarantees."""
    claims = method.guarantees or {}
    levels = {"position": "residual", "velocity": "velocity_residual"}
    checks = []
    scale = max(1.0, float(np.abs(np.asarray(state.q)).max(initial=0.0)),
                float(np.abs(np.asarray(state.v)).max(initial=0.0)))
    for level, tol in claims.items():
        if level not in levels:
            raise InputError(
                f"{type(method).__name__}.guarantees names the level {level!r}; the driver "
                f"knows {sorted(levels)}."
            )
        fun = getattr(system, levels[level], None)
        if fun is None or not hasattr(system, "constraint"):
            continue
        bound = POSTCONDITION_FACTOR * max(float(tol), 64.0 * _EPS) * scale * scale
        checks.append((f"{level} constraint residual", fun, bound))
    return checks


def _mismatch(system: Any, method: Any, err: Exception) -> InputError:
    name = method.name
    return InputError(
        f"`method` {name} cannot integrate this `system` ({type(system).__name__}): "
        f"{type(err).__name__}: {err}. Pass a system of the kind the method integrates "
        "(see its docstring; e.g. a DSOCS runs with DSOCSIntegrator, a ConstrainedSystem with "
        "a velocity constraint with chetaev.nh_integrators or GNI)."
    )


def _start_on_constraints(checks: list[tuple[str, Any, float]], state: State) -> None:
    """A State passed as ``q0`` must satisfy what the method guarantees on *this* system
    (a state saved from another system fails here instead of running on)."""
    for what, fun, bound in checks:
        r = float(np.max(np.abs(fun(state.q, state.v)), initial=0.0))
        if not r <= bound:
            raise InputError(
                f"`q0` is a State whose {what} on this system is {r:.2e} > {bound:.1e}: it "
                "does not lie on this system's constraint set. Was it computed with another "
                "system? Continue a run only on the system it was computed with."
            )


def _grid(state: State, h: float) -> tuple[float, int, float]:
    """The time grid (t_ref, n_ref, h) the run continues on (module docstring)."""
    g = state.grid
    if g is not None and g[2] == h:
        return (float(g[0]), int(g[1]), float(g[2]))
    return (float(state.t), int(state.n), h)


def _system_kind_check(system: Any, method: Any, state: State) -> None:
    """A State passed as ``q0`` must fit the system: its data must be finite and pass the
    method's own initial-data checks (shapes, group membership, the constraint set) on this
    system. Skipped for a method that declares ``guarantees = {}`` (its nodes leave the
    constraint set by design, e.g. ``StageConstrainedBaseline``)."""
    for name in _FIELDS:
        x = getattr(state, name)
        if x is not None and not np.all(np.isfinite(np.asarray(x, dtype=float))):
            raise InputError(f"`q0` is a State whose `{name}` holds NaN or inf.")
    if method.guarantees == {}:
        return
    try:
        method.initial_state(system, state.q, state.v, state.t)
    except (AttributeError, TypeError) as err:
        raise _mismatch(system, method, err) from err
    except InputError as err:
        raise type(err)(
            f"`q0` is a State that does not fit this {type(system).__name__}: {err} Continue "
            "a run only on the system it was computed with."
        ) from err


@limit_blas_for_batches
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
    controls: Any = None,
) -> Trajectory:
    """Integrate ``system`` with ``method`` using the fixed step ``h``.

    Parameters
    ----------
    system : system
        A system from :mod:`chetaev.discrete_lagrangian.systems` (or another package).
    method : Method
        An integrator: a :class:`~chetaev.discrete_lagrangian.Method` (every integrator of
        every chetaev package is one).
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
    controls : array_like, optional
        Piecewise-constant controls ``U`` of shape ``(n_steps, ..., n_controls)`` for a
        system built with ``force=`` and ``n_controls``: step k (from node k to k + 1) uses
        ``U[k]`` (passed as ``method.step(..., u=U[k])``); the middle axes broadcast to the
        batch of ``q0``. ``U[0]`` also goes to ``method.initial_state(..., u=)`` (e.g. the
        consistent λ₀ of a forced constrained system). Recorded in ``Trajectory.controls``
        (the steps taken). Methods with ``supports_forces`` only: every integrator of
        the project (a method written elsewhere declares it).

    Returns
    -------
    Trajectory
        ``t, q, v, p, lam`` with the time axis first, ``success``, ``message``, ``stats``
        (``n_steps``; ``newton_iterations`` and ``max_newton_iterations`` summed/maximized
        over the steps' ``info``; ``max_residual``; ``n_rejected``, the number of roots a
        root-selection safeguard rejected, from ``info["rejected_roots"]`` (e.g. DSOCS);
        ``fd_second_derivatives``; ``wall_time_s``; ``max_constraint_residual``, the largest
        post-condition residual, when the method declares ``guarantees``). ``t`` holds the
        grid times t0 + k·h exactly.

    Raises
    ------
    InputError
        Bad arguments, bad initial data (raised by ``method.initial_state``), a method that
        cannot integrate this kind of system, or a State ``q0`` that does not fit the system;
        ``controls`` of a wrong shape (vs ``n_steps``, the batch, ``n_controls``), not finite,
        or given for a system without force; a forced system given to a method without
        forces (:class:`~chetaev.discrete_lagrangian.core._method.ForcesNotSupportedError`).
    """
    if h is None:
        raise InputError(
            "`h` (the step size) is required: integrate(system, method, q0, v0, h=...)."
        )
    h = as_float(h, "h", positive=True)
    save_every = as_int(save_every, "save_every", minimum=1)
    if (t_final is None) == (n_steps is None):
        raise InputError("Give exactly one of `t_final` and `n_steps`.")
    if not isinstance(method, Method):
        raise InputError(
            f"`method` must be an integrator, a chetaev.discrete_lagrangian.Method with "
            f"initial_state(system, q0, v0, t0) and step(system, state, h) (e.g. "
            f"VPRK(gauss(2))); got {type(method).__name__}. To integrate with your own "
            "method, subclass Method (docs: architecture, 'How to add a method')."
        )
    if callback is not None and not callable(callback):
        raise InputError(f"`callback` must be callable callback(state), got {callback!r}.")
    if isinstance(q0, State):
        state = q0
        _system_kind_check(system, method, state)
        if v0 is not None:
            raise InputError(
                "`v0` must be None when `q0` is a State (the State holds the velocity); "
                "call integrate(system, method, traj.final_state(), None, h=...)."
            )
    else:
        t0 = as_float(t0, "t0")
        for name, x in (("q0", q0), ("v0", v0)):
            if x is not None and np.iscomplexobj(x):
                raise InputError(
                    f"`{name}` must be real, got a complex array; pass its real part "
                    f"(np.real({name})) if the imaginary part is zero."
                )
        verify_before_first_step(system, q0, v0)  # user callables and derivatives, once
        try:
            state = method.initial_state(system, q0, v0, t0)
        except (AttributeError, TypeError) as err:
            raise _mismatch(system, method, err) from err
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
    U = _check_controls(system, method, controls, n_steps, state)
    if U is not None and n_steps and not isinstance(q0, State):
        # the first control is known: the initial data of the forced equations (e.g. the
        # consistent multiplier λ₀ of a forced constrained system)
        state = method.initial_state(system, q0, v0, state.t, u=U[0])
    grid = _grid(state, h)

    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_steps)
        except ImportError:  # pragma: no cover - optional dependency
            bar = None

    total_it = 0
    n_rejected = 0
    max_it = 0
    max_res = 0.0
    compiled_steps = 0  # steps that report info["backend"] == "numba"
    success, message = True, ""
    wall = time.perf_counter()
    last_saved = 0
    k = 0
    stopped = False
    check_step = (None if type(method).check_step is Method.check_step
                  else method.check_step)
    constraint_checks = _constraint_checks(method, system, state)
    if isinstance(q0, State):
        _start_on_constraints(constraint_checks, state)
    max_constraint = 0.0
    notes: list[str] = []
    warned: set[type] = set()
    plan = resolve_backend(method, system)  # issue 17: the compiled path, or None (numpy)
    if plan is not None and U is None and callback is None and bar is None:
        return _compiled_loop(system, method, plan, state, h, n_steps, save_every, grid,
                              constraint_checks, wall)
    if state.grid != grid:  # Method.step puts node k on the grid: t_k = t_ref + (k − k_ref)·h
        state = attrs.evolve(state, grid=grid)
    rec = _Recorder(state, n_steps // save_every + 1 + (n_steps % save_every != 0))
    for k in range(1, n_steps + 1):
        try:
            new = (method.step(system, state, h) if U is None
                   else method.step(system, state, h, u=U[k - 1]))
        except (AttributeError, TypeError) as err:
            if k == 1 and isinstance(q0, State):  # a State from another kind of system
                raise _mismatch(system, method, err) from err
            raise
        except ConvergenceError as err:
            success = False
            message = MESSAGES["failed"].format(error=err)
            k -= 1
            break
        big = _too_big(new)
        if big:  # nothing returns NaN (or an overflowing state) silently
            success = False
            if all(np.isfinite(m) for _, m in big):
                message = MESSAGES["overflow"].format(
                    n=state.n, t=state.t, bound=OVERFLOW_BOUND,
                    what=", ".join(name for name, _ in big))
            else:
                message = MESSAGES["nonfinite"].format(
                    n=state.n, t=state.t,
                    what=", ".join(name for name, m in big if not np.isfinite(m)))
            k -= 1
            break
        try:
            for what, fun, bound in constraint_checks:
                res_c = np.asarray(fun(new.q, new.v))
                r = float(np.abs(res_c).max()) if res_c.size else 0.0
                if not r <= bound:
                    raise PostConditionError(step=state.n, t=state.t, residual=r, tol=bound,
                                             what=what)
                max_constraint = max(max_constraint, r)
            note = check_step(system, state, new, h) if check_step is not None else None
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
        info = state.info
        it = int(info.get("newton_iterations", 0))
        total_it += it
        if it > max_it:
            max_it = it
        res = float(info.get("residual", 0.0))
        if res > max_res:
            max_res = res
        n_rejected += int(info.get("rejected_roots", 0))
        compiled_steps += info.get("backend") == "numba"
        if k % save_every == 0:
            rec.record(state)
            last_saved = k
        if bar is not None:
            bar.update(1)
        if callback is not None and callback(state):
            stopped = True
            break
    if last_saved != k and k > 0:
        rec.record(state)
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
        # compiled when the method has a plan, or when every step ran compiled (a
        # composition whose members have compiled steps)
        "backend": "numba" if plan is not None or 0 < k == compiled_steps else "numpy",
    }
    if constraint_checks:
        stats["max_constraint_residual"] = max_constraint
    arrays = rec.arrays()
    return Trajectory(
        **arrays,
        success=success,
        message=message,
        stats=stats,
        system=system,
        method=str(method.name),
        h=h,
        final=attrs.evolve(state, grid=grid),
        controls=None if U is None else U[:k],
    )


def _compiled_loop(system: Any, method: Any, plan: Any, state: State, h: float, n_steps: int,
                   save_every: int, grid: tuple, checks: list, wall: float) -> Trajectory:
    """The run of :func:`integrate` with the loop over the steps compiled (issue 17): the
    same saved nodes, post-conditions (finiteness and overflow, the guaranteed constraint
    level), messages and stats as the Python loop."""
    from ..core._compiled_prk import run_compiled

    bound = min((b for _, _, b in checks), default=math.inf)
    what = checks[0][0] if checks else ""
    run = getattr(plan, "run", None)  # a plan with its own loop (the Lie engine)
    out = (run(state, h, n_steps, save_every, bound) if run is not None
           else run_compiled(plan, state, h, n_steps, save_every, bound))
    k = out["done"]
    t_ref, n_ref, _ = grid
    n0 = state.n
    steps = np.arange(0, k + 1, save_every)
    if steps[-1] != k:
        steps = np.append(steps, k)
    t = t_ref + (n0 + steps - n_ref) * h
    t[0] = state.t
    fin = out["final"]
    t_last = t_ref + (n0 + k - n_ref) * h if k else state.t
    # the method's carry of the last node, where the plan's run returns one (the reduced
    # GNI's group element and last increment)
    final = State(t=t_last, q=fin["q"], v=fin["v"], p=fin["p"], lam=fin["lam"], n=n0 + k,
                  grid=grid, carry=dict(out.get("carry") or {}), info={})
    success, status = out["status"] == 0, out["status"]
    t_fail = t_ref + (n0 + k - n_ref) * h if k else state.t
    if status == 1:
        r, tol, it = out["fail"]
        err = ConvergenceError(step=n0 + k, t=t_fail, residual=r, tol=tol, iterations=it,
                               hint="halve h, or increase NewtonOptions(max_iter=...)")
        message = MESSAGES["failed"].format(error=err)
    elif status == 2:
        message = MESSAGES["nonfinite"].format(n=n0 + k, t=t_fail, what="q, v, p or lam")
    elif status == 3:
        err = PostConditionError(step=n0 + k, t=t_fail, residual=out["fail"][0], tol=bound,
                                 what=what)
        message = MESSAGES["failed"].format(error=err)
    else:
        message = MESSAGES["success"].format(n=k, h=h, t=final.t)
    its = out["its"]
    stats = {
        "n_steps": k,
        "newton_iterations": int(its.sum()),
        "max_newton_iterations": int(its.max()) if its.size else 0,
        "max_residual": float(out["res"].max()) if its.size else 0.0,
        "n_rejected": 0,
        "fd_second_derivatives": bool(getattr(system, "fd_second_derivatives", False)),
        "wall_time_s": time.perf_counter() - wall,
        "backend": "numba",
    }
    if checks:
        stats["max_constraint_residual"] = float(out["cres"].max()) if its.size else 0.0
    return Trajectory(
        t=t, q=out["q"], v=out["v"], p=out["p"], lam=out["lam"],
        success=success, message=message, stats=stats, system=system,
        method=str(method.name), h=h, final=final, controls=None,
    )


def _check_controls(system: Any, method: Any, controls: Any, n_steps: int,
                    state: State) -> np.ndarray | None:
    """``controls`` as a float array ``(n_steps, ..., n_controls)`` (None when not given)."""
    forced = getattr(system, "has_force", False) is True
    m = int(getattr(system, "n_controls", 0) or 0) if forced else 0
    if controls is None:
        if m:
            raise InputError(
                f"The system has n_controls={m}: pass controls=U of shape (n_steps, ..., {m}) "
                "(step k uses U[k])."
            )
        return None
    if not forced:
        raise InputError(
            "`controls` was given but the system has no external force: build it with "
            "force=callable(q, v, u) and n_controls=..., or drop `controls`."
        )
    if not getattr(method, "supports_forces", False):
        raise InputError(
            f"`controls` was given to {method.name}, which does not take external forces "
            "(supports_forces is False); every integrator of chetaev does, e.g. VPRK, "
            "ConstrainedPRK, NonholonomicPRK, LieVPRK, chetaev.gni.GNI or a discretization map."
        )
    from .._util._validation import real_array

    U = real_array(controls, "controls")
    if U.ndim < 2 or U.shape[0] != n_steps or U.shape[-1] != m:
        raise InputError(
            f"`controls` must have shape (n_steps, ..., n_controls) = ({n_steps}, ..., {m}) "
            f"(one control per step; the system's n_controls={m}), got shape {U.shape}."
        )
    if not np.all(np.isfinite(U)):
        bad = int(U.size - np.count_nonzero(np.isfinite(U)))
        raise InputError(f"`controls` must be finite, but {bad} of its entries are NaN or inf.")
    from ..core._method import configuration_ndim

    q = np.asarray(state.q)
    qb = q.shape[: q.ndim - configuration_ndim(system)]
    try:
        ok = np.broadcast_shapes(qb, U.shape[1:-1]) == qb
    except ValueError:
        ok = False
    if not ok:
        raise InputError(
            f"`controls` of shape {U.shape} do not broadcast to the batch {qb} of `q0`: "
            f"pass shape (n_steps, *batch, {m}) (or (n_steps, {m}) for every member)."
        )
    return U
