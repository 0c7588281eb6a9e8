"""The compiled DSOCS step (issue 17): the solve of eq. (4) (Theorem 3.3) in numba.

The compiled twin of the square branch of :meth:`DSOCSIntegrator.solve` (unforced, no
problem-specific ``solver``, no ``root_filter``): given (q_{k−1}, q_k), solve

    [g(q_{k−1}, q_k, q_{k+1}); E·(D2L_d(q_{k−1}, q_k) + D1L_d(q_k, q_{k+1}))] = 0   (eq. (4))

for q_{k+1} with the same unknowns, the same initial guess 2q_k − q_{k−1}, the same rows
normalized by their sensitivity ``w_i = 1/Σ_j |∂F_i/∂q2_j|(1 + |q_k,j|)`` at the guess, the
same stopping rule (the one compiled Newton driver ``NEWTON`` of
``chetaev.discrete_lagrangian.extending``: the rule of ``newton_solve``, full Newton,
threshold ``max(tol, 64 eps)``) and the same single polishing step of the unnormalized
equations after convergence, so that both backends land on the root to round-off.

The system's part is numba source (``DSOCS(compiled_kernels=...)``): two kernels

``dsocs_residual(q0, q1, q2, h, out)``
    eq. (4) stacked, ``out`` of ``DSOCS_SHAPE[1]`` rows;
``dsocs_jacobian_q2(q0, q1, q2, h, out)``
    its derivative in q2, ``(rows, n)``;

and the constant ``DSOCS_SHAPE = (n, rows)``. They are evaluated in plain Python at several
seeded points when the DSOCS is built and compared with the DSOCS's own ``residual`` and
``jacobian_q2`` (:func:`check_kernels`): a kernel computing something else is an error, not
a silent divergence of the two backends. :func:`chetaev.dsocs.curvature_particle_dsocs`
writes them for the particle of §4.1.2 (eqs. (6)–(7)).

The generated module holds the kernels, the LU pieces ``LINALG``, the driver ``NEWTON``, the
batch drivers ``BATCH_DRIVERS`` and this step (``_eval``, ``_scale``, ``_dsocs_solve``,
``_run_one``); its work arrays are carrays of one buffer (``_take``, as the PRK hooks). A
step that does not converge returns a status; the Python side then reruns the step on the
numpy path, which tries its deflated restarts (paper §4.2, eqs. (8)–(10)) and otherwise
raises :class:`~chetaev.dsocs.DSOCSConvergenceError` naming the step, time and residual.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import attrs
import numpy as np

from ._errors import DSOCSInputError

__all__ = [
    "DSOCS_STEP",
    "KERNEL_NAMES",
    "DSOCSPlan",
    "check_kernels",
    "dsocs_plan",
    "kernel_shape",
]

_EPS = float(np.finfo(np.float64).eps)

#: The functions a ``DSOCS(compiled_kernels=...)`` source defines (with ``DSOCS_SHAPE``).
KERNEL_NAMES = ("dsocs_residual", "dsocs_jacobian_q2")

#: The compiled step: constants ``N`` (= n) and ``M`` (rows of eq. (4), = n) of the header.
DSOCS_STEP = '''
@njit(cache=True)
def _eval(mode, ctx, x, R, J, jac):
    # NEWTON's evaluation: the rows of eq. (4) at q2 = x times their weights w, or with jac
    # their derivative in q2
    q0, q1, h, w = ctx
    if jac:
        dsocs_jacobian_q2(q0, q1, x, h, J)
        for r in range(M):
            for c in range(N):
                J[r, c] *= w[r]
        return
    dsocs_residual(q0, q1, x, h, R)
    for r in range(M):
        R[r] *= w[r]


@njit(cache=True)
def _scale(mode, ctx, x):
    # the rows are normalized: the tolerance is absolute in them (newton_solve's scale 1)
    return 1.0


@njit(cache=True)
def _dsocs_solve(q0, q1, h, x, R, J, piv, dx, w, tolf, atol, max_iter, refresh, max_stall):
    # eq. (4) for q2 = x from the guess 2 q1 - q0, rows normalized at the guess by
    # sum_j |dF_i/dq2_j| (1 + |q1_j|); after convergence one polishing Newton step of the
    # unnormalized rows (kept when finite). Returns (converged, r, thr, iterations).
    for c in range(N):
        x[c] = 2.0 * q1[c] - q0[c]
    dsocs_jacobian_q2(q0, q1, x, h, J)
    for r in range(M):
        acc = 0.0
        for c in range(N):
            acc += abs(J[r, c]) * (1.0 + abs(q1[c]))
        w[r] = 1.0 / max(acc, 1e-300)
    ctx = (q0, q1, h, w)
    r, thr, it = _newton(0, ctx, x, R, J, piv, dx, tolf, 0.0, atol, -1.0, max_iter, refresh,
                         max_stall, False)
    if not (r <= thr):
        return False, r, thr, it
    dsocs_residual(q0, q1, x, h, R)
    dsocs_jacobian_q2(q0, q1, x, h, J)
    if _lu_factor(J, piv):
        _lu_solve(J, piv, R, dx)
        ok = True
        for c in range(N):
            if not (abs(dx[c]) < math.inf):
                ok = False
        if ok:
            for c in range(N):
                x[c] -= dx[c]
            it += 1
    return True, r, thr, it


@njit(cache=True)
def _run_one(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
             refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out, mem):
    # one member of the two-step recursion: q0 = q_{k-1}, v0 = q_k (the carried next node);
    # each step solves eq. (4) for q_{k+1}; the saved rows and the final row hold the node's
    # (q_k, q_{k+1}, q_{k-1}) in the slots (q, v, p); res the unnormalized residual at
    # q_{k+1}
    buf = np.empty(5 * N + 2 * M + M * N)
    o = 0
    ap, o = _take(buf, o, (N,))
    a, o = _take(buf, o, (N,))
    b, o = _take(buf, o, (N,))
    x, o = _take(buf, o, (N,))
    dx, o = _take(buf, o, (N,))
    R, o = _take(buf, o, (M,))
    w, o = _take(buf, o, (M,))
    J, o = _take(buf, o, (M, N))
    piv = np.empty(N, np.int64)
    for c in range(N):
        a[c] = q0[c]
        b[c] = v0[c]
        ap[c] = p0[c]
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    for k in range(1, nsteps + 1):
        ok, r, thr, it = _dsocs_solve(a, b, h, x, R, J, piv, dx, w, tolf, atol, max_iter,
                                      refresh, max_stall)
        its[k - 1] = it
        if not ok:
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = it
            break
        if not _finite(x):
            status = 2
            break
        dsocs_residual(a, b, x, h, R)
        res[k - 1] = _maxabs(R)
        for c in range(N):
            ap[c] = a[c]
            a[c] = b[c]
            b[c] = x[c]
        done = k
        if k % save_every == 0:
            _save_node(oq, ov, op, olam, k // save_every, a, b, ap, lam0)
    _finish(fin, out, a, b, ap, lam0, status, done, fail_r, fail_thr, fail_it)
    buf[0] = 0.0  # the buffer outlives its views


# what a member keeps between runs (mem): nothing, the step starts from its state
MEM = 1
'''


def _has(source: str, name: str) -> bool:
    return re.search(rf"^def {name}\(", source, re.M) is not None


def _exec(source: str) -> dict:
    ns: dict[str, Any] = {"math": math, "np": np}
    try:
        exec(compile(source, "<DSOCS.compiled_kernels>", "exec"), ns)
    except Exception as err:
        raise DSOCSInputError(f"DSOCS(compiled_kernels=...) does not run: {err!r}") from err
    return ns


def kernel_shape(source: str) -> tuple[int, int]:
    """``DSOCS_SHAPE = (n, rows)`` of a kernel source, checked with the kernel names.

    Raises
    ------
    DSOCSInputError
        A kernel or ``DSOCS_SHAPE`` is missing or malformed.
    """
    if not isinstance(source, str):
        raise DSOCSInputError(
            "compiled_kernels must be numba-compilable source text defining "
            f"{', '.join(KERNEL_NAMES)} and DSOCS_SHAPE; got {type(source).__name__}.")
    return _shape_of(source)


@functools.lru_cache(maxsize=64)
def _shape_of(source: str) -> tuple[int, int]:
    """:func:`kernel_shape` of a source text (run once per text: every step resolves the
    backend)."""
    missing = [n for n in KERNEL_NAMES if not _has(source, n)]
    shape = _exec(source).get("DSOCS_SHAPE")
    if (missing or not isinstance(shape, tuple) or len(shape) != 2
            or not all(isinstance(s, int) and s > 0 for s in shape)):
        raise DSOCSInputError(
            "DSOCS(compiled_kernels=...) must define dsocs_residual(q0, q1, q2, h, out), "
            "dsocs_jacobian_q2(q0, q1, q2, h, out) and DSOCS_SHAPE = (n, rows); "
            f"missing {missing or ['DSOCS_SHAPE']}.")
    return int(shape[0]), int(shape[1])


#: the step sizes at which a family's kernels are checked (through its members)
CHECK_STEPS = (0.05, 0.2)
#: the seeded points of the check (several, not one: a kernel agreeing at one point only)
_CHECK_POINTS = 4
_CHECK_SEED = 20261127


def check_kernels(dsocs: Any) -> None:
    """The kernels of ``dsocs.compiled_kernels`` evaluated in plain Python at
    ``_CHECK_POINTS`` seeded triples (q0, q1, q2) against the DSOCS's unforced eq. (4)
    (``constraint_residual`` and ``beta``) and ``jacobian_q2``, at the DSOCS's ``h`` (or at
    :data:`CHECK_STEPS` through the members of a family, which check themselves; a DSOCS
    whose pieces do not depend on ``h`` at ``h = 0.1``).

    Bounds: the residual to ``1e-12`` times ``1 + max|F| + max_i Σ_j |∂F_i/∂q2_j|(1 +
    |q2_j|)``, the size of the terms the rows balance (the numpy evaluation differs by
    round-off only: measured ≤ 2.1e-17 of it for the particle); the Jacobian to ``1e-6``
    relative to ``1 + max|∂F/∂q2|`` (the DSOCS's own Jacobian may hold central differences,
    e.g. of a variational basis depending on q2: measured 2.1e-12 for the particle).

    Raises
    ------
    DSOCSInputError
        The source does not run, a kernel fails, or a kernel disagrees.
    """
    source = dsocs.compiled_kernels
    n, rows = kernel_shape(source)
    if dsocs.discrete_lagrangian is None:  # a family: its members check at their h
        for h in CHECK_STEPS:
            dsocs.discretization(h)
        return
    h = 0.1 if dsocs.h is None else float(dsocs.h)
    ns = _exec(source)
    rng = np.random.default_rng(_CHECK_SEED)
    for _ in range(_CHECK_POINTS):
        q0 = rng.uniform(-1.0, 1.0, n)
        q1 = q0 + h * rng.uniform(0.5, 1.5, n) * rng.choice([-1.0, 1.0], n)
        q2 = 2.0 * q1 - q0 + h * h * rng.uniform(-1.0, 1.0, n)
        with np.errstate(all="ignore"):
            want_r = np.concatenate([dsocs.constraint_residual(q0, q1, q2),
                                     dsocs.variational_constraint.components(
                                         q0, q1, q2, dsocs.force(q0, q1, q2))])
            want_j = np.asarray(dsocs.jacobian_q2(q0, q1, q2), float) if not dsocs.has_force \
                else None
        got_r, got_j = np.zeros(rows), np.zeros((rows, n))
        try:
            ns["dsocs_residual"](q0.copy(), q1.copy(), q2.copy(), h, got_r)
            ns["dsocs_jacobian_q2"](q0.copy(), q1.copy(), q2.copy(), h, got_j)
        except Exception as err:
            raise DSOCSInputError(
                f"DSOCS(compiled_kernels=...): a kernel fails at q0 = {q0}, q1 = {q1}, "
                f"q2 = {q2}, h = {h}: {err!r}") from err
        if want_r.shape != (rows,):
            raise DSOCSInputError(
                f"DSOCS(compiled_kernels=...): DSOCS_SHAPE = {(n, rows)} but eq. (4) has "
                f"{want_r.shape[-1]} rows.")
        # the size of the terms the rows balance: their sensitivity to q2 (the DSOCS's own
        # Jacobian; the kernel's for a forced DSOCS) times (1 + |q2|)
        sens = np.abs(got_j if want_j is None else want_j) @ (1.0 + np.abs(q2))
        size = 1.0 + float(np.max(np.abs(want_r))) + float(np.max(sens))
        if not np.max(np.abs(got_r - want_r)) <= 1e-12 * size:
            raise DSOCSInputError(
                "DSOCS(compiled_kernels=...): the kernel dsocs_residual disagrees with the "
                f"DSOCS's eq. (4) at q0 = {q0}, q1 = {q1}, q2 = {q2}, h = {h}: "
                f"{got_r.tolist()} vs {want_r.tolist()}")
        if want_j is not None and not (
                np.max(np.abs(got_j - want_j)) <= 1e-6 * (1.0 + float(np.max(np.abs(want_j))))):
            raise DSOCSInputError(
                "DSOCS(compiled_kernels=...): the kernel dsocs_jacobian_q2 disagrees with "
                f"the DSOCS's jacobian_q2 at q0 = {q0}, q1 = {q1}, q2 = {q2}, h = {h}: "
                f"{got_j.tolist()} vs {want_j.tolist()}")


@attrs.frozen(eq=False)
class _Kernels:
    """What ``build_source`` reads: the kernel source and the sizes ``N``, ``M``."""

    source: str
    n: int
    m: int


#: Steps per call of the compiled loop in :meth:`DSOCSPlan.run` (every node of a block is
#: returned, then subsampled: the memory of a run stays bounded).
_BLOCK = 4096


@attrs.frozen(eq=False)
class DSOCSPlan:
    """What :class:`~chetaev.dsocs.DSOCSIntegrator` runs compiled on one DSOCS (a family or
    a member): the engine's :class:`~chetaev.discrete_lagrangian.extending.CompiledPlan`
    (module source; Newton options ``NewtonOptions(tol, max_iter)`` as the numpy solve
    builds them), the method and the DSOCS."""

    compiled: Any  # CompiledPlan
    n: int
    method: Any
    dsocs: Any

    @property
    def source(self) -> str:
        """The generated module's source."""
        return self.compiled.source

    def _go(self, a: np.ndarray, b: np.ndarray, h: float, steps: int) -> tuple:
        """``steps`` steps of the compiled loop from the flat nodes ``a`` = q_{k−1},
        ``b`` = q_k ``(nb, n)``, every node saved: ``(oq, ov, op, its, res, fin, out)``."""
        nb, n = a.shape
        opts = self.compiled.options
        mod = self.compiled.module()
        nil = np.zeros((1, 1))
        p0, lam0 = np.zeros((nb, n)), np.zeros((nb, 0))
        rows = steps + 1
        oq, ov, op = np.empty((nb, rows, n)), np.empty((nb, rows, n)), np.empty((nb, rows, n))
        olam = np.empty((nb, rows, 0))
        its = np.zeros((nb, max(steps, 1)), np.int64)
        res, cres = np.zeros((nb, max(steps, 1))), np.zeros((nb, max(steps, 1)))
        fin, out = np.zeros((nb, 4, n)), np.zeros((nb, 5))
        run = mod.run_parallel if nb > 1 else mod.run_serial
        run(a, b, p0, lam0, float(h), int(steps), 1, nil, nil, nil[0], nil[0],
            max(float(opts.tol), 64.0 * _EPS), float(opts.atol), int(opts.max_iter),
            float(opts.refresh_rate), int(opts.max_stall), math.inf, oq, ov, op, olam, its,
            res, cres, fin, out, np.zeros((nb, 1)))
        return oq, ov, op, its, res, fin, out

    def solve(self, q0: np.ndarray, q1: np.ndarray, h: float) -> tuple[np.ndarray, dict] | None:
        """q2 of eq. (4) from (q0, q1) (leading batch axes) and the step's info, or None
        when a member did not converge (the caller reruns the step on numpy)."""
        q0, q1 = np.broadcast_arrays(np.asarray(q0, float), np.asarray(q1, float))
        batch, n = q0.shape[:-1], self.n
        nb = math.prod(batch)
        _, _, _, its, res, fin, out = self._go(np.ascontiguousarray(q0).reshape(nb, n),
                                               np.ascontiguousarray(q1).reshape(nb, n), h, 1)
        if np.any(out[:, 0] != 0):
            return None
        info = {"newton_iterations": int(its.max(initial=0)),
                "residual": float(res.max(initial=0.0)), "rejected_roots": 0,
                "backend": "numba"}
        return fin[:, 1, :].reshape(*batch, n), info

    def run(self, state: Any, h: float, n_steps: int, save_every: int,
            cbound: float = math.inf) -> dict:
        """The compiled loop of ``integrate`` (the result dict its compiled driver reads).

        As the numpy steps: a state without ``q_next`` takes the start first
        (:meth:`DSOCSIntegrator._start`, in Python); node k holds q_k and the central
        difference v_k = (q_{k+1} − q_{k−1})/(2h). A step whose compiled Newton does not
        converge is rerun by the numpy solve (its deflated restarts, paper §4.2); if that
        fails too the run ends with status 1 and the numpy error's residual."""
        from ._errors import DSOCSConvergenceError

        member = self.dsocs.at(h)
        n = self.n
        q = np.asarray(state.q, float)
        v = np.asarray(state.v, float)
        qn = state.carry.get("q_next")
        qp = state.carry.get("q_prev")
        if qn is None:
            qn = self.method._start(member, q, v, h)
        batch = np.broadcast_shapes(q.shape[:-1], np.shape(qn)[:-1], v.shape[:-1])
        nb = math.prod(batch)

        def flat(x):
            return np.ascontiguousarray(np.broadcast_to(np.asarray(x, float),
                                                        (*batch, n))).reshape(nb, n)

        a, b = flat(q), flat(qn)
        ap = flat(np.nan if qp is None else qp)
        Q, V = [a[:, None].copy()], [flat(v)[:, None]]  # blocks (nb, rows, n) of the nodes
        its_all: list = []
        res_all: list = []
        done, status, fail = 0, 0, (0.0, 0.0, 0)
        while done < n_steps and status == 0:
            steps = min(n_steps - done, _BLOCK)
            oq, ov, op, its, res, fin, out = self._go(a, b, h, steps)
            ks = out[:, 1].astype(np.int64)
            k = int(ks.min())
            if k < steps and np.any(ks != k):  # the batch stops at the first failing step
                oq, ov, op, its, res, fin, out = self._go(a, b, h, k)
            if k:
                Q.append(oq[:, 1:k + 1])
                V.append((ov[:, 1:k + 1] - op[:, 1:k + 1]) / (2.0 * h))
                its_all.append(its[:, :k].max(axis=0))
                res_all.append(res[:, :k].max(axis=0))
                ap, a, b = fin[:, 2].copy(), fin[:, 0].copy(), fin[:, 1].copy()
                done += k
            if k == steps:
                continue
            # a step the compiled Newton did not solve: the numpy solve, with its restarts
            worst = int(np.argmin(ks))
            if int(out[worst, 0]) == 2:
                status = 2
                break
            step = state.n + done
            try:
                q2, info = self.method.solve(member, a.reshape(*batch, n),
                                             b.reshape(*batch, n), h, step_index=step,
                                             t=state.t + done * h)
            except DSOCSConvergenceError as err:
                status, fail = 1, (err.residual, err.tol, err.iterations)
                break
            ap, a, b = a, b, flat(q2)
            Q.append(a[:, None].copy())
            V.append(((b - ap) / (2.0 * h))[:, None])
            its_all.append(np.array([info["newton_iterations"]]))
            res_all.append(np.array([info["residual"]]))
            done += 1
        rows = np.arange(0, done + 1, save_every)
        if rows[-1] != done:
            rows = np.append(rows, done)
        Q, V = np.concatenate(Q, axis=1), np.concatenate(V, axis=1)
        carry = dict(state.carry) if done == 0 else {
            "q_prev": ap.reshape(*batch, n), "q_next": b.reshape(*batch, n), "u": None}
        its = np.concatenate(its_all) if its_all else np.zeros(0, np.int64)
        return {
            "q": np.moveaxis(Q[:, rows], 1, 0).reshape(len(rows), *batch, n),
            "v": np.moveaxis(V[:, rows], 1, 0).reshape(len(rows), *batch, n),
            "p": None, "lam": None,
            "final": {"q": Q[:, -1].reshape(*batch, n), "v": V[:, -1].reshape(*batch, n),
                      "p": None, "lam": None},
            "done": done, "carry": carry, "status": status, "fail": fail,
            "its": its, "res": np.concatenate(res_all) if res_all else np.zeros(0),
            "cres": np.zeros(its.size),
        }


