"""The compiled Lie-group PRK engine (issue 17): the compiled twin of
:mod:`~chetaev.discrete_lagrangian.core._lie_prk` (paper Theorem 6.1, eqs. (24)–(27)), one
numba module per (system kernels, group, retraction, method).

Same unknowns ``x = [H (s·d), Λ of the free stages (k·m)]`` and the same residual as
:func:`~chetaev.discrete_lagrangian.core._lie_prk.lie_prk_residual` (the inverse-free form of
eq. (26))::

    Ξⁱ = h Σⱼ aᵢⱼ Hʲ,  ξ = h Σⱼ bⱼ Hʲ (= Ξˢ for a stiffly accurate pair),  Gⁱ = g τ(Ξⁱ)
    Ωⁱ = dLτ(Ξⁱ) Hⁱ,  Fⁱ = L*_{Gⁱ} D₁ℓ + hook force,  Π₀ⁱ = 𝕀Ωⁱ,  Πⁱ = Dᵢᵀ Π₀ⁱ
    Nⁱ = Dᵢᵀ Fⁱ + J^L(Ξⁱ, Hⁱ)ᵀ Π₀ⁱ,  μ_{k+1} = Ad*_{τ(ξ)} [μ_k + h Σⱼ bⱼ Ad*_{τ(−Ξʲ)} Fʲ]
    Rᵢ = Πⁱ − dLτ(ξ)ᵀ μ_{k+1} + h Σⱼ (bⱼ aⱼᵢ / bᵢ) Nʲ                                 (26)

and the same analytic Jacobian (the chain rule of
:func:`~chetaev.discrete_lagrangian.core._lie_prk.stage_derivatives`, for ℓ = ½ηᵀ𝕀η − V(g)
with constant 𝕀). The Newton iteration is the one compiled driver of
:mod:`~chetaev.discrete_lagrangian.core._compiled_prk` (its source pieces :data:`NEWTON`,
with the LU and max-norm helpers :data:`LINALG`): the rule of
:func:`~chetaev.discrete_lagrangian.core._solver.newton_solve` for one system (threshold
``max(max(tol, 64 eps)·scale, atol)``, stall count, simplified-Newton refresh, the optional
``polish`` to the round-off floor) on this engine's ``_eval`` (the residual; the Jacobian
from the stage quantities of the last residual) and ``_scale`` (``hook_scale``); numba
inlines these two and ``_newton`` into ``_lie_run_one``.

Group pieces (:func:`group_source`): the group's maps as numba source come from
:func:`chetaev.liegroups.compiled_source` (the package that owns the formulas; its
module docstring lists each compiled map and the kernel it mirrors).

Supported: SO(3), SE(2), SE(3) and products of these with Rⁿ factors with either retraction
(Cayley also for the other matrix groups of ``chetaev.liegroups`` through the generic matrix
Cayley; exp also for SO(2)); mechanical ℓ with constant 𝕀. S² is not a matrix group here:
its models run compiled as their SO(3) lifts
(``chetaev.nh_integrators.spherical_pendulum(symbolic=True)``). Rⁿ alone (the vector
engine), general ℓ, holonomic constraints and external forces run on numpy
(``backend="auto"``) or raise :class:`~chetaev.discrete_lagrangian.core._backend.BackendError`
(``backend="numba"``) with the reason (:func:`group_support`, :func:`lie_plan`).

Hooks (a source piece with fixed names, as in ``_compiled_prk``): the constants ``HAS_HOOKS,
WK, KF, POLISH`` and ``hook_force(i, Gi, Omi, Lami, Fi, wk)``,
``hook_force_jac(i, Gi, Omi, Lami, zeta_i, dOm_i, dF_i, wk)``,
``hook_rows(mu, h, A, ev, R, wk)``, ``hook_rows_jac(mu, h, A, ev, jv, J, wk)`` (``ev``, ``jv``:
the stage arrays of ``_workspace`` / ``_jac_workspace``), ``hook_first(g, eta, mu, lam, lam1,
wk)`` (Λ¹), ``hook_scale(mu, x)``, ``hook_guess(eta, hist, nhist, vprev, lam, x)`` (``hist``:
the last two solutions), ``hook_velocity(mu1, eta1, wk)`` (η_{k+1}) and
``hook_residual(g1, eta1, wk)`` (the post-condition). :data:`PLAIN_LIE_HOOKS` is the
unconstrained LieVPRK's piece; ``chetaev.nh_integrators._compiled_lie_nh`` writes the
nonholonomic one.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from ._compiled_prk import (
    LINALG,
    NEWTON,
    _jit_kernels,
    _plan_module,
    inline_small,
    memory_carry,
    memory_in,
)
from ._kernels import KernelSet

__all__ = [
    "LIE_BATCH_DRIVERS",
    "LIE_ENGINE",
    "PLAIN_LIE_HOOKS",
    "LieKernelSet",
    "LiePlan",
    "group_source",
    "group_support",
    "lie_plan",
]

_EPS = float(np.finfo(np.float64).eps)



@attrs.frozen(eq=False)
class LieKernelSet(KernelSet):
    """A :class:`~chetaev.discrete_lagrangian.core._kernels.KernelSet` of a left-trivialized
    system on ``group`` (kernels ``NAME(q, v, out)`` with ``q`` the flattened group element;
    see ``symbolic._kernel_emit_lie``)."""

    group: Any = None


# ----------------------------------------------------------------------------- group pieces
def group_support(group: Any, kind: str) -> str:
    """Why ``(group, kind)`` has no compiled group piece ("" when it has one):
    :func:`chetaev.liegroups.compiled_support`, with where S² runs compiled."""
    from chetaev.liegroups import compiled_support

    why = compiled_support(group, kind)
    if why and kind in ("cayley", "exp"):
        why += ("; S² runs compiled as its lift to SO(3), e.g. "
                "chetaev.nh_integrators.spherical_pendulum(symbolic=True)")
    return why


def group_source(group: Any, kind: str) -> str:
    """The group piece (:func:`chetaev.liegroups.compiled_source`): ``grp_tau, grp_dL,
    grp_tensor, grp_S, grp_Ad_pair, grp_compose, grp_coad``; raises ``ValueError`` with
    :func:`group_support`'s reason."""
    from chetaev.liegroups import compiled_source

    why = group_support(group, kind)
    if why:
        raise ValueError(why)
    return compiled_source(group, kind)


