"""The compiled steps of the Lie-group discretization-map methods (issue 17).

The compiled twin of :class:`._dmaps_lie.LieDiscretizationMapMethod` (paper §6, App. A) for
an unconstrained, unforced left-trivialized system ``ℓ = ½ηᵀ𝕀η − V(g)`` with constant 𝕀
built by ``chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian`` (its
:class:`~chetaev.discrete_lagrangian.core._compiled_lie.LieKernelSet`: ``lt_force`` is
``−f``, ``f`` the left-trivialized gradient of ``V``), on a group and retraction (Cayley or
exp) of :func:`chetaev.liegroups.compiled_source`. One step ``(g_k, α_k) → (g_{k+1},
α_{k+1})``, with ``dR⁻¹(x) = dL⁻¹(−x)`` (``dL`` the retraction's trivialized tangent,
``grp_dL``; its inverse transpose applied by an LU solve):

* Euler A / B (paper §6.2; ``c = h``): Newton on ``ξ`` for
  ``dR⁻¹(cξ)ᵀ𝕀ξ − α_k [+ c f(g_k)] = 0`` (``+ c f`` for Euler A), then
  ``g_{k+1} = g_k τ(cξ)``, ``α_{k+1} = dL⁻¹(cξ)ᵀ𝕀ξ [− c f(g_{k+1})]`` (``− c f`` for
  Euler B);
* ``lobatto2`` ((6.4)–(6.7)): Euler A with ``c = h/2``, then Euler B with ``c = h/2`` from
  its end point (two solves per step; iterations summed, the larger residual kept);
* RATTLE ((6.8)–(6.10); ``c = h/2``): Newton on ``(ξ, ξ̄)`` for
  ``dR⁻¹(cξ)ᵀ𝕀ξ + c f(g_k) − α_k = 0`` and ``dL⁻¹(cξ)ᵀ𝕀ξ − dR⁻¹(cξ̄)ᵀ𝕀ξ̄ = 0``, then
  ``g_{k+1} = g_k τ(cξ) τ(cξ̄)``, ``α_{k+1} = dL⁻¹(cξ̄)ᵀ𝕀ξ̄ − c f(g_{k+1})``;

``ξ_{k+1} = 𝕀⁻¹α_{k+1}``. Same unknowns, residual, initial guess (``ξ = 𝕀⁻¹α_k`` for every
velocity unknown) and scale (``max(1, max|α_k|)``) as the numpy step, through the one
compiled Newton driver (``NEWTON`` of ``chetaev.discrete_lagrangian.extending``: the rule of
``newton_solve`` unbatched, full or simplified as ``NewtonOptions.simplified``) with the
analytic Jacobian: for ``E = dL(y)``, ``y = s c ξ`` (``s = ±1``), ``u = E⁻ᵀ𝕀ξ`` and the
tangent tensor ``∂E_ba/∂y_k`` (``grp_tensor``),
``∂/∂ξ [dL⁻¹(s c ξ)ᵀ𝕀ξ] = E⁻ᵀ(𝕀 − s c Q)``, ``Q_ak = Σ_b ∂E_ba/∂y_k u_b`` (the numpy
``_momentum_jac``).

The generated module is the Lie engine's header (``core._compiled_lie``: ``D``, ``KK``,
``NX``, ``INERTIA``, ``INERTIA_INV``, ``SIMPLIFIED``), the system's kernels, the group piece
of :func:`chetaev.liegroups.compiled_source`, this step (:data:`LIE_DMAP_STEP`, constant
``KIND``), the PRK engine's LU, Newton and ``_take`` work-buffer pieces and the Lie engine's
batch drivers around ``_lie_run_one``, which has the Lie engine's signature: the plan is a
:class:`~chetaev.discrete_lagrangian.core._compiled_lie.LiePlan`, so ``integrate``'s compiled
loop and ``Method.step`` run it as the LieVPRK's, and a Newton failure reports step, time and
residual as every compiled engine.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

__all__ = ["LIE_DMAP_STEP", "compiled_plan"]

#: The compiled Lie discretization-map step and the loop over the steps (module docstring):
#: ``KIND`` 0 Euler A, 1 Euler B, 2 RATTLE, 3 lobatto2; the modes of ``_eval`` are the
#: solves 0 (Euler A), 1 (Euler B) and 2 (RATTLE).
LIE_DMAP_STEP = '''
@njit(cache=True)
def _ldm_tinv(X, w, E, Et, piv, u):
    # u = dL(X)^-T w; Et holds the LU of dL(X)^T (for _ldm_block); False when singular
    grp_dL(X, E)
    for a in range(D):
        for b in range(D):
            Et[a, b] = E[b, a]
    if not _lu_factor(Et, piv):
        for a in range(D):
            u[a] = math.nan
        return False
    _lu_solve(Et, piv, w, u)
    return True


@njit(cache=True)
def _ldm_inertia(M, v, out):
    # out = M v (M: INERTIA or INERTIA_INV)
    for a in range(D):
        acc = 0.0
        for b in range(D):
            acc += M[a, b] * v[b]
        out[a] = acc


@njit(cache=True)
def _ldm_momentum(xi, s, c, wk):
    # wk[5] = dL(s c xi)^-T I xi (the LU of dL(s c xi)^T kept in wk[2]); False when singular
    X, w, E, Et, piv, u, Tn, Q, col, sol = wk
    for a in range(D):
        X[a] = s * c * xi[a]
    _ldm_inertia(INERTIA, xi, w)
    return _ldm_tinv(X, w, E, Et, piv, u)


@njit(cache=True)
def _ldm_block(xi, s, c, sign, J, r0, c0, wk):
    # J[r0:r0+D, c0:c0+D] = sign d/dxi [dL(s c xi)^T^-1 I xi] = sign E^-T (I - s c Q)
    X, w, E, Et, piv, u, Tn, Q, col, sol = wk
    ok = _ldm_momentum(xi, s, c, wk)
    grp_tensor(X, Tn)
    for a in range(D):
        for k in range(D):
            acc = 0.0
            for b in range(D):
                acc += Tn[b, a, k] * u[b]
            Q[a, k] = INERTIA[a, k] - s * c * acc
    for k in range(D):
        for a in range(D):
            col[a] = Q[a, k]
        if ok:
            _lu_solve(Et, piv, col, sol)
        for a in range(D):
            J[r0 + a, c0 + k] = sign * sol[a] if ok else math.nan


@njit(cache=True)
def _ldm_force(g, z, f):
    # f = the left-trivialized gradient of V = -lt_force
    lt_force(g, z, f)
    for a in range(D):
        f[a] = -f[a]


@njit(cache=True)
def _eval(mode, ctx, x, R, J, jac):
    # NEWTON's evaluation: mode 0 Euler A, 1 Euler B (x = xi), 2 RATTLE (x = (xi, xib));
    # with jac the Jacobian at x
    a0, f0, c, scale, wk = ctx
    if jac:
        _ldm_block(x[:D], -1.0, c, 1.0, J, 0, 0, wk)
        if mode == 2:
            for a in range(D):
                for b in range(D):
                    J[a, D + b] = 0.0
            _ldm_block(x[:D], 1.0, c, 1.0, J, D, 0, wk)
            _ldm_block(x[D:], -1.0, c, -1.0, J, D, D, wk)
        return
    u = wk[5]
    _ldm_momentum(x[:D], -1.0, c, wk)
    if mode == 2:
        for a in range(D):
            R[a] = u[a] + c * f0[a] - a0[a]
        _ldm_momentum(x[:D], 1.0, c, wk)
        for a in range(D):
            R[D + a] = u[a]
        _ldm_momentum(x[D:], -1.0, c, wk)
        for a in range(D):
            R[D + a] -= u[a]
        return
    for a in range(D):
        R[a] = u[a] - a0[a]
        if mode == 0:
            R[a] += c * f0[a]


@njit(cache=True)
def _scale(mode, ctx, x):
    # max(1, max|alpha_k|), set up per solve
    return ctx[3]


@njit(cache=True)
def _ldm_solve(mode, g0, a0, c, f0, z, x, R, J, piv, dx, wk, tolf, atol, max_iter, refresh,
               max_stall):
    # one Phase-1 solve from (g0, a0): guess xi = I^-1 a0 for every velocity unknown
    if mode != 1:
        _ldm_force(g0, z, f0)
    amax = 0.0
    for a in range(D):
        amax = max(amax, abs(a0[a]))
    _ldm_inertia(INERTIA_INV, a0, x[:D])
    if mode == 2:
        for a in range(D):
            x[D + a] = x[a]
    ctx = (a0, f0, c, max(1.0, amax), wk)
    # (NX = 2 D in a RATTLE module, D in the others: x is the solve's unknowns)
    return _newton(mode, ctx, x, R, J, piv, dx, tolf, 0.0, atol, -1.0, max_iter, refresh,
                   max_stall, SIMPLIFIED)


@njit(cache=True)
def _ldm_end(mode, g0, c, x, z, T, gm, g1, a1, f1, wk):
    # the end point of a solve: g1 = g0 tau(c xi) [tau(c xib)], a1 = dL(c xi_last)^-T I xi_last
    # [- c f(g1)] (Euler B, RATTLE)
    X = wk[0]
    for a in range(D):
        X[a] = c * x[a]
    grp_tau(X, T)
    grp_compose(g0, T, g1)
    last = x[:D]
    if mode == 2:
        last = x[D:]
        for a in range(D):
            X[a] = c * last[a]
        grp_tau(X, T)
        for k in range(KK):
            gm[k] = g1[k]
        grp_compose(gm, T, g1)
    _ldm_momentum(last, 1.0, c, wk)
    u = wk[5]
    for a in range(D):
        a1[a] = u[a]
    if mode != 0:
        _ldm_force(g1, z, f1)
        for a in range(D):
            a1[a] -= c * f1[a]


@njit(cache=True)
def _lie_run_one(g0, eta0, mu0, lam0, h, nsteps, save_every, A, B, W, tolf, floor_tol, atol,
                 max_iter, refresh, max_stall, cbound, og, ov, op, olam, its, res, cres, fin,
                 out, mem):
    # the Lie engine's signature (A, B, W, floor_tol unused); every work array a view of one
    # zeroed buffer (_take)
    buf = np.zeros(3 * KK + 14 * D + 5 * D * D + D * D * D + NX * NX + 4 * NX)
    X, o = _take(buf, 0, (D,))
    w, o = _take(buf, o, (D,))
    E, o = _take(buf, o, (D, D))
    Et, o = _take(buf, o, (D, D))
    pivd, o = _take(buf, o, (D,))
    u, o = _take(buf, o, (D,))
    Tn, o = _take(buf, o, (D, D, D))
    Q, o = _take(buf, o, (D, D))
    col, o = _take(buf, o, (D,))
    sol, o = _take(buf, o, (D,))
    wk = (X, w, E, Et, pivd, u, Tn, Q, col, sol)
    T, o = _take(buf, o, (KK,))
    gm, o = _take(buf, o, (KK,))
    g1, o = _take(buf, o, (KK,))
    g, o = _take_copy(buf, o, g0)
    eta, o = _take_copy(buf, o, eta0)
    mu, o = _take_copy(buf, o, mu0)
    am, o = _take(buf, o, (D,))
    a1, o = _take(buf, o, (D,))
    f0, o = _take(buf, o, (D,))
    f1, o = _take(buf, o, (D,))
    z, o = _take(buf, o, (D,))
    x, o = _take(buf, o, (NX,))
    R, o = _take(buf, o, (NX,))
    J, o = _take(buf, o, (NX, NX))
    piv, o = _take(buf, o, (NX,))  # the pivots' indices, as floats
    dx, o = _take(buf, o, (NX,))
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    c = 0.5 * h if KIND >= 2 else h
    for k in range(1, nsteps + 1):
        mode = 0 if KIND == 3 else KIND
        r, thr, it = _ldm_solve(mode, g, mu, c, f0, z, x, R, J, piv, dx, wk, tolf, atol,
                                max_iter, refresh, max_stall)
        its[k - 1] = it
        res[k - 1] = r
        if r <= thr and KIND == 3:  # lobatto2: Euler B(h/2) from the end of Euler A(h/2)
            _ldm_end(0, g, c, x, z, T, gm, g1, am, f1, wk)
            for q in range(KK):
                gm[q] = g1[q]
            mode = 1
            r, thr, it = _ldm_solve(1, gm, am, c, f0, z, x, R, J, piv, dx, wk, tolf, atol,
                                    max_iter, refresh, max_stall)
            its[k - 1] += it
            res[k - 1] = max(res[k - 1], r)
        if not (r <= thr):
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = it
            break
        if KIND == 3:
            _ldm_end(1, gm, c, x, z, T, g, g1, a1, f1, wk)
        else:
            _ldm_end(mode, g, c, x, z, T, gm, g1, a1, f1, wk)
        _ldm_inertia(INERTIA_INV, a1, am)
        if not (_finite(g1) and _finite(am) and _finite(a1)):
            status = 2
            break
        cres[k - 1] = 0.0
        for q in range(KK):
            g[q] = g1[q]
        for a in range(D):
            eta[a] = am[a]
            mu[a] = a1[a]
        done = k
        if k % save_every == 0:
            _save_node(og, ov, op, olam, k // save_every, g, eta, mu, lam0[:M])
    _finish(fin, out, g, eta, mu, lam0[:M], status, done, fail_r, fail_thr, fail_it)
    buf[0] = 0.0  # the buffer outlives its views


# what a member keeps between runs (mem): nothing, the step starts from its state
MEM = 1
'''

#: The ``KIND`` constant of each method kind.
_KINDS = {"euler_a": 0, "euler_b": 1, "rattle": 2, "lobatto2": 3}

#: Imports of the ``_take`` piece (the PRK engine's header has them, the Lie engine's not).
_TAKE_IMPORTS = '''
from numba import carray
from numba.core import cgutils, types
from numba.extending import intrinsic
'''

# One plan per (kernels, kind, retraction, Newton options); an entry goes with its kernels.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_plan(kind: str, retraction: str, newton: Any, system: Any,
                  iface: Any) -> tuple[str, Any]:
    """``(why_not, plan)`` of the compiled step of ``LieDiscretizationMapMethod(kind,
    retraction, newton)`` on ``system`` (module docstring): compiled for an unconstrained,
    unforced ``ℓ = ½ηᵀ𝕀η − V(g)`` with kernels on a group and retraction of
    :func:`chetaev.liegroups.compiled_support`, with the analytic Jacobian.

    Parameters
    ----------
    kind : {"euler_a", "euler_b", "lobatto2", "rattle"}
    retraction : {"cayley", "exp"}
    newton : NewtonOptions
    system : Any
    iface : SystemInterface
        ``system``'s interface (``kernels`` not None).

    Returns
    -------
    tuple[str, LiePlan or None]
        ``("", plan)``, or the reason and None.
    """
    from ..core._compiled_lie import (
        _HEADER,
        LIE_BATCH_DRIVERS,
        LieKernelSet,
        LiePlan,
        group_source,
        group_support,
    )
    from ..core._compiled_prk import LINALG, NEWTON, TAKE, _jit_kernels, inline_small

    k = iface.kernels
    group = iface.group
    if group is None:
        return "a vector-space system (use DiscretizationMapMethod)", None
    if iface.is_constrained or k.constraint is not None:
        return ("a constrained system (a constraint on a group has no compiled kernels; "
                "runs on numpy)"), None
    if k.forced or iface.force is not None:
        return "a forced system (external forces run on numpy for now)", None
    if not isinstance(k, LieKernelSet) or k.group != group:
        return "a system whose kernels are not those of a trivialized system on its group", None
    if not k.mechanical or k.mass is None:
        return "a Lagrangian that is not ½ηᵀ𝕀η − V(g) with constant 𝕀", None
    if newton.finite_differences:
        return "NewtonOptions(finite_differences=True) (the compiled Jacobian is analytic)", None
    why = group_support(group, retraction)
    if why:
        return why, None
    per = _PLANS.setdefault(k, {})
    key = (kind, retraction, newton)
    plan = per.get(key)
    if plan is None:
        d = int(k.n)
        kk = int(np.prod(group.shape))
        nx = 2 * d if kind == "rattle" else d
        inertia = np.array(k.mass, dtype=float)
        head = _HEADER.format(
            s=1, d=d, k=int(group.shape[0]), kk=kk, m=0, mm=1, kf=0, nx=nx, s1=1, stiff=True,
            simplified=bool(newton.simplified), inertia=inertia.tolist(),
            inertia_inv=np.linalg.inv(inertia).tolist())
        source = inline_small("\n".join([
            head, _TAKE_IMPORTS, f"KIND = {_KINDS[kind]}\n", _jit_kernels(k.source),
            group_source(group, retraction), LINALG, NEWTON, TAKE, LIE_DMAP_STEP,
            LIE_BATCH_DRIVERS]),
            names=("_eval", "_newton"))
        plan = LiePlan(source=source, a=np.zeros((1, 1)), b=np.zeros(1), w=np.zeros((1, 1)),
                       m=0, options=newton, has_lam=False, elem_shape=tuple(group.shape))
        per[key] = plan
    return "", plan