# One compiled plan per (kernel source, tol, max_iter): the module does not depend on h.
_COMPILED: dict = {}


def dsocs_plan(method: Any, dsocs: Any) -> tuple[str, DSOCSPlan | None]:
    """``(why_not, plan)`` of ``method`` (a DSOCSIntegrator) on ``dsocs`` (a family, or the
    DSOCS at one ``h``): the square eq. (4) of an unforced DSOCS with kernels, solved by the
    generic Newton step (no problem-specific ``solver``, no ``root_filter``)."""
    tol, max_iter, _, root_filter, solver = method.options(dsocs, dsocs.h)
    if dsocs.compiled_kernels is None:
        return "a DSOCS without compiled kernels", None
    if dsocs.has_force:
        return "a forced DSOCS (external forces run on numpy)", None
    if solver is not None:
        return "a problem-specific solver (a Python callable)", None
    if root_filter is not None:
        return "a root_filter (a Python callable)", None
    n, rows = kernel_shape(dsocs.compiled_kernels)
    if rows != n:
        return f"a non-square eq. (4) ({rows} rows, {n} unknowns: Gauss–Newton)", None
    key = (dsocs.compiled_kernels, float(tol), int(max_iter))
    compiled = _COMPILED.get(key)
    if compiled is None:
        from chetaev.discrete_lagrangian import NewtonOptions
        from chetaev.discrete_lagrangian.extending import (
            BATCH_DRIVERS,
            LINALG,
            NEWTON,
            TAKE,
            CompiledPlan,
            build_source,
            inline_small,
        )

        kernels = _Kernels(source=dsocs.compiled_kernels, n=n, m=rows)
        engine = "\n\n".join([DSOCS_STEP, TAKE, LINALG, NEWTON, BATCH_DRIVERS])
        source = inline_small(build_source(kernels, 1, 0, "", False, engine=engine),
                              names=("_eval", "_newton"))
        nil = np.zeros((1, 1))
        compiled = _COMPILED[key] = CompiledPlan(
            source=source, a=nil, ahat=nil, b=np.zeros(1), bhat=np.zeros(1), m=0,
            options=NewtonOptions(tol=tol, max_iter=max_iter), has_lam=False)
    return "", DSOCSPlan(compiled=compiled, n=n, method=method, dsocs=dsocs)