# ----------------------------------------------------------------------------- the engine
#: The unconstrained LieVPRK's hooks (no force, no extra rows; the guess of
#: ``LieVPRK._step_impl``: H_prev + (η_k − η_{k−1}), else η_k at every stage).
PLAIN_LIE_HOOKS = '''
HAS_HOOKS = False
WK = 1
POLISH = -1.0


@njit(cache=True)
def hook_force(i, Gi, Omi, Lami, Fi, wk):
    pass


@njit(cache=True)
def hook_force_jac(i, Gi, Omi, Lami, zeta_i, dOm_i, dF_i, wk):
    pass


@njit(cache=True)
def hook_rows(mu, h, A, ev, R, wk):
    pass


@njit(cache=True)
def hook_rows_jac(mu, h, A, ev, jv, J, wk):
    pass


@njit(cache=True)
def hook_velocity(mu1, eta1, wk):
    for a in range(D):
        acc = 0.0
        for b in range(D):
            acc += INERTIA_INV[a, b] * mu1[b]
        eta1[a] = acc


@njit(cache=True)
def hook_first(g, eta, mu, lam, lam1, wk):
    pass


@njit(cache=True)
def hook_scale(mu, x):
    r = 0.0
    for a in range(D):
        r = max(r, abs(mu[a]))
    return 1.0 + r


@njit(cache=True)
def hook_guess(eta, hist, nhist, vprev, lam, x):
    _guess_velocities(eta, hist, nhist, vprev, x)


@njit(cache=True)
def hook_residual(g1, eta1, wk):
    return 0.0
'''

