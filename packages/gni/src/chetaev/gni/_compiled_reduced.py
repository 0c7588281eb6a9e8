"""The compiled reduced GNI step (issue 17): paper Def. 7.1, §7.2–§7.3 ((30)/(38)) in numba.

The compiled twin of :meth:`._reduced.ReducedGNI._step_impl` (unforced), one node
``(x_k, W_k, v_k, λ_k) → (x_{k+1}, W_{k+1}, v_{k+1}, λ_{k+1})``, ``v = (ẋ, ξ)``:

1. ``p⁻_k = G̃ v_k + (h/2) K(x_k)ᵀ λ_k`` (:func:`._reflection.pre_post_from_node`);
2. ``F l_d^−(x_k, w) = p⁻_k`` (paper (29)) for ``w = ((x_{k+1} − x_k)/h, ξ_k)``:
   rows ``(G̃w)_x + (h/2)∇V(x_k)`` and ``(dτ⁻¹_{R,σ})ᵀ (G̃w)_ξ``, ``σ = h w_ξ``; the warm start
   of the numpy step (one fixed-point sweep with the last increment's ``dτ⁻¹_R``), the chord
   Newton iteration with the matrix at the warm start and scale ``1 + max|p⁻_k|``, through
   the one compiled Newton driver (``NEWTON`` of ``chetaev.discrete_lagrangian.extending``,
   the rule of ``newton_solve`` unbatched), then the one extra chord correction of the numpy
   step (which takes the solve from the tolerance to round-off);
3. ``x_{k+1} = x_k + h w_x``; ``p⁺_{k+1} = F l_d^+ = ((G̃w)_x − (h/2)∇V(x_{k+1}),
   (dτ⁻¹_{L,σ})ᵀ (G̃w)_ξ)``; the node data ``(v_{k+1}, λ_{k+1}, p̄_{k+1})`` by the closed-form
   multiplier of (30b)/(38b) (the GNI's compiled ``_gni_node``, the twin of
   :func:`._reflection.node_from_post_momentum`); ``W_{k+1} = W_k τ(σ)`` (Remark 7.2);
   the post-condition residual ``max|K(x_{k+1}) v_{k+1} + a(x_{k+1})|``.

The group maps are the compiled source of ``chetaev.liegroups`` (:func:`~chetaev.liegroups.
compiled_source`): ``grp_dL`` (``dL τ_σ``), ``grp_tensor`` (its derivative), ``grp_tau``,
``grp_compose``; with ``τ(−σ) = τ(σ)⁻¹`` (exp and Cayley) ``dτ⁻¹_{R,σ} = (dL τ_{−σ})⁻¹`` and
``dτ⁻¹_{L,σ} = (dL τ_σ)⁻¹``, applied by LU solves, and the derivative of
``(dτ⁻¹_{R,σ})ᵀ g`` in ``σ_k`` is ``(dτ⁻¹_{R,σ})ᵀ T_kᵀ (dτ⁻¹_{R,σ})ᵀ g`` with
``T_k = ∂(dL τ)/∂σ_k`` at ``−σ``.

The system kernels (:func:`reduced_kernels`) are the constant metric (``D22L``), the
constraint ``K(x)`` (``phi_v``) and ``K(x) v + a(x)`` (``phi``), named as the symbolic
front-end's kernels so that the GNI's compiled node map runs on them unchanged, and
``∇V(x)`` (``red_grad_V``): written from the data of the :class:`~._reduced.ReducedSystem`
(constant ``constraint_matrix``, no potential or affine term) or taken from its
``compiled_kernels`` source for the parts given as callables.

The generated module reuses the LU factorisation, the max-norm, the Newton driver with the
step loop's bookkeeping and the serial / ``prange`` batch drivers (``LINALG``, ``NEWTON``,
``BATCH_DRIVERS``; ``_eval`` and ``_newton`` inlined), with its own ``_run_one`` of the
drivers' signature: the per-member configuration is the extended ``(x, W (flat), ξ_{k−1})``.
"""

from __future__ import annotations

import math
import re
import weakref
from typing import Any

import attrs
import numpy as np

