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

Group pieces (:func:`group_source`): the group's scalar formulas, one numba function per map,
each the same formula as the ``chetaev.liegroups`` kernel it mirrors (agreement to 1e-14
tested in ``tests/test_compiled_lie.py``). Cayley:

=====================  =======================================================
compiled               mirrors (``chetaev.liegroups``)
=====================  =======================================================
``grp_tau``            ``retraction(G, "cayley").kernels.tau`` (SO3 ``_cay_core``;
                       Rⁿ factor ``Rn._k_cay`` as a homogeneous block; other matrix
                       groups ``MatrixLieGroup.cay``: (I − X/2)⁻¹(I + X/2))
``grp_dL``             ``kernels.dL`` (SO3 ``_cay_dl_core``; Rⁿ: identity;
                       ``MatrixLieGroup.cay_dL``)
``grp_tensor``         ``kernels.dL_tensor`` (SO3 ``_k_cay_dL_tensor``; Rⁿ: 0; else the
                       ``Retraction._dL_tensor_k`` fallback through ``cay_dL_deriv``)
``grp_S``              ``kernels.dL_deriv_T_deriv`` (SO3 ``_k_cay_dL_deriv_T_deriv``; else
                       the ``_dL_deriv_T_deriv_k`` fallback through ``cay_dL_hess``)
``grp_Ad_pair``        ``kernels.Ad_pair`` (SO3 ``_k_Ad_pair``: (R, R); Rⁿ: (I, I); else
                       ``MatrixLieGroup._k_Ad_pair`` with Ad(g) d = vee(g hat(d) g⁻¹))
``grp_compose``        ``kernels.compose`` (block matrix products, ``Product._k_compose``)
``grp_coad``           ``SystemInterface.coadjoint_matrix`` (ζ ↦ ad*_ζ f from ``group.ad``)
=====================  =======================================================

exp (``retraction(G, "exp").kernels``; ``grp_Ad_pair``, ``grp_compose``, ``grp_coad`` as
above): the closed forms of SO(3), SE(2), SE(3), SO(2) written through the functions
f_n(θ²) of ``chetaev.liegroups`` (``ftab``: f₀..f₉ with liegroups' half-angle
forms, upward recursion, and its power series below the thresholds
:data:`chetaev.liegroups.SERIES_THETA_SQ` with its coefficients, both read from liegroups
when the source is generated), and their s-derivatives (``FTable.df, d2f, d3f``):

=====================  =======================================================
compiled               mirrors (``chetaev.liegroups``)
=====================  =======================================================
``so3_exp_tau``        ``_so3._exp_core`` (Rodrigues: f₀ I + f₁ X + f₂ w wᵀ)
``so3_exp_dL``         ``_so3._exp_dl_core`` (f₁ I − f₂ X + f₃ w wᵀ)
``so3_exp_tensor``     ``dL_tensor`` fallback: ``_numerics.iso_jac`` at the unit vectors
``so3_exp_S``          ``dL_deriv_T_deriv`` fallback: ``iso_hess`` at the unit vectors
``se2_exp_*``          ``SE2Group.exp, exp_dL, exp_dL_deriv, exp_dL_hess``
``se3_exp_*``          ``SE3Group.exp, exp_dL, exp_dL_deriv, exp_dL_hess`` (through the SO(3)
                       ``iso_jac, iso_hess, iso_third``)
``so2_exp_tau``        ``SO2Group.exp`` (dL = 1: zero tensor and S)
=====================  =======================================================

Rⁿ factors: exp = Cayley = translation (``rn_tau``, identity dL).

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

from ._compiled_prk import LINALG, NEWTON, _jit_kernels, _plan_module, inline_small
from ._kernels import KernelSet