_LIE_STEP = '''
@njit(cache=True)
def _mdx(Mt, coef, h, out):
    # out[:, k D + q] += h coef[k] Mt[:, q]  (Mt times the derivative of Xi = h sum_k c_k H_k)
    for r in range(Mt.shape[0]):
        for k in range(S):
            c = h * coef[k]
            for q in range(D):
                out[r, k * D + q] += c * Mt[r, q]


@njit(cache=True)
def _mm(Am, Bm, out, sign):
    # out += sign * Am @ Bm
    for r in range(Am.shape[0]):
        for c in range(Bm.shape[1]):
            acc = 0.0
            for l in range(Am.shape[1]):
                acc += Am[r, l] * Bm[l, c]
            out[r, c] += sign * acc


@njit(cache=True)
def _mtm(Am, Bm, out, sign):
    # out += sign * Am^T @ Bm
    for r in range(Am.shape[1]):
        for c in range(Bm.shape[1]):
            acc = 0.0
            for l in range(Am.shape[0]):
                acc += Am[l, r] * Bm[l, c]
            out[r, c] += sign * acc


@njit(cache=True)
def _workspace():
    H = np.empty((S, D))
    Xi = np.empty((S1, D))
    T = np.empty((S1, KK))
    Dm = np.empty((S1, D, D))
    Ad = np.empty((S1, D, D))
    AdiT = np.empty((S1, D, D))
    Tn = np.empty((S1, D, D, D))
    G = np.empty((S, KK))
    Om = np.empty((S, D))
    F = np.empty((S, D))
    P0 = np.empty((S, D))
    Jl = np.empty((S, D, D))
    Y = np.empty((S, D))
    N = np.empty((S, D))
    mu1 = np.empty(D)
    g1 = np.empty(KK)
    Lam = np.zeros((S, MM))
    nu = np.empty(D)
    return (H, Xi, T, Dm, Ad, AdiT, Tn, G, Om, F, P0, Jl, Y, N, mu1, g1, Lam, nu)


@njit(cache=True)
def _jac_workspace():
    zeta = np.zeros((S, D, NX))
    dOm = np.zeros((S, D, NX))
    dP0 = np.zeros((S, D, NX))
    dF = np.zeros((S, D, NX))
    dN = np.zeros((S, D, NX))
    dY = np.zeros((S, D, NX))
    dnu = np.zeros((D, NX))
    zxi = np.zeros((D, NX))
    dmu1 = np.zeros((D, NX))
    Dmm = np.zeros((D, D))
    Dmm2 = np.zeros((D, D))
    Dmm3 = np.zeros((D, D))
    tmp = np.zeros((D, NX))
    return (zeta, dOm, dP0, dF, dN, dY, dnu, zxi, dmu1, Dmm, Dmm2, Dmm3, tmp)


@njit(cache=True)
def _lie_res(x, g, mu, lam1, h, A, B, W, ev, R, wk):
    # the stage quantities (kept in ev for _lie_jac) and the residual (26)
    H, Xi, T, Dm, Ad, AdiT, Tn, G, Om, F, P0, Jl, Y, N, mu1, g1, Lam, nu = ev
    for i in range(S):
        for k in range(D):
            H[i, k] = x[i * D + k]
    for i in range(S - KF):
        for a in range(M):
            Lam[i, a] = lam1[a]
    for r in range(KF):
        for a in range(M):
            Lam[S - KF + r, a] = x[S * D + r * M + a]
    for i in range(S):
        for k in range(D):
            acc = 0.0
            for j in range(S):
                acc += A[i, j] * H[j, k]
            Xi[i, k] = h * acc
    if not STIFF:
        for k in range(D):
            acc = 0.0
            for j in range(S):
                acc += B[j] * H[j, k]
            Xi[S, k] = h * acc
    for i in range(S1):
        grp_tau(Xi[i], T[i])
        grp_dL(Xi[i], Dm[i])
        grp_Ad_pair(T[i], Ad[i], AdiT[i])
        grp_tensor(Xi[i], Tn[i])
    for i in range(S):
        grp_compose(g, T[i], G[i])
        for b in range(D):
            for c in range(D):
                acc = 0.0
                for a in range(D):
                    acc += Tn[i, b, a, c] * H[i, a]
                Jl[i, b, c] = acc
        for b in range(D):
            acc = 0.0
            for a in range(D):
                acc += Dm[i, b, a] * H[i, a]
            Om[i, b] = acc
        lt_force(G[i], Om[i], F[i])
        if HAS_HOOKS:
            hook_force(i, G[i], Om[i], Lam[i], F[i], wk)
        for b in range(D):
            acc = 0.0
            for a in range(D):
                acc += INERTIA[b, a] * Om[i, a]
            P0[i, b] = acc
        for a in range(D):
            acc = 0.0
            for b in range(D):
                acc += AdiT[i, a, b] * F[i, b]
            Y[i, a] = acc
        for c in range(D):
            acc = 0.0
            for b in range(D):
                acc += Dm[i, b, c] * F[i, b]
            acc2 = 0.0
            for b in range(D):
                acc2 += Jl[i, b, c] * P0[i, b]
            N[i, c] = acc + acc2
    L = S1 - 1  # xi
    for a in range(D):
        acc = 0.0
        for j in range(S):
            acc += B[j] * Y[j, a]
        nu[a] = mu[a] + h * acc
    for a in range(D):
        acc = 0.0
        for b in range(D):
            acc += Ad[L, b, a] * nu[b]
        mu1[a] = acc
    for i in range(S):
        for a in range(D):
            pi = 0.0
            for b in range(D):
                pi += Dm[i, b, a] * P0[i, b]
            dm = 0.0
            for b in range(D):
                dm += Dm[L, b, a] * mu1[b]
            acc = 0.0
            for j in range(S):
                acc += W[i, j] * N[j, a]
            R[i * D + a] = pi - dm + h * acc
    if STIFF:
        for k in range(KK):
            g1[k] = G[S - 1, k]
    else:
        grp_compose(g, T[S], g1)


@njit(cache=True)
def _lie_jac(h, A, B, W, ev, J, jv, wk):
    # the analytic Jacobian (stage_derivatives) at the point of the last _lie_res
    H, Xi, T, Dm, Ad, AdiT, Tn, G, Om, F, P0, Jl, Y, N, mu1, g1, Lam, nu = ev
    L = S1 - 1
    zeta, dOm, dP0, dF, dN, dY, dnu, zxi, dmu1, Dmm, Dmm2, Dmm3, tmp = jv
    for arr in (zeta, dOm, dP0, dF, dN, dY):
        arr[...] = 0.0
    dnu[...] = 0.0
    zxi[...] = 0.0
    dmu1[...] = 0.0
    for i in range(S):
        _mdx(Dm[i], A[i], h, zeta[i])
        _mdx(Jl[i], A[i], h, dOm[i])
        for r in range(D):
            for q in range(D):
                dOm[i, r, i * D + q] += Dm[i, r, q]
        _mm(INERTIA, dOm[i], dP0[i], 1.0)
        lt_force_jac(G[i], Om[i], Dmm)
        _mm(Dmm, zeta[i], dF[i], 1.0)
        if HAS_HOOKS:
            hook_force_jac(i, G[i], Om[i], Lam[i], zeta[i], dOm[i], dF[i], wk)
    _mdx(Dm[L], B, h, zxi)
    for i in range(S):
        # Q_F + S (times dXi), Q_P0^T dH, D^T dF, J^T dP0  -> dN
        grp_S(Xi[i], H[i], P0[i], Dmm2)
        for a in range(D):
            for c in range(D):
                qf = 0.0
                qp = 0.0
                for b in range(D):
                    qf += Tn[i, b, a, c] * F[i, b]
                    qp += Tn[i, b, a, c] * P0[i, b]
                Dmm[a, c] = qf + Dmm2[a, c]
                Dmm3[a, c] = qp
        _mdx(Dmm, A[i], h, dN[i])
        for r in range(D):
            for q in range(D):
                dN[i, r, i * D + q] += Dmm3[q, r]
        _mtm(Dm[i], dF[i], dN[i], 1.0)
        _mtm(Jl[i], dP0[i], dN[i], 1.0)
        # dPi = Q_P0 dXi + D^T dP0, stored in dP0's place after use: R rows below
        tmp[...] = 0.0
        _mdx(Dmm3, A[i], h, tmp)
        _mtm(Dm[i], dP0[i], tmp, 1.0)
        for r in range(D):
            for c in range(NX):
                dP0[i, r, c] = tmp[r, c]
        # dY = AdiT (dF - coad(F) zeta)
        grp_coad(F[i], Dmm)
        tmp[...] = 0.0
        for r in range(D):
            for c in range(NX):
                tmp[r, c] = dF[i, r, c]
        _mm(Dmm, zeta[i], tmp, -1.0)
        _mm(AdiT[i], tmp, dY[i], 1.0)
        for r in range(D):
            for c in range(NX):
                dnu[r, c] += h * B[i] * dY[i, r, c]
    # dmu1 = coad(mu1) zxi + Ad_xi^T dnu
    grp_coad(mu1, Dmm)
    _mm(Dmm, zxi, dmu1, 1.0)
    _mtm(Ad[L], dnu, dmu1, 1.0)
    # dDmu = Q_mu1 dxi + D_xi^T dmu1
    for a in range(D):
        for c in range(D):
            acc = 0.0
            for b in range(D):
                acc += Tn[L, b, a, c] * mu1[b]
            Dmm[a, c] = acc
    tmp[...] = 0.0
    _mdx(Dmm, B, h, tmp)
    _mtm(Dm[L], dmu1, tmp, 1.0)
    for i in range(S):
        for r in range(D):
            row = i * D + r
            for c in range(NX):
                acc = 0.0
                for j in range(S):
                    acc += W[i, j] * dN[j, r, c]
                J[row, c] = dP0[i, r, c] - tmp[r, c] + h * acc


@njit(cache=True)
def _eval(mode, ctx, x, R, J, jac):
    # NEWTON's evaluation (mode unused): the residual (26) with the hooks' rows at x, or with
    # jac the Jacobian at the point of the last residual (Newton asks for it only there: the
    # stage quantities ev of that residual are reused)
    g, mu, lam1, h, A, B, W, ev, jv, wk = ctx
    if jac:
        _lie_jac(h, A, B, W, ev, J, jv, wk)
        hook_rows_jac(mu, h, A, ev, jv, J, wk)
    else:
        _lie_res(x, g, mu, lam1, h, A, B, W, ev, R, wk)
        hook_rows(mu, h, A, ev, R, wk)


@njit(cache=True)
def _scale(mode, ctx, x):
    return hook_scale(ctx[1], x)


@njit(cache=True)
def _lie_run_one(g0, eta0, mu0, lam0, h, nsteps, save_every, A, B, W, tolf, floor_tol, atol,
                 max_iter, refresh, max_stall, cbound, og, ov, op, olam, its, res, cres, fin,
                 out, mem):
    ev = _workspace()
    jv = _jac_workspace()
    J = np.empty((NX, NX))
    R = np.empty(NX)
    piv = np.empty(NX, np.int64)
    dx = np.empty(NX)
    x = np.empty(NX)
    wk = np.zeros(WK)
    hist = np.zeros((2, NX))
    g = g0.copy()
    eta = eta0.copy()
    mu = mu0.copy()
    lam = lam0.copy()
    lam1 = np.zeros(MM)
    vprev = eta0.copy()
    nhist = _memory_load(mem, hist, vprev)  # a continued run picks up its predictor
    eta1 = np.empty(D)
    mu1 = ev[14]
    g1 = ev[15]
    Lam = ev[16]
    ctx = (g, mu, lam1, h, A, B, W, ev, jv, wk)
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    for k in range(1, nsteps + 1):
        hook_first(g, eta, mu, lam, lam1, wk)
        hook_guess(eta, hist, nhist, vprev, lam, x)
        r, thr, it = _newton(0, ctx, x, R, J, piv, dx, tolf, floor_tol, atol, POLISH,
                             max_iter, refresh, max_stall, SIMPLIFIED)
        its[k - 1] = it
        res[k - 1] = r
        if not (r <= thr):
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = it
            break
        # (the evaluation at the solution is the last one: g1, mu1, Lam are current)
        hook_velocity(mu1, eta1, wk)
        if not (_finite(g1) and _finite(eta1) and _finite(mu1) and _finite(Lam[S - 1, :M])):
            status = 2
            break
        cr = hook_residual(g1, eta1, wk)
        cres[k - 1] = cr
        if not (cr <= cbound):
            status = 3
            fail_r = cr
            break
        nhist = _remember(hist, nhist, x)
        for c in range(D):
            vprev[c] = eta[c]
            eta[c] = eta1[c]
            mu[c] = mu1[c]
        for c in range(KK):
            g[c] = g1[c]
        for a in range(M):
            lam[a] = Lam[S - 1, a]
        done = k
        if k % save_every == 0:
            _save_node(og, ov, op, olam, k // save_every, g, eta, mu, lam[:M])
    _finish(fin, out, g, eta, mu, lam[:M], status, done, fail_r, fail_thr, fail_it)
    _memory_store(mem, hist, nhist, vprev)


# what a member keeps between runs (mem): the predictor's count, last solutions and last eta
MEM = 1 + 2 * NX + D
'''