from ._compiled_gni import GNI_STEP
from ._errors import InputError

__all__ = ["RED_STEP", "ReducedKernels", "ReducedPlan", "check_kernels", "reduced_kernels",
           "reduced_plan"]

_EPS = float(np.finfo(np.float64).eps)

# The GNI's compiled node map (8)/(26) from the post-momentum: the compiled twin of
# node_from_post_momentum, one definition (in GNI_STEP).
_NODE = GNI_STEP[GNI_STEP.index("@njit(cache=True)\ndef _gni_node("):
                 GNI_STEP.index("@njit(cache=True)\ndef _eval(")]

#: The reduced step and its loop (constants ``NS`` = n, ``D`` = group.dim, ``KK`` the entries
#: of a group element, ``METRIC`` the bundle metric; ``N``, ``M`` of the header).
RED_STEP = _NODE + '''
@njit(cache=True)
def _red_dL_T(X, sgn, E, Dm, Bt):
    # Bt = dL_tau(sgn X)^T (liegroups' compiled grp_dL): with tau(-X) = tau(X)^-1,
    # dR_inv(X) = dL_tau(-X)^-1 (sgn -1) and dL_inv(X) = dL_tau(X)^-1 (sgn 1)
    for i in range(D):
        E[i] = sgn * X[i]
    grp_dL(E, Dm)
    for i in range(D):
        for j in range(D):
            Bt[i, j] = Dm[j, i]


@njit(cache=True)
def _metric_times(w, Gw):
    for r in range(N):
        acc = 0.0
        for c in range(N):
            acc += METRIC[r, c] * w[c]
        Gw[r] = acc


@njit(cache=True)
def _eval(mode, ctx, w, R, J, jac):
    """NEWTON's evaluation: R = F l_d^-(x_k, w) - p_minus (rows (G w)_x + (h/2) grad V(x_k)
    and dR_inv(sigma)^T (G w)_s, sigma = h w_s, through the LU of Bt = dL_tau(-sigma)^T), or
    with jac its Jacobian J at w, the point of the last residual (_legendre_jacobian)."""
    pm, gv, h, Gw, sig, E, Dm, Bt, pivb, y, t1, t2, Tn, scale = ctx
    if jac:
        for r in range(NS):
            for c in range(N):
                J[r, c] = METRIC[r, c]
        for c in range(N):
            for i in range(D):
                t1[i] = METRIC[NS + i, c]
            _lu_solve(Bt, pivb, t1, t2)
            for i in range(D):
                J[NS + i, c] = t2[i]
        # d/dsigma_k of Bt^-1 g = Bt^-1 T_k^T y, T_k = d dL_tau / d sigma_k at -sigma
        for i in range(D):
            E[i] = -sig[i]
        grp_tensor(E, Tn)
        for k in range(D):
            for j in range(D):
                acc = 0.0
                for b in range(D):
                    acc += Tn[b, j, k] * y[b]
                t1[j] = acc
            _lu_solve(Bt, pivb, t1, t2)
            for i in range(D):
                J[NS + i, NS + k] += h * t2[i]
        return
    _metric_times(w, Gw)
    for i in range(D):
        sig[i] = h * w[NS + i]
    _red_dL_T(sig, -1.0, E, Dm, Bt)
    if not _lu_factor(Bt, pivb):
        for r in range(N):
            R[r] = math.nan
        return
    _lu_solve(Bt, pivb, Gw[NS:], y)
    for r in range(NS):
        R[r] = Gw[r] + gv[r] - pm[r]
    for i in range(D):
        R[NS + i] = y[i] - pm[NS + i]


@njit(cache=True)
def _scale(mode, ctx, x):
    # 1 + max|p_minus|, set up by _run_one
    return ctx[13]


@njit(cache=True)
def _run_one(q0, v0, p0, lam0, h, nsteps, save_every, A, AH, B, BH, tolf, atol, max_iter,
             refresh, max_stall, cbound, oq, ov, op, olam, its, res, cres, fin, out, mem):
    # q0: the extended configuration (x_k, W_k flat, xi_{k-1}) (the warm start's increment)
    z = np.zeros(N)
    Gm = np.empty((N, N))
    pivg = np.empty(N, np.int64)
    mu = np.empty((M, N))
    a = np.empty(M)
    Y = np.empty((M, N))
    C = np.empty((M, M))
    pivm = np.empty(M, np.int64)
    wv = np.empty(M)
    pm = np.empty(N)
    gv = np.empty(NS)
    Gw = np.empty(N)
    sig = np.empty(D)
    E = np.empty(D)
    Dm = np.empty((D, D))
    Bt = np.empty((D, D))
    pivb = np.empty(D, np.int64)
    y = np.empty(D)
    t1 = np.empty(D)
    t2 = np.empty(D)
    Tn = np.empty((D, D, D))
    w = np.empty(N)
    R = np.empty(N)
    J = np.empty((N, N))
    piv = np.empty(N, np.int64)
    dx = np.empty(N)
    rhs = np.empty(N)
    pp = np.empty(N)
    T = np.empty(KK)
    g1 = np.empty(KK)
    x1 = np.empty(NS)
    ph = np.empty(M)
    zq = q0.copy()
    x = zq[:NS]
    g = zq[NS:NS + KK]
    xi = zq[NS + KK:]
    v = v0.copy()
    p = p0.copy()
    lam = lam0.copy()
    lam1 = np.empty(M)
    v1 = np.empty(N)
    p1 = np.empty(N)
    ctx = (pm, gv, h, Gw, sig, E, Dm, Bt, pivb, y, t1, t2, Tn, 1.0)
    status = 0
    done = 0
    fail_r = 0.0
    fail_thr = 0.0
    fail_it = 0
    for k in range(1, nsteps + 1):
        # p_minus = G v + (h/2) K(x)^T lam (pre_post_from_node)
        phi_v(x, z, mu)
        mp = 0.0
        for c in range(N):
            acc = 0.0
            for l in range(N):
                acc += METRIC[c, l] * v[l]
            imp = 0.0
            for i in range(M):
                imp += mu[i, c] * lam[i]
            pm[c] = acc + 0.5 * h * imp
            mp = max(mp, abs(pm[c]))
        red_grad_V(x, z, gv)
        for c in range(NS):
            gv[c] = 0.5 * h * gv[c]
        # the warm start: one sweep with the last increment's dR_inv, then G^-1
        for c in range(N):
            rhs[c] = pm[c]
        for c in range(NS):
            rhs[c] -= gv[c]
        for i in range(D):
            sig[i] = h * xi[i]
        _red_dL_T(sig, -1.0, E, Dm, Bt)
        for i in range(D):
            acc = 0.0
            for j in range(D):
                acc += Bt[i, j] * rhs[NS + j]
            t1[i] = acc
        for i in range(D):
            rhs[NS + i] = t1[i]
        for r in range(N):
            for c in range(N):
                Gm[r, c] = METRIC[r, c]
        if not _lu_factor(Gm, pivg):
            status = 2
            break
        _lu_solve(Gm, pivg, rhs, w)
        ctx = (pm, gv, h, Gw, sig, E, Dm, Bt, pivb, y, t1, t2, Tn, 1.0 + mp)
        # chord Newton: the matrix at the warm start, kept for the step
        r, thr, it = _newton(0, ctx, w, R, J, piv, dx, tolf, 0.0, atol, -1.0, max_iter,
                             math.inf, max_stall, True)
        its[k - 1] = it
        res[k - 1] = r
        if not (r <= thr):
            status = 1
            fail_r = r
            fail_thr = thr
            fail_it = it
            break
        if it == 0:  # converged at the guess: the chord matrix there, for the correction
            _eval(0, ctx, w, R, J, True)
            if not _lu_factor(J, piv):
                status = 2
                break
        # the one extra chord correction of the numpy step (to round-off)
        _lu_solve(J, piv, R, dx)
        for c in range(N):
            w[c] -= dx[c]
        for c in range(NS):
            x1[c] = x[c] + h * w[c]
        for i in range(D):
            sig[i] = h * w[NS + i]
        # p_plus = F l_d^+(x1, w): (G w)_x - (h/2) grad V(x1), dL_inv(sigma)^T (G w)_s
        _metric_times(w, Gw)
        red_grad_V(x1, z, gv)
        for c in range(NS):
            pp[c] = Gw[c] - 0.5 * h * gv[c]
        _red_dL_T(sig, 1.0, E, Dm, Bt)
        if not _lu_factor(Bt, pivb):
            status = 2
            break
        _lu_solve(Bt, pivb, Gw[NS:], y)
        for i in range(D):
            pp[NS + i] = y[i]
        if not _gni_node(x1, pp, h, z, Gm, pivg, mu, a, Y, C, pivm, wv, lam1, p1, v1):
            status = 2
            break
        # W_{k+1} = W_k tau(sigma) (Remark 7.2)
        grp_tau(sig, T)
        grp_compose(g, T, g1)
        if not (_finite(x1) and _finite(v1) and _finite(p1) and _finite(lam1)
                and _finite(g1)):
            status = 2
            break
        phi(x1, v1, ph)
        cr = _maxabs(ph)  # inf for a NaN entry
        cres[k - 1] = cr
        if not (cr <= cbound):
            status = 3
            fail_r = cr
            break
        for c in range(NS):
            x[c] = x1[c]
        for c in range(KK):
            g[c] = g1[c]
        for i in range(D):
            xi[i] = w[NS + i]
        for c in range(N):
            v[c] = v1[c]
            p[c] = p1[c]
        for i in range(M):
            lam[i] = lam1[i]
        done = k
        if k % save_every == 0:
            _save_node(oq, ov, op, olam, k // save_every, zq, v, p, lam)
    _finish(fin, out, zq, v, p, lam, status, done, fail_r, fail_thr, fail_it)


# what a member keeps between runs (mem): nothing (g and the last increment travel in the
# state's carry)
MEM = 1
'''