__all__ = [
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
_SO3_CAYLEY = '''
@njit(cache=True)
def so3_hat_entry(v, o, b, a):
    # hat(v)[b, a] of the 3-vector v[o:o+3] (liegroups' hat3)
    if b == 0 and a == 1:
        return -v[o + 2]
    if b == 0 and a == 2:
        return v[o + 1]
    if b == 1 and a == 0:
        return v[o + 2]
    if b == 1 and a == 2:
        return -v[o]
    if b == 2 and a == 0:
        return -v[o + 1]
    if b == 2 and a == 1:
        return v[o]
    return 0.0


@njit(cache=True)
def so3_iso(w, o, a, b, c, M, r, K):
    # a I + b hat(w) + c w w^T (liegroups' iso_from_coeffs) into the block at (r, r) of the
    # flat K x K matrix M
    for i in range(3):
        cwi = c * w[o + i]
        for j in range(3):
            val = cwi * w[o + j]
            if i == j:
                val += a
            else:
                val += b * so3_hat_entry(w, o, i, j)
            M[(r + i) * K + r + j] = val


@njit(cache=True)
def so3_cay_tau(X, o, T, r, K):
    # SO3._cay_core: k = 4/(4 + s), (1 - k s/2) I + k hat(w) + (k/2) w w^T
    s = X[o] * X[o] + X[o + 1] * X[o + 1] + X[o + 2] * X[o + 2]
    k = 4.0 / (4.0 + s)
    so3_iso(X, o, 1.0 - 0.5 * k * s, k, 0.5 * k, T, r, K)


@njit(cache=True)
def so3_cay_dL(X, o, Dm):
    # SO3._cay_dl_core: d = 2/(4 + s), 2d I - d hat(w)
    s = X[o] * X[o] + X[o + 1] * X[o + 1] + X[o + 2] * X[o + 2]
    d = 2.0 / (4.0 + s)
    for i in range(3):
        for j in range(3):
            if i == j:
                Dm[o + i, o + j] = 2.0 * d
            else:
                Dm[o + i, o + j] = -d * so3_hat_entry(X, o, i, j)


@njit(cache=True)
def so3_cay_tensor(X, o, Tn):
    # SO3._k_cay_dL_tensor: T[b, a, c] = -4c^2 M_ba w_c - 2c hat(e_c)_ba, M = 2I - hat(w)
    s = X[o] * X[o] + X[o + 1] * X[o + 1] + X[o + 2] * X[o + 2]
    c = 1.0 / (4.0 + s)
    f = -4.0 * c * c
    for b in range(3):
        for a in range(3):
            Mba = (2.0 if a == b else 0.0) - so3_hat_entry(X, o, b, a)
            for cc in range(3):
                e = -0.5 * (b - a) * (a - cc) * (cc - b)  # hat(e_c)[b, a] = -eps_bac
                Tn[o + b, o + a, o + cc] = f * Mba * X[o + cc] - 2.0 * c * e


@njit(cache=True)
def so3_cay_S(X, E, P, o, S):
    # SO3._k_cay_dL_deriv_T_deriv: m = mu^T (2 eta - w x eta), x = eta x mu,
    # S = 16c^3 m w w^T + 4c^2 (w x^T + x w^T) - 4c^2 m I
    w0, w1, w2 = X[o], X[o + 1], X[o + 2]
    e0, e1, e2 = E[o], E[o + 1], E[o + 2]
    p0, p1, p2 = P[o], P[o + 1], P[o + 2]
    c = 1.0 / (4.0 + (w0 * w0 + w1 * w1 + w2 * w2))
    m = (p0 * (2.0 * e0 - (w1 * e2 - w2 * e1)) + p1 * (2.0 * e1 - (w2 * e0 - w0 * e2))
         + p2 * (2.0 * e2 - (w0 * e1 - w1 * e0)))
    x0 = e1 * p2 - e2 * p1
    x1 = e2 * p0 - e0 * p2
    x2 = e0 * p1 - e1 * p0
    c2 = 4.0 * c * c
    c3 = 16.0 * c ** 3 * m
    w = (w0, w1, w2)
    x = (x0, x1, x2)
    for i in range(3):
        for j in range(3):
            v = c3 * (w[i] * w[j]) + c2 * (w[i] * x[j] + x[i] * w[j])
            if i == j:
                v -= c2 * m
            S[o + i, o + j] = v


@njit(cache=True)
def so3_Ad_pair(T, r, K, o, Ad, AdiT):
    # SO3._k_Ad_pair: Ad(R) = R, Ad(R^T)^T = R
    for i in range(3):
        for j in range(3):
            Ad[o + i, o + j] = T[(r + i) * K + r + j]
            AdiT[o + i, o + j] = T[(r + i) * K + r + j]
'''

_RN_BLOCK = '''
@njit(cache=True)
def rn_tau(X, o, n, T, r, K):
    # Rn._k_cay (= exp) as the homogeneous block of a product: [I w; 0 1]
    for i in range(n + 1):
        for j in range(n + 1):
            T[(r + i) * K + r + j] = 1.0 if i == j else 0.0
    for i in range(n):
        T[(r + i) * K + r + n] = X[o + i]


@njit(cache=True)
def rn_eye(o, n, Mx):
    for i in range(n):
        Mx[o + i, o + i] = 1.0
'''


_MATRIX_CAYLEY = '''
@njit(cache=True)
def mc_inv(A):
    # the inverse of a small matrix through the engine's LU (liegroups: np.linalg.inv/solve)
    k = A.shape[0]
    LU = A.copy()
    piv = np.empty(k, np.int64)
    inv = np.full((k, k), math.nan)
    if not _lu_factor(LU, piv):
        return inv
    e = np.zeros(k)
    col = np.empty(k)
    for j in range(k):
        e[:] = 0.0
        e[j] = 1.0
        _lu_solve(LU, piv, e, col)
        inv[:, j] = col
    return inv


@njit(cache=True)
def mc_hat(X, o, Gen):
    k = Gen.shape[1]
    Xh = np.zeros((k, k))
    for j in range(Gen.shape[0]):
        Xh += X[o + j] * Gen[j]
    return Xh


@njit(cache=True)
def mc_AB(X, o, Gen):
    # MatrixLieGroup._cay_AB: A = I - hat(xi)/2, B = I + hat(xi)/2
    k = Gen.shape[1]
    Xh = mc_hat(X, o, Gen)
    A = np.eye(k) - 0.5 * Xh
    B = np.eye(k) + 0.5 * Xh
    return A, B


@njit(cache=True)
def mc_vee(Vm, M, b):
    # component b of vee(M) (the group's _k_vee as a linear map)
    k = M.shape[0]
    acc = 0.0
    for i in range(k):
        for j in range(k):
            acc += Vm[b, i * k + j] * M[i, j]
    return acc


@njit(cache=True)
def mc_tau(X, o, Gen, T, r, K):
    # MatrixLieGroup.cay: A^{-1} B
    A, B = mc_AB(X, o, Gen)
    C = mc_inv(A) @ B
    k = Gen.shape[1]
    for i in range(k):
        for j in range(k):
            T[(r + i) * K + r + j] = C[i, j]


@njit(cache=True)
def mc_dL(X, o, Gen, Vm, Dm):
    # MatrixLieGroup.cay_dL: dL(xi) d = vee(B^{-1} hat(d) A^{-1})
    A, B = mc_AB(X, o, Gen)
    Ai = mc_inv(A)
    Bi = mc_inv(B)
    d = Gen.shape[0]
    for c in range(d):
        M = Bi @ Gen[c] @ Ai
        for b in range(d):
            Dm[o + b, o + c] = mc_vee(Vm, M, b)


@njit(cache=True)
def mc_tensor(X, o, Gen, Vm, Tn):
    # Retraction.dL_tensor fallback: T[b, a, c] = cay_dL_deriv(xi, e_a)[b, c] with
    # J d = vee(B^{-1} (hat(eta) A^{-1} hat(d) - hat(d) B^{-1} hat(eta)) A^{-1} / 2)
    A, B = mc_AB(X, o, Gen)
    Ai = mc_inv(A)
    Bi = mc_inv(B)
    d = Gen.shape[0]
    for a in range(d):
        for c in range(d):
            M = 0.5 * (Bi @ (Gen[a] @ Ai @ Gen[c] - Gen[c] @ Bi @ Gen[a]) @ Ai)
            for b in range(d):
                Tn[o + b, o + a, o + c] = mc_vee(Vm, M, b)


@njit(cache=True)
def mc_S(X, E, P, o, Gen, Vm, S):
    # Retraction.dL_deriv_T_deriv fallback: S[c, e] = sum_b mu_b cay_dL_hess(xi, eta, e_c)[b, e]
    A, B = mc_AB(X, o, Gen)
    Q = mc_inv(A)
    Pm = mc_inv(B)
    H = mc_hat(E, o, Gen)
    d = Gen.shape[0]
    PHQ = Pm @ H @ Q
    for c in range(d):
        U = Gen[c]
        PUP = Pm @ U @ Pm
        QUQ = Q @ U @ Q
        M1 = PUP @ H @ Q
        M4 = PHQ @ U @ Q
        for e in range(d):
            De = Gen[e]
            M = 0.25 * (Pm @ De @ (M1 - M4) + PUP @ De @ PHQ + PHQ @ De @ QUQ
                        + (M4 - M1) @ De @ Q)
            acc = 0.0
            for b in range(d):
                acc += P[o + b] * mc_vee(Vm, M, b)
            S[o + c, o + e] = acc


@njit(cache=True)
def mc_Ad_pair(T, r, K, o, Gen, Vm, Ad, AdiT):
    # Ad(g) d = vee(g hat(d) g^{-1}); Ad_pair = (Ad(g), Ad(g^{-1})^T) (MatrixLieGroup._k_Ad_pair)
    k = Gen.shape[1]
    g = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            g[i, j] = T[(r + i) * K + r + j]
    gi = mc_inv(g)
    d = Gen.shape[0]
    for c in range(d):
        M = g @ Gen[c] @ gi
        Mi = gi @ Gen[c] @ g
        for b in range(d):
            Ad[o + b, o + c] = mc_vee(Vm, M, b)
            AdiT[o + c, o + b] = mc_vee(Vm, Mi, b)
'''

_EXP_PIECES = '''
@njit(cache=True)
def ser(n, s):
    # liegroups' _series(n, s): sum_k SER_C[n, k] s^k over its SER_N[n] terms
    acc = 0.0
    pw = 1.0
    for k in range(SER_N[n]):
        acc += SER_C[n, k] * pw
        pw *= s
    return acc


@njit(cache=True)
def ftab(s, nmax):
    # f_0..f_nmax of s = theta^2 (liegroups' FTable: half-angle closed forms of f_0..f_2,
    # the upward recursion f_n = (1/(n-2)! - f_{n-2})/s, the series below SER_THR[n])
    F = np.empty(10)
    if s < SER_THR[0]:
        F[0] = ser(0, s)
        F[1] = ser(1, s)
        F[2] = ser(2, s)
    else:
        th = math.sqrt(s)
        half = 0.5 * th
        sht = math.sin(half) / th
        F[2] = 2.0 * sht * sht
        F[1] = 2.0 * sht * math.cos(half)
        F[0] = 1.0 - s * F[2]
    for n in range(3, nmax + 1):
        if s < SER_THR[n]:
            F[n] = ser(n, s)
        else:
            F[n] = (INV_FACT[n - 2] - F[n - 2]) / s
    return F


@njit(cache=True)
def f_d1(F, n):
    # FTable.df: (n f_{n+2} - f_{n+1}) / 2
    return 0.5 * (n * F[n + 2] - F[n + 1])


@njit(cache=True)
def f_d2(F, n):
    # FTable.d2f
    return 0.25 * (n * (n + 2) * F[n + 4] - (2 * n + 1) * F[n + 3] + F[n + 2])


@njit(cache=True)
def f_d3(F, n):
    # FTable.d3f
    return 0.125 * (n * (n + 2) * (n + 4) * F[n + 6] - 3 * (n * n + 3 * n + 1) * F[n + 5]
                    + 3 * (n + 1) * F[n + 4] - F[n + 3])


@njit(cache=True)
def v3(X, o):
    return (X[o], X[o + 1], X[o + 2])


@njit(cache=True)
def cr3(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@njit(cache=True)
def dt3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True)
def e3(k):
    return (1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0)


@njit(cache=True)
def hat3e(v, b, a):
    # hat(v)[b, a] of a 3-tuple
    if b == a:
        return 0.0
    if b == 0:
        return -v[2] if a == 1 else v[1]
    if b == 1:
        return v[2] if a == 0 else -v[0]
    return -v[1] if a == 0 else v[0]


@njit(cache=True)
def so3_exp_cf(F, order):
    # _so3._exp_dl_coeffs: exp dL = r I + p X + q X^2, r = 1, p = -f_2, q = f_3 and their
    # s-derivatives (those of r vanish): (p, q, p1, q1, p2, q2, p3, q3)
    p1 = q1 = p2 = q2 = p3 = q3 = 0.0
    if order >= 1:
        p1 = -f_d1(F, 2)
        q1 = f_d1(F, 3)
    if order >= 2:
        p2 = -f_d2(F, 2)
        q2 = f_d2(F, 3)
    if order >= 3:
        p3 = -f_d3(F, 2)
        q3 = f_d3(F, 3)
    return (-F[2], F[3], p1, q1, p2, q2, p3, q3)


@njit(cache=True)
def iso2(w, a, b, c, M, ro, co):
    # a I + b hat(w) + c w w^T (iso_from_coeffs) into M[ro:ro+3, co:co+3]
    for i in range(3):
        cwi = c * w[i]
        for j in range(3):
            val = cwi * w[j]
            if i == j:
                val += a
            else:
                val += b * hat3e(w, i, j)
            M[ro + i, co + j] = val


@njit(cache=True)
def iso_jac(w, e, p, q, r1, p1, q1, J):
    # _numerics.iso_jac: the Jacobian in w of r e + p w x e + q w x (w x e)
    we = cr3(w, e)
    wwe = cr3(w, we)
    wet = dt3(w, e)
    for b in range(3):
        ub = r1 * e[b] + p1 * we[b] + q1 * wwe[b]
        for c in range(3):
            val = 2.0 * ub * w[c] - p * hat3e(e, b, c) + q * (w[b] * e[c] - 2.0 * e[b] * w[c])
            if b == c:
                val += q * wet
            J[b, c] = val


@njit(cache=True)
def iso_hess(w, e, v, q, r1, p1, q1, r2, p2, q2, H):
    # _numerics.iso_hess: the Jacobian in w of iso_jac(w, e) v
    we = cr3(w, e)
    wwe = cr3(w, we)
    wv = dt3(w, v)
    wet = dt3(w, e)
    ev = dt3(e, v)
    exv = cr3(e, v)
    for b in range(3):
        ub = r1 * e[b] + p1 * we[b] + q1 * wwe[b]
        u2b = r2 * e[b] + p2 * we[b] + q2 * wwe[b]
        tb = wet * v[b] + w[b] * ev - 2.0 * e[b] * wv
        for c in range(3):
            du = 2.0 * u2b * w[c] - p1 * hat3e(e, b, c) + q1 * (w[b] * e[c] - 2.0 * e[b] * w[c])
            pp = v[b] * e[c] - 2.0 * e[b] * v[c]
            if b == c:
                du += q1 * wet
                pp += ev
            H[b, c] = (2.0 * ub * v[c] + 2.0 * wv * du - 2.0 * p1 * exv[b] * w[c]
                       + 2.0 * q1 * tb * w[c] + q * pp)


@njit(cache=True)
def iso_third(w, e, x, y, p1, q1, r2, p2, q2, r3, p3, q3, T):
    # _numerics.iso_third: the Jacobian in w of iso_hess(w, e, x) y
    s = dt3(w, w)
    a2 = r2 - 2.0 * q1 - s * q2
    a3 = r3 - 3.0 * q2 - s * q3
    wx = dt3(w, x)
    wy = dt3(w, y)
    wet = dt3(w, e)
    xy = dt3(x, y)
    xe = dt3(x, e)
    ye = dt3(y, e)
    w_e = cr3(w, e)
    x_e = cr3(x, e)
    y_e = cr3(y, e)
    kxy = 4.0 * q2 * wx * wy + 2.0 * q1 * xy
    diag = kxy * wet + 2.0 * q1 * (wx * ye + wy * xe)
    hc = 4.0 * p2 * wx * wy + 2.0 * p1 * xy
    for b in range(3):
        vec2 = a2 * e[b] + p2 * w_e[b] + q2 * wet * w[b]
        vec3 = a3 * e[b] + p3 * w_e[b] + q3 * wet * w[b]
        dqx = x[b] * wet + w[b] * xe
        dqy = y[b] * wet + w[b] * ye
        kw = (8.0 * wx * wy * vec3 + 4.0 * xy * vec2 + 4.0 * p2 * (wx * y_e[b] + wy * x_e[b])
              + 4.0 * q2 * (wx * dqy + wy * dqx) + 2.0 * q1 * (x[b] * ye + y[b] * xe))
        kx = 4.0 * wy * vec2 + 2.0 * p1 * y_e[b] + 2.0 * q1 * dqy
        ky = 4.0 * wx * vec2 + 2.0 * p1 * x_e[b] + 2.0 * q1 * dqx
        ke = kxy * w[b] + 2.0 * q1 * (wx * y[b] + wy * x[b])
        for c in range(3):
            val = kw * w[c] + kx * x[c] + ky * y[c] + ke * e[c] - hc * hat3e(e, b, c)
            if b == c:
                val += diag
            T[b, c] = val


@njit(cache=True)
def so3_exp_tau(X, o, T, r, K):
    # SO3._exp_core (Rodrigues): f_0 I + f_1 hat(w) + f_2 w w^T
    w = v3(X, o)
    F = ftab(dt3(w, w), 2)
    so3_iso(X, o, F[0], F[1], F[2], T, r, K)


@njit(cache=True)
def so3_exp_dL(X, o, Dm):
    # SO3._exp_dl_core: f_1 I - f_2 hat(w) + f_3 w w^T
    w = v3(X, o)
    F = ftab(dt3(w, w), 3)
    iso2(w, F[1], -F[2], F[3], Dm, o, o)


@njit(cache=True)
def so3_exp_tensor(X, o, Tn):
    # Retraction._dL_tensor_k fallback: T[b, a, c] = exp_dL_deriv(w, e_a)[b, c] (iso_jac)
    w = v3(X, o)
    p, q, p1, q1, p2, q2, p3, q3 = so3_exp_cf(ftab(dt3(w, w), 5), 1)
    J = np.empty((3, 3))
    for a in range(3):
        iso_jac(w, e3(a), p, q, 0.0, p1, q1, J)
        for b in range(3):
            for c in range(3):
                Tn[o + b, o + a, o + c] = J[b, c]


@njit(cache=True)
def so3_exp_S(X, E, P, o, S):
    # Retraction._dL_deriv_T_deriv_k fallback: S[c, e] = sum_b mu_b exp_dL_hess(w, eta, e_c)[b, e]
    w = v3(X, o)
    e = v3(E, o)
    p, q, p1, q1, p2, q2, p3, q3 = so3_exp_cf(ftab(dt3(w, w), 7), 2)
    H = np.empty((3, 3))
    for c in range(3):
        iso_hess(w, e, e3(c), q, 0.0, p1, q1, 0.0, p2, q2, H)
        for j in range(3):
            acc = 0.0
            for b in range(3):
                acc += P[o + b] * H[b, j]
            S[o + c, o + j] = acc


@njit(cache=True)
def so2_exp_tau(X, o, T, r, K):
    # SO2.exp: the rotation by omega
    c = math.cos(X[o])
    s = math.sin(X[o])
    T[r * K + r] = c
    T[r * K + r + 1] = -s
    T[(r + 1) * K + r] = s
    T[(r + 1) * K + r + 1] = c


@njit(cache=True)
def se2_exp_tau(X, o, T, r, K):
    # SE2.exp: [[R(omega), f_1 v + omega f_2 J v], [0, 1]]
    v0, v1, w = X[o], X[o + 1], X[o + 2]
    F = ftab(w * w, 2)
    c, s = F[0], w * F[1]
    T[r * K + r] = c
    T[r * K + r + 1] = -s
    T[(r + 1) * K + r] = s
    T[(r + 1) * K + r + 1] = c
    T[r * K + r + 2] = F[1] * v0 + (w * F[2]) * (-v1)
    T[(r + 1) * K + r + 2] = F[1] * v1 + (w * F[2]) * v0
    T[(r + 2) * K + r] = 0.0
    T[(r + 2) * K + r + 1] = 0.0
    T[(r + 2) * K + r + 2] = 1.0


@njit(cache=True)
def se2_exp_dL(X, o, Dm):
    # SE2.exp_dL: [[f_1 I - omega f_2 J, u], [0, 1]], u = f_2 J v + omega f_3 v
    v0, v1, w = X[o], X[o + 1], X[o + 2]
    F = ftab(w * w, 3)
    a, b = F[1], -w * F[2]
    Dm[o, o] = a
    Dm[o, o + 1] = -b
    Dm[o + 1, o] = b
    Dm[o + 1, o + 1] = a
    Dm[o, o + 2] = F[2] * (-v1) + (w * F[3]) * v0
    Dm[o + 1, o + 2] = F[2] * v0 + (w * F[3]) * v1
    Dm[o + 2, o] = 0.0
    Dm[o + 2, o + 1] = 0.0
    Dm[o + 2, o + 2] = 1.0


@njit(cache=True)
def se2_exp_tensor(X, o, Tn):
    # T[b, a, c] = SE2.exp_dL_deriv(xi, e_a)[b, c]
    v0, v1, w = X[o], X[o + 1], X[o + 2]
    F = ftab(w * w, 4)
    f1, f2, f3, f4 = F[1], F[2], F[3], F[4]
    for a in range(3):
        m0 = 1.0 if a == 0 else 0.0
        m1 = 1.0 if a == 1 else 0.0
        mw = 1.0 if a == 2 else 0.0
        aa, bb = mw * w * f3, mw * f2
        Tn[o, o + a, o] = aa
        Tn[o, o + a, o + 1] = -bb
        Tn[o + 1, o + a, o] = bb
        Tn[o + 1, o + a, o + 1] = aa
        g1 = w * (f3 - f2)
        g2 = f1 - f2
        g3 = mw * w * (2.0 * f4 - f3)
        g4 = mw * (f2 - 2.0 * f3)
        Tn[o, o + a, o + 2] = g1 * m0 - g2 * (-m1) + g3 * (-v1) + g4 * v0
        Tn[o + 1, o + a, o + 2] = g1 * m1 - g2 * m0 + g3 * v0 + g4 * v1
        for c in range(3):
            Tn[o + 2, o + a, o + c] = 0.0


@njit(cache=True)
def se2_exp_S(X, E, P, o, S):
    # S[c, e] = sum_b mu_b SE2.exp_dL_hess(xi, eta, e_c)[b, e]
    v0, v1, w = X[o], X[o + 1], X[o + 2]
    m0, m1, mw = E[o], E[o + 1], E[o + 2]
    F = ftab(w * w, 5)
    f1, f2, f3, f4, f5 = F[1], F[2], F[3], F[4], F[5]
    eps_, zeta = w * (2.0 * f4 - f3), f2 - 2.0 * f3
    gamma_p = 2.0 * f2 - 2.0 * f3 - f1
    delta_p = w * (2.0 * f3 - f2 - 2.0 * f4)
    eps_p = 4.0 * f3 - 6.0 * f4 - f2
    zeta_p = w * (4.0 * f4 - f3 - 6.0 * f5)
    for cc in range(3):
        a0 = 1.0 if cc == 0 else 0.0
        a1 = 1.0 if cc == 1 else 0.0
        aw = 1.0 if cc == 2 else 0.0
        c, d = aw * mw * zeta, aw * mw * eps_
        col0 = ((mw * eps_) * (-a1) + (mw * zeta) * a0 + (aw * gamma_p) * m0
                - (aw * delta_p) * (-m1) + (aw * mw * eps_p) * (-v1) + (aw * mw * zeta_p) * v0)
        col1 = ((mw * eps_) * a0 + (mw * zeta) * a1 + (aw * gamma_p) * m1
                - (aw * delta_p) * m0 + (aw * mw * eps_p) * v0 + (aw * mw * zeta_p) * v1)
        S[o + cc, o] = P[o] * c + P[o + 1] * d
        S[o + cc, o + 1] = -P[o] * d + P[o + 1] * c
        S[o + cc, o + 2] = P[o] * col0 + P[o + 1] * col1


@njit(cache=True)
def se3_exp_tau(X, o, T, r, K):
    # SE3.exp: [[exp(omega), v + f_2 omega x v + f_3 omega x (omega x v)], [0, 1]]
    v = v3(X, o)
    w = v3(X, o + 3)
    F = ftab(dt3(w, w), 3)
    so3_iso(X, o + 3, F[0], F[1], F[2], T, r, K)
    wv = cr3(w, v)
    wwv = cr3(w, wv)
    for i in range(3):
        T[(r + i) * K + r + 3] = v[i] + F[2] * wv[i] + F[3] * wwv[i]
        T[(r + 3) * K + r + i] = 0.0
    T[(r + 3) * K + r + 3] = 1.0


@njit(cache=True)
def se3_exp_dL(X, o, Dm):
    # SE3.exp_dL: [[D, M], [0, D]], D the SO(3) exp dL of omega, M[:, k] = J(omega, e_k) v
    v = v3(X, o)
    w = v3(X, o + 3)
    F = ftab(dt3(w, w), 5)
    iso2(w, F[1], -F[2], F[3], Dm, o, o)
    iso2(w, F[1], -F[2], F[3], Dm, o + 3, o + 3)
    p, q, p1, q1, p2, q2, p3, q3 = so3_exp_cf(F, 1)
    J = np.empty((3, 3))
    for k in range(3):
        iso_jac(w, e3(k), p, q, 0.0, p1, q1, J)
        for i in range(3):
            Dm[o + 3 + i, o + k] = 0.0
            acc = 0.0
            for j in range(3):
                acc += J[i, j] * v[j]
            Dm[o + i, o + 3 + k] = acc


@njit(cache=True)
def se3_exp_tensor(X, o, Tn):
    # T[b, a, c] = SE3.exp_dL_deriv(xi, e_a)[b, c]: [[J(w, B), J(w, A) + H(w, B, v)],
    # [0, J(w, B)]] for e_a = (A, B)
    v = v3(X, o)
    w = v3(X, o + 3)
    p, q, p1, q1, p2, q2, p3, q3 = so3_exp_cf(ftab(dt3(w, w), 7), 2)
    J = np.empty((3, 3))
    H = np.empty((3, 3))
    for a in range(6):
        for b in range(6):
            for c in range(6):
                Tn[o + b, o + a, o + c] = 0.0
        if a < 3:
            iso_jac(w, e3(a), p, q, 0.0, p1, q1, J)
            for b in range(3):
                for c in range(3):
                    Tn[o + b, o + a, o + 3 + c] = J[b, c]
        else:
            eb = e3(a - 3)
            iso_jac(w, eb, p, q, 0.0, p1, q1, J)
            iso_hess(w, eb, v, q, 0.0, p1, q1, 0.0, p2, q2, H)
            for b in range(3):
                for c in range(3):
                    Tn[o + b, o + a, o + c] = J[b, c]
                    Tn[o + 3 + b, o + a, o + 3 + c] = J[b, c]
                    Tn[o + b, o + a, o + 3 + c] = H[b, c]


@njit(cache=True)
def se3_exp_S(X, E, P, o, S):
    # S[c, e] = sum_b mu_b SE3.exp_dL_hess(xi, eta, e_c)[b, e]: with eta = (A, B), u = e_c =
    # (u_v, u_w): [[H(w,B,u_w), H(w,B,u_v) + H(w,A,u_w) + T(w,B,v,u_w)], [0, H(w,B,u_w)]]
    v = v3(X, o)
    w = v3(X, o + 3)
    A = v3(E, o)
    B = v3(E, o + 3)
    p, q, p1, q1, p2, q2, p3, q3 = so3_exp_cf(ftab(dt3(w, w), 9), 3)
    H = np.empty((3, 3))
    H2 = np.empty((3, 3))
    Tt = np.empty((3, 3))
    for c in range(6):
        for j in range(6):
            S[o + c, o + j] = 0.0
        if c < 3:
            iso_hess(w, B, e3(c), q, 0.0, p1, q1, 0.0, p2, q2, H)
            for j in range(3):
                acc = 0.0
                for b in range(3):
                    acc += P[o + b] * H[b, j]
                S[o + c, o + 3 + j] = acc
        else:
            uw = e3(c - 3)
            iso_hess(w, B, uw, q, 0.0, p1, q1, 0.0, p2, q2, H)
            iso_hess(w, A, uw, q, 0.0, p1, q1, 0.0, p2, q2, H2)
            iso_third(w, B, v, uw, p1, q1, 0.0, p2, q2, 0.0, p3, q3, Tt)
            for j in range(3):
                acc = 0.0
                acc2 = 0.0
                for b in range(3):
                    acc += P[o + b] * H[b, j]
                    acc2 += P[o + b] * (H2[b, j] + Tt[b, j]) + P[o + 3 + b] * H[b, j]
                S[o + c, o + j] = acc
                S[o + c, o + 3 + j] = acc2
'''


def _exp_constants() -> str:
    """The series data of the exp pieces, from ``chetaev.liegroups`` (one definition): per
    f_n, n = 0..9, the threshold on theta^2 below which its power series is summed
    (:data:`chetaev.liegroups.SERIES_THETA_SQ`), the number of terms and the coefficients
    (:func:`chetaev.liegroups.series_coefficients`), and 1/k! of the upward recursion."""
    from chetaev.liegroups import series_coefficients, series_rule

    rules = [series_rule(n) for n in range(10)]
    width = max(nt for _thr, nt in rules)
    coef = np.zeros((10, width))
    for n in range(10):
        c = np.asarray(series_coefficients(n), dtype=float)
        coef[n, : c.size] = c
    return (f"SER_THR = np.array({[float(t) for t, _nt in rules]!r})\n"
            f"SER_N = np.array({[int(nt) for _t, nt in rules]!r})\n"
            f"SER_C = np.array({coef.tolist()!r})\n"
            f"INV_FACT = np.array({[1.0 / math.factorial(k) for k in range(10)]!r})\n")


def _factors(group: Any, kind: str = "cayley") -> list | None:
    """``[(kind, n, algebra offset, matrix offset, factor)]`` of a group with a compiled
    piece for the retraction ``kind``, else None (factor kinds: ``"so3"``, ``"rn"``, ``"mc"``
    (Cayley: the generic matrix Cayley; exp: the closed forms of SE(2), SE(3), SO(2)))."""
    from chetaev.liegroups import SE2, SE3, SO2, SO3, MatrixLieGroup, ProductGroup, RnGroup

    def fkind(f: Any) -> str | None:
        if f == SO3:
            return "so3"
        if isinstance(f, RnGroup):
            return "rn"
        if (isinstance(f, MatrixLieGroup) and not isinstance(f, ProductGroup)
                and len(tuple(f.shape)) == 2 and (kind == "cayley" or f in (SE2, SE3, SO2))):
            return "mc"  # Cayley: the generic matrix Cayley of MatrixLieGroup; exp: closed forms
        return None

    factors = group.factors if isinstance(group, ProductGroup) else (group,)
    out = []
    o = r = 0
    for f in factors:
        k = fkind(f)
        if k is None or (k == "rn" and not isinstance(group, ProductGroup)):
            return None
        out.append((k, int(f.dim), o, r, f))
        o += int(f.dim)
        r += int(f.matrix_dim)
    return out if any(k != "rn" for k, *_ in out) else None


def group_support(group: Any, kind: str) -> str:
    """Why ``(group, kind)`` has no compiled group piece ("" when it has one)."""
    if kind not in ("cayley", "exp"):
        return f"the retraction {kind!r} (compiled: 'cayley' and 'exp')"
    if _factors(group, kind) is None:
        which = ("matrix groups such as SO(3), SE(2), SE(3)" if kind == "cayley"
                 else "SO(3), SE(2), SE(3), SO(2)")
        return (f"the group {getattr(group, 'name', group)} with the {kind} retraction "
                f"(compiled: {which} and their products with Rⁿ; not S² or Rⁿ alone: S² runs "
                "compiled as its lift to SO(3), e.g. spherical_pendulum(symbolic=True))")
    return ""


def group_source(group: Any, kind: str) -> str:
    """The group piece: ``grp_tau, grp_dL, grp_tensor, grp_S, grp_Ad_pair, grp_compose,
    grp_coad`` on flat ``K × K`` elements and ``(D,)`` algebra vectors (module docstring)."""
    if group_support(group, kind):
        raise ValueError(group_support(group, kind))
    fs = _factors(group, kind)
    K = int(group.shape[0])
    lines = [_SO3_CAYLEY, _RN_BLOCK, _MATRIX_CAYLEY]
    if kind == "exp":
        lines += [_exp_constants(), _EXP_PIECES]
    ad = np.asarray(group.ad(np.eye(group.dim)), dtype=float)  # ad(e_k), the coadjoint
    lines.append(f"ADB = np.array({ad.tolist()!r})")
    mcs = []
    for i, (k, n, o, r, f) in enumerate(fs):
        if k == "mc":
            gen = np.asarray(f.generators(), dtype=float)
            vee = np.linalg.pinv(gen.reshape(n, -1).T)  # vee(M) = pinv(hat) vec(M)
            vee[np.abs(vee) < 1e-15] = 0.0
            lines.append(f"GEN_{i} = np.array({gen.tolist()!r})\nVEE_{i} = np.array("
                         f"{vee.tolist()!r})")
            mcs.append((i, o, r, str(f.name).lower()))

    def fn(head: str, body: list[str], zero: str = "") -> None:
        lines.append("\n@njit(cache=True)\ndef " + head + ":")
        if zero:
            lines.append(f"    {zero}[...] = 0.0")
        lines.extend("    " + b for b in body)
        lines.append("")

    so3 = [(o, r) for k, n, o, r, _f in fs if k == "so3"]
    rn = [(n, o, r) for k, n, o, r, _f in fs if k == "rn"]
    if kind == "exp":  # the closed forms: so3_exp_*, se2_exp_*, se3_exp_*, so2_exp_tau
        fn("grp_tau(X, T)", [f"so3_exp_tau(X, {o}, T, {r}, {K})" for o, r in so3]
           + [f"rn_tau(X, {o}, {n}, T, {r}, {K})" for n, o, r in rn]
           + [f"{nm}_exp_tau(X, {o}, T, {r}, {K})" for i, o, r, nm in mcs], "T")
        fn("grp_dL(X, Dm)", [f"so3_exp_dL(X, {o}, Dm)" for o, r in so3]
           + [f"rn_eye({o}, {n}, Dm)" for n, o, r in rn]
           + [f"rn_eye({o}, 1, Dm)" if nm == "so2" else f"{nm}_exp_dL(X, {o}, Dm)"
              for i, o, r, nm in mcs], "Dm")
        # SO(2) is abelian: its dL is constant (zero tensor and S)
        fn("grp_tensor(X, Tn)", [f"so3_exp_tensor(X, {o}, Tn)" for o, r in so3]
           + [f"{nm}_exp_tensor(X, {o}, Tn)" for i, o, r, nm in mcs if nm != "so2"], "Tn")
        fn("grp_S(X, E, P, S)", [f"so3_exp_S(X, E, P, {o}, S)" for o, r in so3]
           + [f"{nm}_exp_S(X, E, P, {o}, S)" for i, o, r, nm in mcs if nm != "so2"], "S")
    else:
        fn("grp_tau(X, T)", [f"so3_cay_tau(X, {o}, T, {r}, {K})" for o, r in so3]
           + [f"rn_tau(X, {o}, {n}, T, {r}, {K})" for n, o, r in rn]
           + [f"mc_tau(X, {o}, GEN_{i}, T, {r}, {K})" for i, o, r, _nm in mcs], "T")
        fn("grp_dL(X, Dm)", [f"so3_cay_dL(X, {o}, Dm)" for o, r in so3]
           + [f"rn_eye({o}, {n}, Dm)" for n, o, r in rn]
           + [f"mc_dL(X, {o}, GEN_{i}, VEE_{i}, Dm)" for i, o, r, _nm in mcs], "Dm")
        fn("grp_tensor(X, Tn)", [f"so3_cay_tensor(X, {o}, Tn)" for o, r in so3]
           + [f"mc_tensor(X, {o}, GEN_{i}, VEE_{i}, Tn)" for i, o, r, _nm in mcs], "Tn")
        fn("grp_S(X, E, P, S)", [f"so3_cay_S(X, E, P, {o}, S)" for o, r in so3]
           + [f"mc_S(X, E, P, {o}, GEN_{i}, VEE_{i}, S)" for i, o, r, _nm in mcs], "S")
    body = ["AdiT[...] = 0.0"]
    body += [f"so3_Ad_pair(T, {r}, {K}, {o}, Ad, AdiT)" for o, r in so3]
    body += [f"rn_eye({o}, {n}, Ad)\n    rn_eye({o}, {n}, AdiT)" for n, o, r in rn]
    body += [f"mc_Ad_pair(T, {r}, {K}, {o}, GEN_{i}, VEE_{i}, Ad, AdiT)"
             for i, o, r, _nm in mcs]
    fn("grp_Ad_pair(T, Ad, AdiT)", body, "Ad")
    # ζ ↦ ad*_ζ f = ad(ζ)ᵀ f: P[a, k] = Σ_b ad(e_k)[b, a] f_b (SystemInterface.coadjoint_matrix)
    fn("grp_coad(f, P)", ["for a in range(ADB.shape[0]):",
                          "    for k in range(ADB.shape[0]):",
                          "        acc = 0.0",
                          "        for b in range(ADB.shape[0]):",
                          "            acc += ADB[k, b, a] * f[b]",
                          "        P[a, k] = acc"])
    # compose: block products (Product._k_compose; SO3: matmul)
    body = ["out[...] = 0.0"]
    for _k, _n, _o, r, f in fs:
        size = int(f.matrix_dim)
        body += [f"for i in range({r}, {r + size}):",
                 f"    for j in range({r}, {r + size}):",
                 "        acc = 0.0",
                 f"        for l in range({r}, {r + size}):",
                 f"            acc += g[i * {K} + l] * T[l * {K} + j]",
                 f"        out[i * {K} + j] = acc"]
    fn("grp_compose(g, T, out)", body)
    return "\n".join(lines)


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

LIE_ENGINE = '''
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
                 out):
    ev = _workspace()
    jv = _jac_workspace()
    J = np.empty((NX, NX))
    R = np.empty(NX)
    piv = np.empty(NX, np.int64)
    dx = np.empty(NX)
    x = np.empty(NX)
    wk = np.zeros(WK)
    hist = np.zeros((2, NX))
    nhist = 0
    g = g0.copy()
    eta = eta0.copy()
    mu = mu0.copy()
    lam = lam0.copy()
    lam1 = np.zeros(MM)
    vprev = eta0.copy()
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


@njit(cache=True)
def run_serial(g0, eta0, mu0, lam0, h, nsteps, save_every, A, B, W, tolf, floor_tol, atol,
               max_iter, refresh, max_stall, cbound, og, ov, op, olam, its, res, cres, fin,
               out):
    for b in range(g0.shape[0]):
        _lie_run_one(g0[b], eta0[b], mu0[b], lam0[b], h, nsteps, save_every, A, B, W, tolf,
                     floor_tol, atol, max_iter, refresh, max_stall, cbound, og[b], ov[b],
                     op[b], olam[b], its[b], res[b], cres[b], fin[b], out[b])


@njit(cache=True, parallel=True)
def run_parallel(g0, eta0, mu0, lam0, h, nsteps, save_every, A, B, W, tolf, floor_tol, atol,
                 max_iter, refresh, max_stall, cbound, og, ov, op, olam, its, res, cres, fin,
                 out):
    for b in prange(g0.shape[0]):
        _lie_run_one(g0[b], eta0[b], mu0[b], lam0[b], h, nsteps, save_every, A, B, W, tolf,
                     floor_tol, atol, max_iter, refresh, max_stall, cbound, og[b], ov[b],
                     op[b], olam[b], its[b], res[b], cres[b], fin[b], out[b])
'''

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
        else:  # one trajectory: the compiled call without the run's bookkeeping
            q1, v1, p1, lam1, status, r, tol, it, its, res = _one_step(self, state, g, h)
        if status == 1:
            raise ConvergenceError(step=state.n, t=state.t, residual=r, tol=tol, iterations=it,
                                   hint="halve h, or increase NewtonOptions(max_iter=...)")
        info = {"newton_iterations": its, "residual": res, "backend": "numba"}
        return State(t=state.t + h, q=q1, v=v1, p=p1, lam=lam1, n=state.n + 1, carry={},
                     info=info)


def _one_step(plan: LiePlan, state: Any, g: np.ndarray, h: float) -> tuple:
    """One unbatched compiled step: ``(g1, η1, μ1, λ1, status, r, tol, it, its, res)``."""
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
    plan.module().run_serial(g0, e0, p0, l0, float(h), 1, 1, plan.a, plan.b, plan.w,
                             max(float(o.tol), 64.0 * _EPS), 64.0 * _EPS, float(o.atol),
                             int(o.max_iter), float(o.refresh_rate), int(o.max_stall),
                             math.inf, og, ov, op, olam, its, res, cres, fin, out)
    lam1 = fin[0, 3, :m].copy() if plan.has_lam else None
    return (fin[0, 0, :kk].reshape(plan.elem_shape), fin[0, 1, :d].copy(),
            fin[0, 2, :d].copy(), lam1, int(out[0, 0]), float(out[0, 2]), float(out[0, 3]),
            int(out[0, 4]), int(its[0, 0]), float(res[0, 0]))


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

    def go(steps: int) -> tuple:
        ns = steps // save_every + 1
        og, ov, op = np.empty((nb, ns, kk)), np.empty((nb, ns, d)), np.empty((nb, ns, d))
        olam = np.empty((nb, ns, m))
        og[:, 0], ov[:, 0], op[:, 0], olam[:, 0] = g0, eta0, mu0, lam0[:, :m]
        its = np.zeros((nb, max(steps, 1)), np.int64)
        res, cres = np.zeros((nb, max(steps, 1))), np.zeros((nb, max(steps, 1)))
        fin, out = np.zeros((nb, 4, max(kk, d, m))), np.zeros((nb, 5))
        run = mod.run_parallel if nb > 1 else mod.run_serial
        run(g0, eta0, mu0, lam0, float(h), int(steps), int(save_every), plan.a, plan.b,
            plan.w, tolf, 64.0 * _EPS, float(o.atol), int(o.max_iter), float(o.refresh_rate),
            int(o.max_stall), float(cbound), og, ov, op, olam, its, res, cres, fin, out)
        return og, ov, op, olam, its, res, cres, fin, out

    og, ov, op, olam, its, res, cres, fin, out = go(n_steps)
    done = out[:, 1].astype(np.int64)
    k = int(done.min())
    if k < n_steps and np.any(done != k):  # the batch stops at the first failing step
        og, ov, op, olam, its, res, cres, fin, out = go(k)
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