#: The Lie engine's batch drivers (``run_serial``, ``run_parallel``: ``range`` / ``prange``
#: over the members, each calling the module's ``_lie_run_one``, with the Lie engine's
#: signature), reused by a Lie-group method with a step of its own.
LIE_BATCH_DRIVERS = '''

@njit(cache=True)
def run_serial(g0, eta0, mu0, lam0, h, nsteps, save_every, A, B, W, tolf, floor_tol, atol,
               max_iter, refresh, max_stall, cbound, og, ov, op, olam, its, res, cres, fin,
               out, mem):
    for b in range(g0.shape[0]):
        _lie_run_one(g0[b], eta0[b], mu0[b], lam0[b], h, nsteps, save_every, A, B, W, tolf,
                     floor_tol, atol, max_iter, refresh, max_stall, cbound, og[b], ov[b],
                     op[b], olam[b], its[b], res[b], cres[b], fin[b], out[b], mem[b])


@njit(cache=True, parallel=True)
def run_parallel(g0, eta0, mu0, lam0, h, nsteps, save_every, A, B, W, tolf, floor_tol, atol,
                 max_iter, refresh, max_stall, cbound, og, ov, op, olam, its, res, cres, fin,
                 out, mem):
    for b in prange(g0.shape[0]):
        _lie_run_one(g0[b], eta0[b], mu0[b], lam0[b], h, nsteps, save_every, A, B, W, tolf,
                     floor_tol, atol, max_iter, refresh, max_stall, cbound, og[b], ov[b],
                     op[b], olam[b], its[b], res[b], cres[b], fin[b], out[b], mem[b])
'''
LIE_ENGINE = _LIE_STEP + LIE_BATCH_DRIVERS