#: The names a ``ReducedSystem(compiled_kernels=...)`` source defines, one per callable part.
_PARTS = ("potential_grad", "constraint_matrix", "constraint_affine")


@attrs.frozen(eq=False)
class ReducedKernels:
    """The scalar kernels of one :class:`~._reduced.ReducedSystem` (source text, no numba
    needed to build it): ``D22L`` (the metric), ``phi_v`` (``K(x)``), ``phi``
    (``K(x) v + a(x)``), ``red_grad_V`` (``∇V(x)``), each ``NAME(q, v, out)``, after the
    user's ``compiled_kernels``. ``n`` the velocity dimension ``N``, ``m`` the constraints."""

    source: str
    n: int
    m: int
    n_shape: int
    forced: bool = False


def _has(source: str, name: str) -> bool:
    return re.search(rf"^def {name}\(", source, re.M) is not None


def check_kernels(system: Any) -> None:
    """The kernels of ``system.compiled_kernels`` evaluated in plain Python at four points
    (a fixed interior one and three seeded normal ones; a seeded point where the system's
    own callable fails is skipped), against the system's callables of the same names: a
    kernel that computes something else is an error, not a silent divergence of the two
    backends. Several points, as the derivative checks use, so that a wrong kernel that
    happens to agree at one point is still caught.

    Raises
    ------
    InputError
        The source does not run, or a kernel fails or disagrees (relative 1e-12).
    """
    user = system.compiled_kernels or ""
    given = [name for name in _PARTS if callable(getattr(system, name)) and _has(user, name)]
    ns: dict[str, Any] = {"math": math, "np": np}
    try:
        exec(compile(user, "<ReducedSystem.compiled_kernels>", "exec"), ns)
    except Exception as err:
        raise InputError(f"ReducedSystem(compiled_kernels=...) does not run: {err!r}") from err
    n = system.n_shape
    rng = np.random.default_rng(_CHECK_SEED)
    points = [np.linspace(0.3, 0.9, n) if n > 1 else np.full(n, 0.4),
              *(0.5 * rng.standard_normal(n) for _ in range(3))]
    ref = {"potential_grad": system.grad_V, "constraint_matrix": system.K,
           "constraint_affine": system.a}
    for name in given:
        for i, x in enumerate(points):
            try:
                want = np.asarray(ref[name](x), dtype=float)
            except Exception:
                if i == 0:
                    raise
                continue  # outside the callable's own domain: nothing to compare
            got = np.zeros_like(want)
            try:
                ns[name](x.copy(), got)
            except Exception as err:
                raise InputError(f"ReducedSystem(compiled_kernels=...): {name}(x, out) fails "
                                 f"at x = {x}: {err!r}") from err
            bound = 1e-12 * max(1.0, float(np.max(np.abs(want), initial=0.0)))
            if not np.max(np.abs(got - want), initial=0.0) <= bound:
                raise InputError(
                    f"ReducedSystem(compiled_kernels=...): the kernel {name}(x, out) "
                    f"disagrees with the callable {name} at x = {x}: {got.tolist()} vs "
                    f"{want.tolist()}"
                )


