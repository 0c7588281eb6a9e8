"""The Lie-group PRK engine (VPRKMK and its constrained and nonholonomic versions), with hooks.

One residual and one analytic Jacobian for every Lie-group partitioned RK step of the
packages: :class:`~chetaev.discrete_lagrangian.LieVPRK` (paper Theorem 6.1, eqs. (24)–(27)),
its holonomic version (paper §6.3, through the hooks of ``methods._lie_vprk``), and the
nonholonomic Lie-group PRK of paper §6.4 / App. F, whose terms are hooks written in
``chetaev.nh_integrators._lie_core``. Given (g_k, μ_k) and unknowns H¹..Hˢ ∈ 𝔤 (plus free
multipliers Λⁱ and hook unknowns)::

    Ξⁱ = h Σⱼ aᵢⱼ Hʲ,   ξ = h Σⱼ bⱼ Hʲ,   Gⁱ = g_k τ(Ξⁱ),   Dᵢ = dLτ(Ξⁱ),   Ωⁱ = Dᵢ Hⁱ
    Fⁱ = L*_{Gⁱ} D₁ℓ(Gⁱ, Ωⁱ) + Fₕⁱ             (Fₕ: hook force, trivialized at Gⁱ)
    Π₀ⁱ = D₂ℓ(Gⁱ, Ωⁱ),   Πⁱ = Dᵢᵀ Π₀ⁱ,   Nⁱ = Dᵢᵀ Fⁱ + J^L(Ξⁱ, Hⁱ)ᵀ Π₀ⁱ
    Ñʲ = Ad*_{τ(−Ξʲ)} Fʲ   (= dLτ⁻¹(−Ξʲ)ᵀ Dⱼᵀ Fʲ)
    μ_{k+1} = Ad*_{τ(ξ)} [μ_k + h Σⱼ bⱼ Ñʲ],   g_{k+1} = g_k τ(ξ)                       (27)
    Rᵢ = Πⁱ − dLτ(ξ)ᵀ μ_{k+1} + h Σⱼ (bⱼ aⱼᵢ / bᵢ) Nʲ = 0,   i = 1..s                  (26)

(Ad*_g = Ad(g)ᵀ, covectors are arrays, pairing = dot product, J^L(Ξ, H) = d/dε dLτ(Ξ + εH)
contracted as in ``liegroups``' ``dL_tensor``.) Rᵢ is eq. (26) multiplied on the left by
dLτ(ξ)ᵀ — the inverse-free form of the homogeneous-spaces paper's eq. (3c): with
dLτ⁻¹(−ξ) = dLτ⁻¹(ξ) Ad_{τ(ξ)}⁻¹ and ddLτ*(Ξ; H, Π) = J^L(Ξ, H)ᵀ Π₀ the two are the same
equations for every pair, and no dLτ⁻¹ is evaluated. For a stiffly accurate pair (aₛⱼ = bⱼ,
Lobatto IIIA) ξ = Ξˢ and g_{k+1} = Gˢ. The evaluation exposes Ñʲ, so that a hook can form the
IIIA-weighted momenta of §6.4, μ_kⁱ = Ad*_{τ(Ξⁱ)} [μ_k + h Σⱼ aᵢⱼ Ñʲ], and impose
φ(Gⁱ, ηⁱ) = 0.

Unknowns ``x = [H (s·d), Λⁱ of the free stages (k·m), extra (e)]``. Every group map comes
from ``chetaev.liegroups`` (``retraction(group, kind).kernels``: τ, dLτ, its derivative tensor
``dL_tensor``, ``dL_deriv_T_deriv``, ``compose``, ``Ad_pair``).

Hooks
-----
A hooks object (duck typed, like the vector-space ones of ``_prk``) has

``m``, ``free`` : as in ``_prk`` (multipliers per stage; which Λⁱ are unknowns).
``n_extra`` : int, optional (default 0)
    Further unknowns that only the hook's equations see (e.g. the inner-stage velocities of
    a general ℓ), read as ``ev.x_extra`` ``(..., e)``.
``force(G, Omega, Lam)`` → ``(..., s, d)`` or None
    Extra trivialized force at Gⁱ (e.g. ``J(Gⁱ)ᵀ Λⁱ`` for a holonomic Φ, ``(∂φ/∂η)ᵀ Λⁱ``
    for a nonholonomic φ).
``equations(ev)`` → ``(..., E)`` or None: extra equations (E = free multiplier entries + e).

For the analytic Newton Jacobian, optionally:

``analytic_stage_jacobian()`` → bool
    Whether the two derivatives below are exact (else finite differences are used).
``force_jacobian(ev, zeta, dOm, dLam)`` → ``(..., s, d, n)`` or None
    δFₕ from the left-trivialized variation ζⁱ = Dᵢ δΞⁱ of Gⁱ, δΩⁱ and δΛⁱ (all
    ``(..., s, ·, n)`` arrays of derivatives with respect to the n unknowns).
``equations_jacobian(ev, D)`` → ``(..., E, n)`` or None
    The derivative of :meth:`equations`, from the stage derivatives ``D`` of
    :func:`stage_derivatives` (``zeta``, ``dNt``, ``dmu1``, ``dLam``, ``dX``, ``P``, ...).

External forces and controls (issue 20) are such a hook force:
:class:`~chetaev.discrete_lagrangian.core._forcing.ForcedLieStageHooks` adds the
left-trivialized F(Gⁱ, Ωⁱ, u) to Fⁱ (the forced discrete Lagrange–d'Alembert equations:
the force enters (26)–(27) like L*_{Gⁱ} D₁ℓ, dual to the retraction) around any other hooks.

Jacobian (issue 4: analytic when the system gives second derivatives — see
:func:`stage_derivatives` for the chain rule —, central finite differences of the residual in
one broadcast call otherwise).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import attrs
import numpy as np

from ._interface import interface_of
from ._prk import PRKCoefficients, unpack

__all__ = [
    "LieStageEvaluation",
    "lie_prk_jacobian",
    "lie_prk_residual",
    "lie_stage_jacobian",
    "solve_lie_stages",
    "stage_derivatives",
]

@attrs.define(eq=False)
class LieStageEvaluation:
    """Stage quantities of a Lie-group PRK step (s stages, algebra dimension d).

    ``H, Xi, Omega, F, P0, Pi, N, Nt`` are ``(..., s, d)``; ``G``, ``tau_Xi``
    ``(..., s, *group.shape)``; ``xi, mu1`` ``(..., d)``; ``g1`` ``(..., *group.shape)``;
    ``Lam`` ``(..., s, m)`` or None; ``x_extra`` ``(..., e)`` or None; ``Ad_tau_xi_T`` =
    Ad*_{τ(ξ)}; ``AdT`` = Ad(τ(Ξⁱ)) ``(..., s, d, d)``. ``extra`` holds the engine's
    intermediate arrays (dLτ, its tensor, ...) and whatever a hook stores.
    """

    g: np.ndarray
    mu: np.ndarray
    h: float
    coeffs: PRKCoefficients
    x: np.ndarray
    H: np.ndarray
    Xi: np.ndarray
    xi: np.ndarray
    G: np.ndarray
    tau_Xi: np.ndarray
    Omega: np.ndarray
    Lam: np.ndarray | None
    x_extra: np.ndarray | None
    F: np.ndarray
    P0: np.ndarray
    Pi: np.ndarray
    N: np.ndarray
    Nt: np.ndarray
    g1: np.ndarray
    mu1: np.ndarray
    AdT: np.ndarray
    Ad_tau_xi_T: np.ndarray
    extra: dict = attrs.field(factory=dict)


_PAIR: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _pair_data(coeffs: PRKCoefficients) -> tuple[bool, np.ndarray]:
    """``(stiff, w)``: whether aₛⱼ = bⱼ exactly (then ξ = Ξˢ, Lobatto IIIA) and the weights
    w[i, j] = bⱼ aⱼᵢ / bᵢ of (26); cached per coefficient object."""
    hit = _PAIR.get(coeffs)
    if hit is None:
        a, b = coeffs.a, coeffs.b
        w = b[None, :] * a.T / b[:, None]
        w.setflags(write=False)
        hit = _PAIR[coeffs] = (bool(np.array_equal(a[-1], b)), w)
    return hit


def _unpack(x, s, d, m, free, lam_fixed):
    """``unpack`` of ``_prk`` with a fast path for given multipliers on leading stages
    (the nonholonomic Λ¹); ``free`` is a tuple of bools."""
    if m == 0 or lam_fixed is None:
        return unpack(x, s, d, m, np.asarray(free, dtype=bool), lam_fixed)
    k = sum(free)
    if 0 < k < s and not free[0] and all(free[s - k:]):
        lead = x.shape[:-1]
        H = x[..., : s * d].reshape((*lead, s, d))
        lf = x[..., s * d: s * d + k * m].reshape((*lead, k, m))
        fixed = lam_fixed[..., : s - k, :]
        if fixed.shape[:-2] != lead:
            fixed = np.broadcast_to(fixed, (*lead, s - k, m))
        return H, np.concatenate([fixed, lf], axis=-2)
    return unpack(x, s, d, m, np.asarray(free, dtype=bool), lam_fixed)


def _cat(parts: list, axis: int = -1) -> np.ndarray:
    """Concatenate along ``axis``, broadcasting the leading axes only when they differ."""
    nt = -axis - 1  # trailing axes after the concatenation axis
    leads = {p.shape[: p.ndim - nt - 1] for p in parts}
    if len(leads) > 1:
        bs = np.broadcast_shapes(*leads)
        parts = [np.broadcast_to(p, (*bs, *p.shape[p.ndim - nt - 1:])) for p in parts]
    return np.concatenate(parts, axis=axis)


def _hook_shape(hooks: Any, s: int) -> tuple[int, tuple, int]:
    """``(m, free, n_extra)`` of a hooks object (``free`` as a tuple of bools)."""
    if hooks is None:
        return 0, (False,) * s, 0
    free = getattr(hooks, "free", (False,) * s)
    if type(free) is not tuple:
        free = tuple(bool(f) for f in free)
    return int(getattr(hooks, "m", 0)), free, int(getattr(hooks, "n_extra", 0))


def lie_prk_residual(
    x: np.ndarray,
    g: np.ndarray,
    mu: np.ndarray,
    h: float,
    coeffs: PRKCoefficients,
    system: Any,
    tau: Any,
    hooks: Any = None,
    lam_fixed: np.ndarray | None = None,
):
    """Residual of eq. (26) (inverse-free form, module docstring) plus the hook equations at
    the unknowns ``x`` (may carry extra leading axes). ``tau`` is a ``liegroups`` retraction.
    Returns ``(R, ev)`` with ``ev`` the :class:`LieStageEvaluation`."""
    view = interface_of(system)
    k = tau.kernels
    d = int(view.group.dim)
    s = coeffs.s
    gnd = len(tuple(view.group.shape))
    shape = m, free, e = _hook_shape(hooks, s)
    H, Lam = _unpack(x, s, d, m, free, lam_fixed)
    x_extra = x[..., x.shape[-1] - e:] if e else None
    a, b = coeffs.a, coeffs.b
    Xi = h * np.einsum("ij,...jd->...id", a, H)
    stiff, w = _pair_data(coeffs)
    if stiff:
        Xx = Xi
        xi = Xi[..., -1, :]
    else:
        xi = h * np.einsum("j,...jd->...d", b, H)
        Xx = np.concatenate([Xi, xi[..., None, :]], axis=-2)  # (..., s+1, d)
    T = k.tau(Xx)
    Dx = k.dL(Xx)
    AdTx, AdTinvTx = k.Ad_pair(T)  # Ad(τ(Ξ)), Ad*_{τ(−Ξ)}
    el = (slice(None),) * gnd
    if stiff:
        Ts, D, AdT, AdTinvT = T, Dx, AdTx, AdTinvTx
    else:
        Ts, D = T[(Ellipsis, slice(0, s), *el)], Dx[..., :s, :, :]
        AdT, AdTinvT = AdTx[..., :s, :, :], AdTinvTx[..., :s, :, :]
    G = k.compose(np.expand_dims(g, -1 - gnd), Ts)
    Tns = k.dL_tensor(Xi)  # (..., s, d, d, d)
    J = np.einsum("...bac,...a->...bc", Tns, H)  # J^L(Ξ, H)
    Om = np.einsum("...ij,...j->...i", D, H)
    F = view.D1L(G, Om)
    if hooks is not None:
        Fh = hooks.force(G, Om, Lam)
        if Fh is not None:
            F = F + Fh
    P0 = Om @ view.inertia.T if view.inertia is not None else view.D2L(G, Om)
    Pi = np.einsum("...ba,...b->...a", D, P0)
    Y = np.einsum("...ij,...j->...i", AdTinvT, F)
    nu = mu + h * np.einsum("j,...jd->...d", b, Y)
    Adxi = AdTx[..., -1, :, :]
    mu1 = np.einsum("...ba,...b->...a", Adxi, nu)
    N = np.einsum("...ba,...b->...a", D, F) + np.einsum("...bc,...b->...c", J, P0)
    Dxi = Dx[..., -1, :, :]
    R = (Pi - np.einsum("...ba,...b->...a", Dxi, mu1)[..., None, :]
         + h * np.einsum("ij,...jd->...id", w, N))
    R = R.reshape((*R.shape[:-2], s * d))
    g1 = G[(Ellipsis, -1, *el)] if stiff else k.compose(g, T[(Ellipsis, -1, *el)])
    ev = LieStageEvaluation(
        g=g, mu=mu, h=h, coeffs=coeffs, x=x, H=H, Xi=Xi, xi=xi, G=G, tau_Xi=Ts, Omega=Om,
        Lam=Lam, x_extra=x_extra, F=F, P0=P0, Pi=Pi, N=N, Nt=Y, g1=g1, mu1=mu1, AdT=AdT,
        Ad_tau_xi_T=Adxi.swapaxes(-1, -2),
        extra={"dL_Xi": D, "dL_xi": Dxi, "tensor": Tns, "J": J, "AdTinvT": AdTinvT,
               "stiff": stiff, "w": w, "hook_shape": shape},
    )
    if hooks is not None:
        R2 = hooks.equations(ev)
        if R2 is not None:
            R = (np.concatenate([R, R2], axis=-1) if R2.shape[:-1] == R.shape[:-1]
                 else _cat([R, R2]))
    return R, ev


@functools.lru_cache(maxsize=64)
def _unit_variations(s: int, d: int, m: int, free: tuple, e: int):
    """Constant derivative arrays of Hⁱ ``(s, d, n)``, Λⁱ ``(s, m, n)`` (zero rows for the
    given stages) and of the extra unknowns ``(e, n)`` with respect to x (n columns)."""
    k = sum(free)
    n = s * d + k * m + e
    dH = np.eye(s * d, n).reshape(s, d, n)
    dLam = np.zeros((s, m, n))
    col = s * d
    for i in range(s):
        if free[i]:
            dLam[i, :, col: col + m] = np.eye(m)
            col += m
    dX = np.zeros((e, n))
    dX[:, n - e:] = np.eye(e)
    for arr in (dH, dLam, dX):
        arr.setflags(write=False)
    return dH, dLam, dX


def stage_derivatives(ev: LieStageEvaluation, system: Any, tau: Any, hooks: Any = None) -> dict:
    """Derivatives of the stage quantities of (26) at ``ev`` with respect to the unknowns x
    (n columns), by the chain rule.

    With δΞⁱ = h Σₖ aᵢₖ δHᵏ, δξ = h Σₖ bₖ δHᵏ, ζⁱ = Dᵢ δΞⁱ (left-trivialized δGⁱ, δτ(Ξⁱ)),
    ζ = dLτ(ξ) δξ, Q_M(v) the Jacobian in Ξ of dLτ(Ξ)ᵀ v (``dL_tensor`` contracted) and
    S = ∂_Ξ (J^L(Ξ, H)ᵀ Π₀) (``dL_deriv_T_deriv``)::

        δΩ = D δH + J^L(Ξ, H) δΞ
        δF = D₁₁ℓ ζ + D₁₂ℓ δΩ + δFₕ,          δΠ₀ = D₂₁ℓ ζ + D₂₂ℓ δΩ
        δΠ = Q(Π₀) δΞ + Dᵀ δΠ₀
        δN = Q(F) δΞ + Dᵀ δF + Q(Π₀)ᵀ δH + S δΞ + J^Lᵀ δΠ₀
        δÑ = Ad*_{τ(−Ξ)} (δF − ad*_ζ F),   δμ₁ = ad*_{ζ_ξ} μ₁ + Ad*_{τ(ξ)} h Σⱼ bⱼ δÑʲ
        δRᵢ = δΠⁱ − Q_ξ(μ₁) δξ − dLτ(ξ)ᵀ δμ₁ + h Σⱼ wᵢⱼ δNʲ

    Returns a dict with ``dR`` ``(..., s, d, n)``, ``dH``, ``dLam``, ``dX`` (unit
    variations), ``dXi``, ``dxi``, ``zeta`` ``(..., s, d, n)``, ``zeta_xi`` ``(..., d, n)``,
    ``dOm``, ``dNt``, ``dmu1`` and ``P`` (f ↦ the matrix of ζ ↦ ad*_ζ f).
    """
    view = interface_of(system)
    k = tau.kernels
    c = ev.coeffs
    s, h = c.s, ev.h
    a, b = c.a, c.b
    d = int(view.group.dim)
    m, free, e = ev.extra["hook_shape"]
    dH, dLam, dX = _unit_variations(s, d, m, free, e)
    dXi = h * np.einsum("ik,kpU->ipU", a, dH)
    stiff = ev.extra["stiff"]
    dxi = dXi[-1] if stiff else h * np.einsum("k,kpU->pU", b, dH)
    D, Tns, J, Dxi = ev.extra["dL_Xi"], ev.extra["tensor"], ev.extra["J"], ev.extra["dL_xi"]
    G, Om, F, P0 = ev.G, ev.Omega, ev.F, ev.P0
    zeta = D @ dXi
    zxi = zeta[..., -1, :, :] if stiff else Dxi @ dxi
    dOm = D @ dH + J @ dXi
    if view.inertia is not None:
        dP0 = view.inertia @ dOm
        dF = view.D11L(G, Om) @ zeta
    else:
        dP0 = view.D22L(G, Om) @ dOm + view.D21L(G, Om) @ zeta
        dF = view.D11L(G, Om) @ zeta + view.D12L(G, Om) @ dOm
    fj = getattr(hooks, "force_jacobian", None) if hooks is not None else None
    if fj is not None:
        dFh = fj(ev, zeta, dOm, dLam)
        if dFh is not None:
            dF = dF + dFh
    DT = np.swapaxes(D, -1, -2)
    Q_P0 = np.einsum("...bac,...b->...ac", Tns, P0)
    Q_F = np.einsum("...bac,...b->...ac", Tns, F)
    dPi = Q_P0 @ dXi + DT @ dP0
    S = k.dL_deriv_T_deriv(ev.Xi, ev.H, P0)
    dN = (Q_F @ dXi + DT @ dF + np.swapaxes(Q_P0, -1, -2) @ dH + S @ dXi
          + np.swapaxes(J, -1, -2) @ dP0)
    dY = ev.extra["AdTinvT"] @ (dF - view.coadjoint_matrix(F) @ zeta)
    dnu = h * np.einsum("j,...jpU->...pU", b, dY)
    mu1 = ev.mu1
    dmu1 = view.coadjoint_matrix(mu1) @ zxi + ev.Ad_tau_xi_T @ dnu
    Tx = Tns[..., -1, :, :, :] if stiff else k.dL_tensor(ev.xi)
    Q_mu1 = np.einsum("...bac,...b->...ac", Tx, mu1)
    dDmu = Q_mu1 @ dxi + np.swapaxes(Dxi, -1, -2) @ dmu1
    dR = dPi - dDmu[..., None, :, :] + h * np.einsum("ij,...jpU->...ipU", ev.extra["w"], dN)
    return {"dR": dR, "dH": dH, "dLam": dLam, "dX": dX, "dXi": dXi, "dxi": dxi,
            "zeta": zeta, "zeta_xi": zxi, "dOm": dOm, "dNt": dY, "dmu1": dmu1,
            "P": view.coadjoint_matrix}


def lie_stage_jacobian(ev: LieStageEvaluation, system: Any, tau: Any,
                       hooks: Any = None) -> np.ndarray:
    """Exact Jacobian ``(..., N, N)`` of :func:`lie_prk_residual` (with the hook equations,
    from ``hooks.force_jacobian`` and ``hooks.equations_jacobian``)."""
    D = stage_derivatives(ev, system, tau, hooks)
    dR = D["dR"]
    dR = dR.reshape((*dR.shape[:-3], dR.shape[-3] * dR.shape[-2], dR.shape[-1]))
    if hooks is None:
        return dR
    dE = hooks.equations_jacobian(ev, D)
    if dE is None:  # hooks without equations (e.g. only an external stage force)
        return dR
    return _cat([dR, dE], axis=-2)


def lie_prk_jacobian(ev: LieStageEvaluation, system: Any, tau: Any) -> np.ndarray:
    """Exact Jacobian ``∂R/∂H`` ``(..., s d, s d)`` of the hook-free residual (26)."""
    return lie_stage_jacobian(ev, system, tau)


def solve_lie_stages(x0, g, mu, h, coeffs, system, tau, hooks, options, state,
                     lam_fixed=None):
    """Solve :func:`lie_prk_residual` = 0 with the one root finder: analytic Jacobian
    (:func:`lie_stage_jacobian`) for systems with closed-form second derivatives (and hooks
    whose derivatives are exact), else finite differences of the residual in one broadcast
    call.

    Returns ``(x, ev, iterations, residual, rate)``; raises :class:`ConvergenceError`.
    """
    from .._util._errors import ConvergenceError
    from ._solver import newton_solve

    view = interface_of(system)
    last: list = [None, None]

    def fun(x):
        R, ev = lie_prk_residual(x, g, mu, h, coeffs, view, tau, hooks, lam_fixed)
        last[0], last[1] = x, ev
        return R

    scale = 1.0 + np.max(np.abs(mu), axis=-1)
    analytic = view.analytic_second_derivatives and (
        hooks is None or (hasattr(hooks, "equations_jacobian")
                          and hooks.analytic_stage_jacobian()))
    if analytic:
        cache: dict = {}

        def fun_jac(x, want):
            # lazy: Newton asks for the Jacobian only when it needs another update, at the
            # point whose residual it already has (reuse that evaluation)
            if last[0] is not None and last[0].shape == x.shape and np.array_equal(last[0], x):
                R, ev = cache["R"], last[1]
            else:
                R, ev = lie_prk_residual(x, g, mu, h, coeffs, view, tau, hooks, lam_fixed)
                last[0], last[1], cache["R"] = np.array(x), ev, R
            if not want:
                return R, None
            return R, lie_stage_jacobian(ev, view, tau, hooks)

        fun_jac.lazy = True

        res = newton_solve(None, x0, options=options, scale=scale, fun_jac=fun_jac)
    else:
        res = newton_solve(fun, x0, None, options=options, scale=scale)
    if not res.all_converged:
        bad = ~res.converged
        raise ConvergenceError(
            step=state.n, t=state.t, residual=float(np.max(res.residual[bad])),
            tol=float(np.min(res.tol[bad])), iterations=res.iterations,
            hint="halve h, or increase NewtonOptions(max_iter=...)",
        )
    if last[0] is not None and last[0].shape == res.x.shape and np.array_equal(last[0], res.x):
        ev = last[1]
    else:
        _, ev = lie_prk_residual(res.x, g, mu, h, coeffs, view, tau, hooks, lam_fixed)
    return res.x, ev, res.iterations, float(np.max(res.residual)), res.rate