_HEADER = '''"""Generated by chetaev.discrete_lagrangian.core._compiled_lie (issue 17)."""
import math

import numpy as np
from numba import njit, prange

S = {s}
D = {d}
K = {k}
KK = {kk}
M = {m}
MM = {mm}
KF = {kf}
NX = {nx}
S1 = {s1}
STIFF = {stiff}
SIMPLIFIED = {simplified}
INERTIA = np.array({inertia!r})
INERTIA_INV = np.array({inertia_inv!r})
'''


def build_lie_source(kernels: LieKernelSet, kind: str, s: int, stiff: bool, kf: int,
                     hooks: str, simplified: bool) -> str:
    """The generated module: header constants, kernels, group piece, hooks, LU helpers and
    the Lie engine."""
    group = kernels.group
    d, m = int(kernels.n), int(kernels.m)
    k = int(group.shape[0])
    inertia = np.array(kernels.mass, dtype=float)
    head = _HEADER.format(
        s=s, d=d, k=k, kk=k * k, m=m, mm=max(m, 1), kf=kf, nx=s * d + kf * m,
        s1=s if stiff else s + 1, stiff=bool(stiff), simplified=bool(simplified),
        inertia=inertia.tolist(), inertia_inv=np.linalg.inv(inertia).tolist())
    return inline_small("\n".join([head, _jit_kernels(kernels.source),
                                    group_source(group, kind), hooks, LINALG, NEWTON,
                                    LIE_ENGINE]), names=("_eval", "_newton"))