#: The seed of the kernel check's points (fixed: the check is deterministic).
_CHECK_SEED = 20261127


_KERNELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def reduced_kernels(system: Any) -> tuple[str, ReducedKernels | None]:
    """``(why_not, kernels)`` of a :class:`~._reduced.ReducedSystem` (cached per system).

    A part given as data needs no kernel (the constant ``constraint_matrix``; no
    ``potential_grad``; no ``constraint_affine``); a part given as a Python callable needs
    its kernel in ``system.compiled_kernels`` (checked against the callable when the system
    is built, :func:`check_kernels`)."""
    hit = _KERNELS.get(system)
    if hit is not None:
        return hit
    user = system.compiled_kernels or ""
    n, N = system.n_shape, system.N
    missing = [name for name in _PARTS
               if callable(getattr(system, name)) and not _has(user, name)]
    if missing:
        out: tuple[str, ReducedKernels | None] = (", ".join(missing), None)
        _KERNELS[system] = out
        return out
    K = None if callable(system.constraint_matrix) else system.K(np.zeros(n))
    m = int(K.shape[0]) if K is not None else int(np.shape(system.K(np.zeros(n)))[-2])
    G = system.metric
    lines = [user, "def D22L(q, v, out):"]
    lines += [f"    out[{i}, {j}] = {float(G[i, j])!r}" for i in range(N) for j in range(N)]
    lines.append("\n\ndef phi_v(q, v, out):")
    if K is None:
        lines.append("    constraint_matrix(q, out)")
    else:
        lines += [f"    out[{i}, {j}] = {float(K[i, j])!r}" for i in range(m) for j in range(N)]
    lines.append("\n\ndef phi(q, v, out):")
    lines.append("    Km = np.empty((M, N))")
    lines.append("    phi_v(q, v, Km)")
    if system.constraint_affine is not None:
        lines.append("    constraint_affine(q, out)")
    else:
        lines.append("    for i in range(M):\n        out[i] = 0.0")
    lines += ["    for i in range(M):", "        acc = 0.0", "        for j in range(N):",
              "            acc += Km[i, j] * v[j]", "        out[i] = acc + out[i]"]
    lines.append("\n\ndef red_grad_V(q, v, out):")
    if system.potential_grad is not None:
        lines.append("    potential_grad(q, out)")
    else:
        lines.append("    for i in range(out.shape[0]):\n        out[i] = 0.0")
    src = "\n".join(lines) + "\n"
    out = ("", ReducedKernels(source=src, n=N, m=m, n_shape=n, forced=system.has_force))
    _KERNELS[system] = out
    return out


