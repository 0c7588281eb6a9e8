"""The compiled PRK engine (issue 17): one numba module per (system kernels, method), in which
the whole step (stage residual, analytic Jacobian, Newton iterations) and the driver's loop
over the steps are compiled.

The engine is the compiled twin of :mod:`chetaev.discrete_lagrangian.core._prk` (paper
Thm. 4.2; eq. (13); eq. (14)): same unknowns ``x = [V (s·n), Λ of the free stages (k·m)]``,
same equations::

    Q^i = q_k + h Σ_j a_ij V^j,        W^i = D1L(Q^i, V^i) + F^i,
    R1_i = D2L(Q^i, V^i) − p_k − h Σ_j â_ij W^j

with the method's hooks (hook (i): the force ``F^i`` and its derivatives; hook (ii): the extra
rows and their Jacobian; the given multipliers, the initial guess, the residual scale, the
inverse Legendre map and the post-condition residual), written as a source *piece* with
fixed function names:

``hook_force(Qi, Vi, Lami, Fi, wk)``, ``hook_force_jac(Qi, Vi, Lami, Fq, Fv, Fl, wk)``,
``hook_rows(q, p, h, A, Q, V, Lam, W, R, wk)``,
``hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk)``, ``hook_first(q, v, lam, lam1, wk)``,
``hook_guess(q, v, lam1, hist, nhist, vprev, x)``, ``hook_scale(p, v, h, W)``,
``hook_velocity(q1, p1, v1, wk)``, ``hook_residual(q1, v1, wk)``

(``wk``: a scratch array of ``WK`` floats, no allocation in the Newton loop) and the constants
``HAS_FORCE, WK, SIMPLIFIED, KF`` (number of free multiplier stages, the last ``KF``).
:data:`PLAIN_HOOKS` is the unconstrained VPRK's piece (the compiled ``StageHooks``);
``chetaev.nh_integrators`` supplies the nonholonomic rows of eq. (14).

The Newton loop is the one rule of :func:`~chetaev.discrete_lagrangian.core._solver.newton_solve`
(unbatched): stop when ``max|R| ≤ max(max(tol, 64 eps)·scale, atol)``, on a non-finite
residual, a singular matrix, ``max_iter`` iterations or ``max_stall`` non-decreasing
iterations; full Newton, or simplified Newton (``SIMPLIFIED``) refreshed when the contraction
rate exceeds ``refresh_rate``. A failure returns a status; the Python side raises
:class:`~chetaev.discrete_lagrangian.ConvergenceError` naming step, time and residual.
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs
import numpy as np

__all__ = ["ENGINE", "PLAIN_HOOKS", "CompiledPlan", "build_source", "compiled_step",
           "run_compiled"]

_EPS = float(np.finfo(np.float64).eps)
_OVERFLOW = float(np.sqrt(np.finfo(np.float64).max))

#: The unconstrained VPRK's hooks (no force, no extra rows; v_{k+1} = D22L(q_{k+1})⁻¹ p_{k+1}
#: for a Lagrangian quadratic in v; guess V_prev + (v_k − v_{k−1}) as ``VPRK._step_impl``).
PLAIN_HOOKS = '''
HAS_FORCE = False
WK = N * N


@njit(cache=True)
def hook_force(Qi, Vi, Lami, Fi, wk):
    pass


@njit(cache=True)
def hook_force_jac(Qi, Vi, Lami, Fq, Fv, Fl, wk):
    pass


@njit(cache=True)
def hook_rows(q, p, h, A, Q, V, Lam, W, R, wk):
    pass


@njit(cache=True)
def hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk):
    pass


@njit(cache=True)
def hook_first(q, v, lam, lam1, wk):
    pass


@njit(cache=True)
def hook_guess(q, v, lam1, hist, nhist, vprev, x):
    for i in range(S):
        for k in range(N):
            if nhist > 0:
                x[i * N + k] = hist[0, i * N + k] + (v[k] - vprev[k])
            else:
                x[i * N + k] = v[k]


@njit(cache=True)
def hook_scale(p, v, h, W):
    mp = 0.0
    for k in range(N):
        mp = max(mp, abs(p[k]))
    mw = 0.0
    for i in range(S):
        for k in range(N):
            mw = max(mw, abs(W[i, k]))
    return max(1.0, mp + h * mw)


@njit(cache=True)
def hook_velocity(q1, p1, v1, wk):
    g = wk[:N * N].reshape((N, N))
    D22L(q1, p1, g)
    piv = np.empty(N, np.int64)
    if not _lu_factor(g, piv):
        for k in range(N):
            v1[k] = math.nan
        return
    _lu_solve(g, piv, p1, v1)


@njit(cache=True)
def hook_residual(q1, v1, wk):
    return 0.0
'''

#: The engine: LU, residual and Jacobian of the stage equations, Newton, the step loop.
ENGINE = '''
@njit(cache=True)
def _lu_factor(J, piv):
    nx = J.shape[0]
    for k in range(nx):
        p = k
        big = abs(J[k, k])
        for i in range(k + 1, nx):
            if abs(J[i, k]) > big:
                big = abs(J[i, k])
                p = i
        if not (big > 0.0) or not (big < math.inf):
            return False
        piv[k] = p
        if p != k:
            for j in range(nx):
                t = J[k, j]
                J[k, j] = J[p, j]
                J[p, j] = t
        d = J[k, k]
        for i in range(k + 1, nx):
            f = J[i, k] / d
            J[i, k] = f
            if f != 0.0:
                for j in range(k + 1, nx):
                    J[i, j] -= f * J[k, j]
    return True


@njit(cache=True)
def _lu_solve(LU, piv, F, dx):
    nx = LU.shape[0]
    for i in range(nx):
        dx[i] = F[i]
    for k in range(nx):
        p = piv[k]
        if p != k:
            t = dx[k]
            dx[k] = dx[p]
            dx[p] = t
    for i in range(nx):
        acc = dx[i]
        for j in range(i):
            acc -= LU[i, j] * dx[j]
        dx[i] = acc
    for i in range(nx - 1, -1, -1):
        acc = dx[i]
        for j in range(i + 1, nx):
            acc -= LU[i, j] * dx[j]
        dx[i] = acc / LU[i, i]


@njit(cache=True)
def _maxabs(R):
    r = 0.0
    for i in range(R.shape[0]):
        a = abs(R[i])
        if a != a:
            return math.inf
        if a > r:
            r = a
    return r


@njit(cache=True)
def _eval(x, q, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, R, want, J, dW, Wq, Wv, Fq, Fv, Fl,
          D21, D22, wk):
    for i in range(S):
        for k in range(N):
            V[i, k] = x[i * N + k]
    for i in range(S - KF):
        for a in range(M):
            Lam[i, a] = lam1[a]
    for r in range(KF):
        for a in range(M):
            Lam[S - KF + r, a] = x[S * N + r * M + a]
    for i in range(S):
        for k in range(N):
            acc = 0.0
            for j in range(S):
                acc += A[i, j] * V[j, k]
            Q[i, k] = q[k] + h * acc
    for i in range(S):
        D1L(Q[i], V[i], W[i])
        D2L(Q[i], V[i], D2[i])
        if HAS_FORCE:
            hook_force(Q[i], V[i], Lam[i], F, wk)
            for k in range(N):
                W[i, k] += F[k]
    for i in range(S):
        for k in range(N):
            acc = 0.0
            for j in range(S):
                acc += AH[i, j] * W[j, k]
            R[i * N + k] = D2[i, k] - p[k] - h * acc
    hook_rows(q, p, h, A, Q, V, Lam, W, R, wk)
    if not want:
        return
    for j in range(S):
        D11L(Q[j], V[j], Wq[j])
        D12L(Q[j], V[j], Wv[j])
        D21L(Q[j], V[j], D21[j])
        D22L(Q[j], V[j], D22[j])
        if HAS_FORCE:
            hook_force_jac(Q[j], V[j], Lam[j], Fq, Fv, Fl[j], wk)
            for r in range(N):
                for c in range(N):
                    Wq[j, r, c] += Fq[r, c]
                    Wv[j, r, c] += Fv[r, c]
        for r in range(N):
            for col in range(NX):
                dW[j, r, col] = 0.0
            for l in range(S):
                c = h * A[j, l]
                for cc in range(N):
                    dW[j, r, l * N + cc] = Wq[j, r, cc] * c
            for cc in range(N):
                dW[j, r, j * N + cc] += Wv[j, r, cc]
        if j >= S - KF:
            r0 = S * N + (j - (S - KF)) * M
            for r in range(N):
                for a in range(M):
                    dW[j, r, r0 + a] = Fl[j, r, a]
    for i in range(S):
        for r in range(N):
            row = i * N + r
            for col in range(NX):
                acc = 0.0
                for j in range(S):
                    acc += AH[i, j] * dW[j, r, col]
                J[row, col] = -h * acc
            for l in range(S):
                c = h * A[i, l]
                for cc in range(N):
                    J[row, l * N + cc] += D21[i, r, cc] * c
            for cc in range(N):
                J[row, i * N + cc] += D22[i, r, cc]
    hook_rows_jac(q, p, h, A, Q, V, Lam, W, dW, J, wk)


@njit(cache=True)
def _run_one(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
             refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out):
    Q = np.empty((S, N))
    V = np.empty((S, N))
    Lam = np.zeros((S, max(M, 1)))
    W = np.empty((S, N))
    D2 = np.empty((S, N))
    F = np.zeros(N)
    R = np.empty(NX)
    J = np.empty((NX, NX))
    dW = np.zeros((S, N, NX))
    Wq = np.empty((S, N, N))
    Wv = np.empty((S, N, N))
    Fq = np.zeros((N, N))
    Fv = np.zeros((N, N))
    Fl = np.zeros((S, N, max(M, 1)))
    D21 = np.empty((S, N, N))
    D22 = np.empty((S, N, N))
    piv = np.empty(NX, np.int64)
    dx = np.empty(NX)
    x = np.empty(NX)
    wk = np.empty(WK)
    hist = np.zeros((3, NX))
    nhist = 0
    q = q0.copy()
    v = v0.copy()
    p = p0.copy()
    lam = lam0.copy()
    lam1 = np.zeros(max(M, 1))
    vprev = v0.copy()
    q1 = np.empty(N)
    p1 = np.empty(N)
    v1 = np.empty(N)
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    for k in range(1, nsteps + 1):
        hook_first(q, v, lam, lam1, wk)
        hook_guess(q, v, lam1, hist, nhist, vprev, x)
        # Newton: the one stopping rule of newton_solve (unbatched)
        _eval(x, q, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, R, not SIMPLIFIED, J, dW, Wq, Wv,
              Fq, Fv, Fl, D21, D22, wk)
        jfresh = not SIMPLIFIED
        thr = max(tolf * hook_scale(p, v, h, W), atol)
        r = _maxabs(R)
        it = 0
        stall = 0
        have_lu = False
        while it < max_iter and r > thr and r < math.inf:
            if not have_lu:
                if not jfresh:
                    _eval(x, q, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, R, True, J, dW, Wq,
                          Wv, Fq, Fv, Fl, D21, D22, wk)
                if not _lu_factor(J, piv):
                    break
                have_lu = True
            _lu_solve(J, piv, R, dx)
            for i in range(NX):
                x[i] -= dx[i]
            it += 1
            full = not SIMPLIFIED
            _eval(x, q, p, lam1, h, A, AH, Q, V, Lam, W, D2, F, R, full, J, dW, Wq, Wv, Fq,
                  Fv, Fl, D21, D22, wk)
            jfresh = full
            rn = _maxabs(R)
            rate = rn / max(r, 1e-300)
            if rate >= 1.0:
                stall += 1
            else:
                stall = 0
            r = rn
            if full or (rate > refresh and r > thr):
                have_lu = False
            if stall >= max_stall:
                break
        its[k - 1] = it
        res[k - 1] = r
        if not (r <= thr):
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = it
            break
        # node values (Thm. 4.2 / eq. (14a)) from the evaluation at the solution
        for c in range(N):
            aq = 0.0
            ap = 0.0
            for j in range(S):
                aq += B[j] * V[j, c]
                ap += BH[j] * W[j, c]
            q1[c] = q[c] + h * aq
            p1[c] = p[c] + h * ap
        hook_velocity(q1, p1, v1, wk)
        ok = True
        sq = 0.0
        sv = 0.0
        sp = 0.0
        sl = 0.0
        for c in range(N):
            sq += q1[c] * q1[c]
            sv += v1[c] * v1[c]
            sp += p1[c] * p1[c]
        for a in range(M):
            sl += Lam[S - 1, a] * Lam[S - 1, a]
        if not (sq < math.inf and sv < math.inf and sp < math.inf and sl < math.inf):
            status = 2
            break
        cr = hook_residual(q1, v1, wk)
        cres[k - 1] = cr
        if not (cr <= cbound):
            status = 3
            fail_r = cr
            break
        for i in range(NX):
            hist[2, i] = hist[1, i]
            hist[1, i] = hist[0, i]
            hist[0, i] = x[i]
        nhist = min(nhist + 1, 3)
        for c in range(N):
            vprev[c] = v[c]
            q[c] = q1[c]
            v[c] = v1[c]
            p[c] = p1[c]
        for a in range(M):
            lam[a] = Lam[S - 1, a]
        done = k
        if k % save_every == 0:
            row = k // save_every
            for c in range(N):
                oq[row, c] = q[c]
                ov[row, c] = v[c]
                op[row, c] = p[c]
            for a in range(M):
                olam[row, a] = lam[a]
    for c in range(N):
        fin[0, c] = q[c]
        fin[1, c] = v[c]
        fin[2, c] = p[c]
    for a in range(M):
        fin[3, a] = lam[a]
    out[0] = status
    out[1] = done
    out[2] = fail_r
    out[3] = fail_thr
    out[4] = fail_it


@njit(cache=True)
def run_serial(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
               refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out):
    for b in range(q0.shape[0]):
        _run_one(q0[b], v0[b], p0[b], lam0[b], h, nsteps, save_every, A, AH, B, BH, tolf,
                 atol, max_iter, refresh, max_stall, cbound, oq[b], ov[b], op[b], olam[b],
                 its[b], res[b], cres[b], fin[b], out[b])


@njit(cache=True, parallel=True)
def run_parallel(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
                 refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out):
    for b in prange(q0.shape[0]):
        _run_one(q0[b], v0[b], p0[b], lam0[b], h, nsteps, save_every, A, AH, B, BH, tolf,
                 atol, max_iter, refresh, max_stall, cbound, oq[b], ov[b], op[b], olam[b],
                 its[b], res[b], cres[b], fin[b], out[b])
'''

_HEADER = '''"""Generated by chetaev.discrete_lagrangian.core._compiled_prk (issue 17)."""
import math

import numpy as np
from numba import njit, prange

S = {s}
N = {n}
M = {m}
KF = {kf}
NX = {nx}
SIMPLIFIED = {simplified}
'''


def _jit_kernels(source: str) -> str:
    """The kernels' plain ``def`` lines prefixed with ``@njit(cache=True)``."""
    return re.sub(r"^def ", "@njit(cache=True)\ndef ", source, flags=re.M)