@attrs.frozen(eq=False)
class LiePlan:
    """What a Lie method runs compiled on one system: the module source and its data."""

    source: str
    a: np.ndarray
    b: np.ndarray
    w: np.ndarray
    m: int
    options: Any  # NewtonOptions
    has_lam: bool
    elem_shape: tuple

    def module(self) -> Any:
        """The imported (and, on first use, compiled) module (kept per plan, outside it so
        that a method holding the plan pickles: no hashing of the source per step)."""
        return _plan_module(self)

    def run(self, state: Any, h: float, n_steps: int, save_every: int,
            cbound: float = math.inf) -> dict:
        """:func:`~chetaev.discrete_lagrangian.core._compiled_prk.run_compiled` for this
        plan (the same result dict; ``q`` holds group elements ``(n_saved, *batch, K, K)``)."""
        return _run(self, state, h, n_steps, save_every, cbound)

    def step(self, state: Any, h: float) -> Any:
        """One compiled step (``Method.step`` sets ``t`` and ``n``)."""
        from .._util._errors import ConvergenceError
        from ._state import State

        es = self.elem_shape
        g = np.asarray(state.q, dtype=float)
        if g.ndim != len(es):  # a batch: the general run
            out = self.run(state, h, 1, 1)
            status, (r, tol, it) = out["status"], out["fail"]
            f = out["final"]
            q1, v1, p1, lam1 = f["q"], f["v"], f["p"], f["lam"]
            its, res = int(out["its"].max(initial=0)), float(out["res"].max(initial=0.0))
            carry = out["carry"]
        else:  # one trajectory: the compiled call without the run's bookkeeping
            q1, v1, p1, lam1, status, r, tol, it, its, res, carry = _one_step(self, state, g, h)
        if status == 1:
            raise ConvergenceError(step=state.n, t=state.t, residual=r, tol=tol, iterations=it,
                                   hint="halve h, or increase NewtonOptions(max_iter=...)")
        info = {"newton_iterations": its, "residual": res, "backend": "numba"}
        return State(t=state.t + h, q=q1, v=v1, p=p1, lam=lam1, n=state.n + 1, carry=carry,
                     info=info)