@attrs.frozen(eq=False)
class ReducedPlan:
    """What :class:`~._reduced.ReducedGNI` runs compiled on one system: the engine's
    :class:`~chetaev.discrete_lagrangian.extending.CompiledPlan` (the module source, the
    Newton options) and the layout of the extended configuration."""

    compiled: Any  # CompiledPlan
    n_shape: int
    dim: int
    elem_shape: tuple
    m: int

    @property
    def source(self) -> str:
        """The generated module's source."""
        return self.compiled.source

    def run(self, state: Any, h: float, n_steps: int, save_every: int,
            cbound: float = math.inf) -> dict:
        """The compiled loop: the result dict of ``run_compiled`` (``q`` the shape points),
        with ``final["g"]`` and ``final["xi"]`` the group element and the last increment,
        and ``carry`` the final state's carry (as the numpy step's)."""
        return _run(self, state, h, n_steps, save_every, cbound)

    def step(self, state: Any, h: float) -> Any:
        """One compiled step (``Method.step`` sets ``t`` and ``n``); raises
        ``ConvergenceError`` (step, time, residual) on a Newton failure and
        ``NonFiniteError`` on a non-finite or singular step."""
        from chetaev.discrete_lagrangian import State

        from ._errors import ConvergenceError

        out = self.run(state, h, 1, 1)
        if out["status"] == 1:
            r, tol, it = out["fail"]
            raise ConvergenceError(step=state.n, t=state.t, residual=r, tol=tol, iterations=it,
                                   hint="halve h, or increase NewtonOptions(max_iter=...)")
        f = out["final"]
        if out["status"] == 2:
            raise ConvergenceError(step=state.n, t=state.t, residual=math.inf,
                                   tol=float(self.compiled.options.tol), iterations=0,
                                   hint="the step is not finite (or singular): halve h")
        info = {"newton_iterations": int(out["its"].max(initial=0)),
                "residual": float(out["res"].max(initial=0.0)), "backend": "numba"}
        g1 = f["g"] if state.carry.get("g") is not None else None
        return State(t=state.t + h, q=f["q"], v=f["v"], p=f["p"], lam=f["lam"],
                     n=state.n + 1, carry={"g": g1, "xi": f["xi"]}, info=info)


