"""The group's retraction maps as numba-compilable scalar source (:func:`compiled_source`):
the formulas of this package written once more, loop by loop, for the compiled engines of
``chetaev.discrete_lagrangian`` (issue 17), so that no other package re-derives them.

One numba function per map, each the same formula as the kernel of this package it mirrors
(agreement to 1e-14 tested in ``chetaev-discrete-lagrangian``'s ``tests/test_compiled_lie.py``,
which has numba). Cayley:

=====================  =======================================================
compiled               mirrors
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
f_n(θ²) of ``_numerics`` (``ftab``: f₀..f₉ with liegroups' half-angle
forms, upward recursion, and its power series below the thresholds
:data:`SERIES_THETA_SQ` with its coefficients, both read from ``_numerics``
when the source is generated), and their s-derivatives (``FTable.df, d2f, d3f``):

=====================  =======================================================
compiled               mirrors
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
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._base import MatrixLieGroup
from ._numerics import series_coefficients, series_rule
from ._product import ProductGroup
from ._rn import RnGroup
from ._se2 import SE2
from ._se3 import SE3
from ._so2 import SO2
from ._so3 import SO3

__all__ = ["compiled_source", "compiled_support"]

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
    """The series data of the exp pieces, of ``_numerics`` (one definition): per
    f_n, n = 0..9, the threshold on theta^2 below which its power series is summed
    (:data:`SERIES_THETA_SQ`), the number of terms and the coefficients
    (:func:`series_coefficients`), and 1/k! of the upward recursion."""
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


def compiled_support(group: Any, kind: str) -> str:
    """Why :func:`compiled_source` has no source for ``(group, kind)``; ``""`` when it has.

    Parameters
    ----------
    group : Any
        A group of this package.
    kind : str
        The retraction's name.

    Returns
    -------
    str
        The reason, naming what is supported, or ``""``.
    """
    if kind not in ("cayley", "exp"):
        return f"the retraction {kind!r} (compiled: 'cayley' and 'exp')"
    if _factors(group, kind) is None:
        which = ("matrix groups such as SO(3), SE(2), SE(3)" if kind == "cayley"
                 else "SO(3), SE(2), SE(3), SO(2)")
        return (f"the group {getattr(group, 'name', group)} with the {kind} retraction "
                f"(compiled: {which} and their products with Rⁿ; not S² or Rⁿ alone)")
    return ""


def compiled_source(group: Any, kind: str) -> str:
    """numba-compilable scalar source of ``group``'s retraction maps.

    The source defines ``grp_tau(X, T)``, ``grp_dL(X, Dm)``, ``grp_tensor(X, Tn)``,
    ``grp_S(X, E, P, S)``, ``grp_Ad_pair(T, Ad, AdiT)``, ``grp_compose(g, T, out)`` and
    ``grp_coad(f, P)`` on flat ``K × K`` group elements and ``(D,)`` algebra vectors, each
    the formula of the ``retraction(group, kind).kernels`` map it mirrors (module
    docstring), and expects ``math``, ``np`` (numpy) and ``njit`` (numba) in the namespace
    it is executed in. It is text: this package does not need numba.

    Parameters
    ----------
    group : MatrixLieGroup
        SO(3), SE(2), SE(3), SO(2) (exp), another matrix group (Cayley), or a product of
        these with Rⁿ factors.
    kind : {"cayley", "exp"}
        The retraction.

    Returns
    -------
    str
        The source.

    Raises
    ------
    ValueError
        When :func:`compiled_support` gives a reason.
    """
    why = compiled_support(group, kind)
    if why:
        raise ValueError(f"no compiled source for {why}")
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