def _one_step(plan: LiePlan, state: Any, g: np.ndarray, h: float) -> tuple:
    """One unbatched compiled step: ``(g1, η1, μ1, λ1, status, r, tol, it, its, res,
    carry)``."""
    kk, d, m = g.size, int(np.shape(state.v)[-1]), plan.m
    g0 = np.ascontiguousarray(g.reshape(1, kk))
    e0 = np.ascontiguousarray(np.asarray(state.v, dtype=float).reshape(1, d))
    p0 = np.ascontiguousarray(np.asarray(state.p, dtype=float).reshape(1, d))
    l0 = (np.ascontiguousarray(np.asarray(state.lam, dtype=float).reshape(1, m))
          if (m and state.lam is not None) else np.zeros((1, max(m, 1))))
    o = plan.options
    og, ov, op, olam = (np.empty((1, 2, kk)), np.empty((1, 2, d)), np.empty((1, 2, d)),
                        np.empty((1, 2, m)))
    its, res, cres = np.zeros((1, 1), np.int64), np.zeros((1, 1)), np.zeros((1, 1))
    fin, out = np.zeros((1, 4, max(kk, d, m))), np.zeros((1, 5))
    mod = plan.module()
    mem = memory_in(state, mod, 1)
    mod.run_serial(g0, e0, p0, l0, float(h), 1, 1, plan.a, plan.b, plan.w,
                   max(float(o.tol), 64.0 * _EPS), 64.0 * _EPS, float(o.atol),
                   int(o.max_iter), float(o.refresh_rate), int(o.max_stall),
                   math.inf, og, ov, op, olam, its, res, cres, fin, out, mem)
    lam1 = fin[0, 3, :m].copy() if plan.has_lam else None
    return (fin[0, 0, :kk].reshape(plan.elem_shape), fin[0, 1, :d].copy(),
            fin[0, 2, :d].copy(), lam1, int(out[0, 0]), float(out[0, 2]), float(out[0, 3]),
            int(out[0, 4]), int(its[0, 0]), float(res[0, 0]), memory_carry(mod, mem, ()))