def _run(plan: ReducedPlan, state: Any, h: float, n_steps: int, save_every: int,
         cbound: float) -> dict:
    n, d, m = plan.n_shape, plan.dim, plan.m
    N = n + d
    es = plan.elem_shape
    kk = int(np.prod(es))
    nz = n + kk + d
    x = np.asarray(state.q, dtype=float)
    v = np.asarray(state.v, dtype=float)
    g = state.carry.get("g")
    xi = state.carry.get("xi")
    batch = np.broadcast_shapes(x.shape[:-1], v.shape[:-1])
    nb = math.prod(batch)

    def flat(a, w):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=float),
                                                    (*batch, w))).reshape(nb, w)

    g_flat = (np.broadcast_to(np.eye(es[0]).reshape(kk), (nb, kk)) if g is None
              else np.asarray(np.broadcast_to(np.asarray(g, dtype=float), (*batch, *es))
                              ).reshape(nb, kk))
    z0 = np.ascontiguousarray(np.concatenate(
        [flat(x, n), g_flat, flat(v[..., n:] if xi is None else xi, d)], axis=1))
    v0, p0 = flat(v, N), flat(state.p, N)
    lam0 = flat(state.lam, m)
    opts = plan.compiled.options
    mod = plan.compiled.module()
    tolf = max(float(opts.tol), 64.0 * _EPS)
    nil = np.zeros((1, 1))

    def go(steps: int) -> tuple:
        ns = steps // save_every + 1
        oz, ov, op = np.empty((nb, ns, nz)), np.empty((nb, ns, N)), np.empty((nb, ns, N))
        olam = np.empty((nb, ns, m))
        oz[:, 0], ov[:, 0], op[:, 0], olam[:, 0] = z0, v0, p0, lam0
        its = np.zeros((nb, max(steps, 1)), np.int64)
        res, cres = np.zeros((nb, max(steps, 1))), np.zeros((nb, max(steps, 1)))
        fin, out = np.zeros((nb, 4, max(nz, N, m))), np.zeros((nb, 5))
        run = mod.run_parallel if nb > 1 else mod.run_serial
        run(z0, v0, p0, lam0, float(h), int(steps), int(save_every), nil, nil, nil[0],
            nil[0], tolf, float(opts.atol), int(opts.max_iter), float(opts.refresh_rate),
            int(opts.max_stall), float(cbound), oz, ov, op, olam, its, res, cres, fin, out,
            np.zeros((nb, 1)))
        return oz, ov, op, olam, its, res, cres, fin, out

    oz, ov, op, olam, its, res, cres, fin, out = go(n_steps)
    done = out[:, 1].astype(np.int64)
    k = int(done.min())
    if k < n_steps and np.any(done != k):  # the batch stops at the first failing step
        oz, ov, op, olam, its, res, cres, fin, out = go(k)
    worst = int(np.argmin(done))
    nreg = k // save_every + 1

    def saved(arr, row, width):
        arr = arr[:, :nreg, :width]
        if k % save_every:
            arr = np.concatenate([arr, fin[:, None, row, :width]], axis=1)
        return np.moveaxis(arr, 0, 1).reshape(arr.shape[1], *batch, width)

    final = {"q": fin[:, 0, :n].reshape(*batch, n),
             "g": fin[:, 0, n:n + kk].reshape(*batch, *es),
             "xi": fin[:, 0, n + kk:nz].reshape(*batch, d),
             "v": fin[:, 1, :N].reshape(*batch, N), "p": fin[:, 2, :N].reshape(*batch, N),
             "lam": fin[:, 3, :m].reshape(*batch, m)}
    return {
        "q": saved(oz, 0, n), "v": saved(ov, 1, N), "p": saved(op, 2, N),
        "lam": saved(olam, 3, m), "final": final, "done": k,
        # the carry of the last node (the numpy step's): W_k (None when the state had none)
        # and the increment xi_{k-1} of the warm start
        "carry": {"g": final["g"] if g is not None else None, "xi": final["xi"]},
        "status": int(out[worst, 0]) if k < n_steps else 0,
        "fail": (float(out[worst, 2]), float(out[worst, 3]), int(out[worst, 4])),
        "its": its[:, :k].max(axis=0) if k else np.zeros(0, np.int64),
        "res": res[:, :k].max(axis=0) if k else np.zeros(0),
        "cres": cres[:, :k].max(axis=0) if k else np.zeros(0),
    }