def build_source(kernels: Any, s: int, kf: int, hooks: str, simplified: bool,
                 constants: str = "", engine: str | None = None) -> str:
    """The generated module: header constants, kernels, the method's hooks, the engine
    (:data:`ENGINE`, or ``engine``: a method with a step of its own, e.g. the GNI)."""
    n, m = int(kernels.n), int(kernels.m)
    head = _HEADER.format(s=s, n=n, m=m, kf=kf, nx=s * n + kf * m, simplified=bool(simplified))
    return "\n".join([head, constants, _jit_kernels(kernels.source), hooks,
                      ENGINE if engine is None else engine])


@attrs.frozen(eq=False)
class CompiledPlan:
    """What a method runs compiled on one system: the module source and its data."""

    source: str
    a: np.ndarray
    ahat: np.ndarray
    b: np.ndarray
    bhat: np.ndarray
    m: int
    options: Any  # NewtonOptions
    has_lam: bool

    def module(self) -> Any:
        """The imported (and, on first use, compiled) module."""
        from ._kernels import load_module

        return load_module(self.source)


def _flat(x: Any, n: int, batch: tuple) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=float), (*batch, n))
                                ).reshape(-1, n)


def run_compiled(plan: CompiledPlan, state: Any, h: float, n_steps: int, save_every: int,
                 cbound: float = math.inf) -> dict:
    """Run ``n_steps`` steps from ``state`` in compiled code (the driver's loop compiled).

    Returns a dict with the saved nodes ``q, v, p, lam`` ``(n_saved, *batch, ·)`` (node 0
    included; the last node of an incomplete period is appended), the final ``q, v, p,
    lam``, ``done`` (steps completed by every member), ``status`` (0 ok, 1 Newton failure,
    2 non-finite, 3 post-condition), ``fail`` (residual, tolerance, iterations of the
    failing step), ``its``, ``res``, ``cres`` per step (maximised over the batch).
    """
    q = np.asarray(state.q, dtype=float)
    batch = q.shape[:-1]
    n = q.shape[-1]
    m = plan.m
    nb = int(np.prod(batch)) if batch else 1
    q0 = _flat(q, n, batch)
    v0 = _flat(state.v, n, batch)
    p0 = _flat(state.p, n, batch)
    lam_in = state.lam if (m and state.lam is not None) else np.zeros((*batch, m))
    lam0 = _flat(lam_in, m, batch) if m else np.zeros((nb, 0))
    mod = plan.module()
    opts = plan.options
    tolf = max(float(opts.tol), 64.0 * _EPS)

    def go(steps: int) -> tuple:
        nsave = steps // save_every + 1
        oq = np.empty((nb, nsave, n))
        ov = np.empty((nb, nsave, n))
        op = np.empty((nb, nsave, n))
        olam = np.empty((nb, nsave, m))
        oq[:, 0], ov[:, 0], op[:, 0], olam[:, 0] = q0, v0, p0, lam0
        its = np.zeros((nb, max(steps, 1)), np.int64)
        res = np.zeros((nb, max(steps, 1)))
        cres = np.zeros((nb, max(steps, 1)))
        fin = np.zeros((nb, 4, max(n, m)))
        out = np.zeros((nb, 5))
        run = mod.run_parallel if nb > 1 else mod.run_serial
        run(q0, v0, p0, lam0, float(h), int(steps), int(save_every), plan.a, plan.ahat, plan.b,
            plan.bhat, tolf, float(opts.atol), int(opts.max_iter), float(opts.refresh_rate),
            int(opts.max_stall), float(cbound), oq, ov, op, olam, its, res, cres, fin, out)
        return oq, ov, op, olam, its, res, cres, fin, out

    oq, ov, op, olam, its, res, cres, fin, out = go(n_steps)
    done = out[:, 1].astype(np.int64)
    k = int(done.min())
    if k < n_steps and np.any(done != k):  # the batch stops at the first failing step
        oq, ov, op, olam, its, res, cres, fin, out = go(k)
    status = int(out[np.argmin(done), 0]) if k < n_steps else 0
    worst = int(np.argmin(done))
    nreg = k // save_every + 1

    def saved(o, width):
        arr = o[:, :nreg]
        if k % save_every:
            arr = np.concatenate([arr, fin[:, None, width[0]:width[0] + 1, :width[1]][:, :, 0]],
                                 axis=1)
        return np.moveaxis(arr, 0, 1).reshape(arr.shape[1], *batch, arr.shape[2])

    result = {
        "q": saved(oq, (0, n)), "v": saved(ov, (1, n)), "p": saved(op, (2, n)),
        "lam": saved(olam, (3, m)) if plan.has_lam else None,
        "final": {key: fin[:, i, :w].reshape(*batch, w)
                  for i, (key, w) in enumerate((("q", n), ("v", n), ("p", n), ("lam", m)))},
        "done": k, "status": status,
        "fail": (float(out[worst, 2]), float(out[worst, 3]), int(out[worst, 4])),
        "its": its[:, :k].max(axis=0) if k else np.zeros(0, np.int64),
        "res": res[:, :k].max(axis=0) if k else np.zeros(0),
        "cres": cres[:, :k].max(axis=0) if k else np.zeros(0),
    }
    if not plan.has_lam:
        result["final"]["lam"] = None
    return result


def compiled_step(plan: CompiledPlan, state: Any, h: float) -> Any:
    """One step of :meth:`Method.step` in compiled code: the new State (``t``, ``n`` are set
    by ``Method.step``). Raises ``ConvergenceError`` on a Newton failure."""
    from .._util._errors import ConvergenceError
    from ._state import State

    out = run_compiled(plan, state, h, 1, 1)
    if out["status"] == 1:
        r, tol, it = out["fail"]
        raise ConvergenceError(step=state.n, t=state.t, residual=r, tol=tol, iterations=it,
                               hint="halve h, or increase NewtonOptions(max_iter=...)")
    f = out["final"]
    info = {"newton_iterations": int(out["its"].max()) if out["its"].size else 0,
            "residual": float(out["res"].max()) if out["res"].size else 0.0,
            "backend": "numba"}
    return State(t=state.t + h, q=f["q"], v=f["v"], p=f["p"],
                 lam=None if f["lam"] is None else np.array(f["lam"]), n=state.n + 1,
                 carry={}, info=info)