def _run(plan: LiePlan, state: Any, h: float, n_steps: int, save_every: int,
         cbound: float) -> dict:
    es = plan.elem_shape
    kk = int(np.prod(es))
    g = np.asarray(state.q, dtype=float)
    batch = g.shape[: g.ndim - len(es)]
    d = int(np.shape(state.v)[-1])
    m = plan.m
    nb = int(np.prod(batch)) if batch else 1

    def flat(x, w):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=float),
                                                    (*batch, w))).reshape(nb, w)

    g0 = np.ascontiguousarray(g.reshape(nb, kk))
    eta0, mu0 = flat(state.v, d), flat(state.p, d)
    lam0 = flat(state.lam, m) if (m and state.lam is not None) else np.zeros((nb, max(m, 1)))
    mod = plan.module()
    o = plan.options
    tolf = max(float(o.tol), 64.0 * _EPS)
    mem0 = memory_in(state, mod, nb)

    def go(steps: int) -> tuple:
        ns = steps // save_every + 1
        og, ov, op = np.empty((nb, ns, kk)), np.empty((nb, ns, d)), np.empty((nb, ns, d))
        olam = np.empty((nb, ns, m))
        og[:, 0], ov[:, 0], op[:, 0], olam[:, 0] = g0, eta0, mu0, lam0[:, :m]
        its = np.zeros((nb, max(steps, 1)), np.int64)
        res, cres = np.zeros((nb, max(steps, 1))), np.zeros((nb, max(steps, 1)))
        fin, out = np.zeros((nb, 4, max(kk, d, m))), np.zeros((nb, 5))
        mem = mem0.copy()
        run = mod.run_parallel if nb > 1 else mod.run_serial
        run(g0, eta0, mu0, lam0, float(h), int(steps), int(save_every), plan.a, plan.b,
            plan.w, tolf, 64.0 * _EPS, float(o.atol), int(o.max_iter), float(o.refresh_rate),
            int(o.max_stall), float(cbound), og, ov, op, olam, its, res, cres, fin, out, mem)
        return og, ov, op, olam, its, res, cres, fin, out, mem

    og, ov, op, olam, its, res, cres, fin, out, mem = go(n_steps)
    done = out[:, 1].astype(np.int64)
    k = int(done.min())
    if k < n_steps and np.any(done != k):  # the batch stops at the first failing step
        og, ov, op, olam, its, res, cres, fin, out, mem = go(k)
    worst = int(np.argmin(done))
    nreg = k // save_every + 1

    def saved(arr, row, width, shape):
        arr = arr[:, :nreg]
        if k % save_every:
            arr = np.concatenate([arr, fin[:, None, row, :width]], axis=1)
        return np.moveaxis(arr, 0, 1).reshape(arr.shape[1], *batch, *shape)

    final = {"q": fin[:, 0, :kk].reshape(*batch, *es), "v": fin[:, 1, :d].reshape(*batch, d),
             "p": fin[:, 2, :d].reshape(*batch, d),
             "lam": fin[:, 3, :m].reshape(*batch, m) if plan.has_lam else None}
    return {
        "q": saved(og, 0, kk, es), "v": saved(ov, 1, d, (d,)), "p": saved(op, 2, d, (d,)),
        "lam": saved(olam, 3, m, (m,)) if plan.has_lam else None,
        "final": final, "done": k,
        "status": int(out[worst, 0]) if k < n_steps else 0,
        "fail": (float(out[worst, 2]), float(out[worst, 3]), int(out[worst, 4])),
        "its": its[:, :k].max(axis=0) if k else np.zeros(0, np.int64),
        "res": res[:, :k].max(axis=0) if k else np.zeros(0),
        "cres": cres[:, :k].max(axis=0) if k else np.zeros(0),
        "carry": memory_carry(mod, mem, batch),
    }


def lie_plan(kernels: Any, group: Any, kind: str, coeffs: Any, options: Any, *,
             hooks: str = PLAIN_LIE_HOOKS, kf: int = 0, has_lam: bool = False,
             simplified: bool | None = None) -> tuple[str, LiePlan | None]:
    """``(why_not, plan)`` of a Lie method on a system with ``kernels`` (module docstring:
    what runs compiled)."""
    if not isinstance(kernels, LieKernelSet) or kernels.group != group:
        return "a system whose kernels are not those of a trivialized system on its group", None
    if kernels.forced:
        return "a forced system (external forces run on numpy for now)", None
    if not kernels.mechanical:
        return "a Lagrangian that is not ½ηᵀ𝕀η − V(g) with constant 𝕀", None
    why = group_support(group, kind)
    if why:
        return why, None
    a = np.ascontiguousarray(coeffs.a, dtype=float)
    b = np.ascontiguousarray(coeffs.b, dtype=float)
    stiff = bool(np.array_equal(a[-1], b))
    w = np.ascontiguousarray(b[None, :] * a.T / b[:, None])
    simp = bool(options.simplified if simplified is None else simplified)
    src = build_lie_source(kernels, kind, coeffs.s, stiff, kf, hooks, simp)
    return "", LiePlan(source=src, a=a, b=b, w=w, m=int(kernels.m) if has_lam else 0,
                       options=options, has_lam=has_lam, elem_shape=tuple(group.shape))