# One plan per (kernels, retraction, Newton options); an entry goes with its kernels.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def reduced_plan(method: Any, system: Any, kernels: ReducedKernels) -> tuple[str, Any]:
    """``(why_not, plan)`` of :class:`~._reduced.ReducedGNI` on ``system`` with ``kernels``:
    no external force, constraints present, a group and retraction with compiled source in
    ``chetaev.liegroups`` (SO(3), SE(2), SE(3), SO(2) with exp; matrix groups with Cayley)."""
    from chetaev.discrete_lagrangian.extending import (
        BATCH_DRIVERS,
        LINALG,
        NEWTON,
        CompiledPlan,
        build_source,
        inline_small,
    )
    from chetaev.liegroups import compiled_source, compiled_support

    if kernels.forced or system.has_force:
        return "a forced system (external forces run on numpy for now)", None
    if kernels.m < 1:
        return "a ReducedSystem without constraints", None
    group = system.group
    why = compiled_support(group, method.retraction)
    if why:
        return why, None
    per = _PLANS.setdefault(kernels, {})
    key = (method.retraction, method.newton)
    plan = per.get(key)
    if plan is None:
        es = tuple(int(s) for s in group.shape)
        d = int(group.dim)
        kk = int(np.prod(es))
        consts = (f"NS = {kernels.n_shape}\nD = {d}\nKK = {kk}\n"
                  f"METRIC = np.array({np.asarray(system.metric, float).tolist()!r})\n")
        engine = "\n\n".join([RED_STEP, LINALG, NEWTON, BATCH_DRIVERS])
        source = inline_small(build_source(kernels, 1, 0, compiled_source(group,
                                                                           method.retraction),
                                           True, consts, engine=engine),
                              names=("_eval", "_newton"))
        nil = np.zeros((1, 1))
        inner = CompiledPlan(source=source, a=nil, ahat=nil, b=np.zeros(1), bhat=np.zeros(1),
                             m=kernels.m, options=method.newton, has_lam=True)
        plan = ReducedPlan(compiled=inner, n_shape=kernels.n_shape, dim=d, elem_shape=es,
                           m=kernels.m)
        per[key] = plan
    return "", plan
