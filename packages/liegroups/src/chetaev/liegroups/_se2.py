"""SE(2): rigid motions of the plane, g = [[R, p], [0, 1]], algebra coordinates
eta = (v1, v2, omega) with hat(eta) = [[0, -omega, v1], [omega, 0, v2], [0, 0, 0]]
(the high-order paper's convention, §7.4).

With J = [[0, -1], [1, 0]], s = omega^2 and f_n the functions of :mod:`._numerics`:

* exp(eta) = [[R(omega), V v], [0, 1]],      V = f_1 I + omega f_2 J
* Ad_g = [[R, -J p], [0, 1]],  ad_eta = [[omega J, -J v], [0, 0]]
* exp dL(eta) = sum_k (-ad_eta)^k/(k+1)! = [[f_1 I - omega f_2 J, u], [0, 1]],
  u = f_2 J v + omega f_3 v   (the functions (e^z - 1)/z and (e^z - 1 - z)/z^2 at z = -i omega)
* exp dL^{-1} = [[F^{-1}, -F^{-1} u], [0, 1]],  F^{-1} = (f_1 I + omega f_2 J) / (2 f_2)
* the Jacobian of exp dL(eta) mu in eta is written out in :meth:`SE2Group.exp_dL_deriv`.
Cayley uses the exact matrix formulas of :class:`MatrixLieGroup`.
"""

from __future__ import annotations

import numpy as np

from ._base import MatrixLieGroup
from ._numerics import FTable
from ._validation import predicate_array

__all__ = ["SE2", "SE2Group"]


def _J(v):
    """J v for (..., 2) vectors."""
    return np.stack([-v[..., 1], v[..., 0]], axis=-1)


class SE2Group(MatrixLieGroup):
    """The special Euclidean group SE(2) (elements (3, 3) homogeneous matrices)."""

    name = "SE2"
    dim = 3
    shape = (3, 3)
    matrix_dim = 3

    def _membership_text(self) -> str:
        return "[[R, p], [0, 1]] with R^T R = I, det R = 1"

    def random(self, rng, size=()):
        size = (size,) if np.isscalar(size) else tuple(size)
        a = rng.uniform(-np.pi, np.pi, size=size)
        p = rng.normal(size=(*size, 2))
        return self._make(np.cos(a), np.sin(a), p)

    @staticmethod
    def _make(c, s, p):
        g = np.zeros((*np.shape(c), 3, 3))
        g[..., 0, 0] = c
        g[..., 0, 1] = -s
        g[..., 1, 0] = s
        g[..., 1, 1] = c
        g[..., :2, 2] = p
        g[..., 2, 2] = 1.0
        return g

    def is_element(self, g, tol: float = 1e-10):
        g = predicate_array(g)
        if g is None or g.ndim < 2 or g.shape[-2:] != (3, 3):
            return np.False_
        R = g[..., :2, :2]
        with np.errstate(invalid="ignore"):
            E = np.einsum("...ki,...kj->...ij", R, R) - np.eye(2)
            ok = (np.max(np.abs(E), axis=(-1, -2)) <= tol) & (
                np.abs(np.linalg.det(R) - 1.0) <= 3 * tol
            )
            last = np.abs(g[..., 2, :] - np.array([0.0, 0.0, 1.0]))
            ok = ok & (np.max(last, axis=-1) <= tol)
        ok = ok & np.all(np.isfinite(g), axis=(-1, -2))
        return ok[()] if ok.ndim == 0 else ok

    def _k_compose(self, g, h):
        return np.matmul(np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64))

    def _k_inverse(self, g):
        g = np.asarray(g, dtype=np.float64)
        Rt = np.swapaxes(g[..., :2, :2], -1, -2)
        out = np.zeros_like(g)
        out[..., :2, :2] = Rt
        out[..., :2, 2] = -np.einsum("...ij,...j->...i", Rt, g[..., :2, 2])
        out[..., 2, 2] = 1.0
        return out

    def _k_Ad(self, g):
        g = np.asarray(g, dtype=np.float64)
        A = np.zeros_like(g)
        A[..., :2, :2] = g[..., :2, :2]
        A[..., :2, 2] = -_J(g[..., :2, 2])
        A[..., 2, 2] = 1.0
        return A

    def _k_hat(self, xi):
        xi = np.asarray(xi, dtype=np.float64)
        X = np.zeros((*xi.shape[:-1], 3, 3))
        X[..., 0, 1] = -xi[..., 2]
        X[..., 1, 0] = xi[..., 2]
        X[..., :2, 2] = xi[..., :2]
        return X

    def _k_vee(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.stack([X[..., 0, 2], X[..., 1, 2], 0.5 * (X[..., 1, 0] - X[..., 0, 1])], axis=-1)

    def _k_ad(self, xi):
        xi = np.asarray(xi, dtype=np.float64)
        A = np.zeros((*xi.shape[:-1], 3, 3))
        w = xi[..., 2]
        A[..., 0, 1] = -w
        A[..., 1, 0] = w
        A[..., :2, 2] = -_J(xi[..., :2])
        return A

    # Exponential.
    def exp(self, xi):
        xi = self.check_algebra(xi, where="SE2.exp")
        v, w = xi[..., :2], xi[..., 2]
        T = FTable(w * w)
        p = T.f(1)[..., None] * v + (w * T.f(2))[..., None] * _J(v)
        return self._make(T.f(0), w * T.f(1), p)

    def log(self, g, check: bool = True):
        g = self.check_element(g, "g", "SE2.log")
        if check:
            self._require_element(g, "SE2.log")
        w = np.arctan2(g[..., 1, 0] - g[..., 0, 1], g[..., 0, 0] + g[..., 1, 1])
        T = FTable(w * w)
        p = g[..., :2, 2]
        f1, f2 = T.f(1), T.f(2)
        v = (f1[..., None] * p - (w * f2)[..., None] * _J(p)) / (2.0 * f2)[..., None]
        return np.concatenate([v, w[..., None]], axis=-1)

    def _dl_parts(self, xi):
        v, w = xi[..., :2], xi[..., 2]
        T = FTable(w * w)
        u = T.f(2)[..., None] * _J(v) + (w * T.f(3))[..., None] * v
        return v, w, T, u

    def exp_dL(self, xi):
        xi = self.check_algebra(xi, where="SE2.exp_dL")
        _v, w, T, u = self._dl_parts(xi)
        a, b = T.f(1), -w * T.f(2)  # F = a I + b J
        return self._make(a, b, u)

    def exp_dL_inv(self, xi):
        xi = self.check_algebra(xi, where="SE2.exp_dL_inv")
        _v, w, T, u = self._dl_parts(xi)
        den = 2.0 * T.f(2)
        a, b = T.f(1) / den, w * T.f(2) / den  # F^{-1} = a I + b J
        Fi_u = a[..., None] * u + b[..., None] * _J(u)
        return self._make(a, b, -Fi_u)

    def exp_dL_deriv(self, xi, eta):
        """Jacobian of ``xi -> exp_dL(xi) eta``; with eta = (m, m_w)::

            d/dv     = m_w (f_2 J + omega f_3 I)
            d/domega = omega (f_3 - f_2) m - (f_1 - f_2) J m
                       + m_w (omega (2 f_4 - f_3) J v + (f_2 - 2 f_3) v)

        (using f_n' = (n f_{n+2} - f_{n+1})/2); the bottom row is zero.
        """
        xi = self.check_algebra(xi, where="SE2.exp_dL_deriv")
        eta = self.check_algebra(eta, "eta", "SE2.exp_dL_deriv")
        xi, eta = np.broadcast_arrays(xi, eta)
        v, w = xi[..., :2], xi[..., 2]
        m, mw = eta[..., :2], eta[..., 2]
        T = FTable(w * w)
        f1, f2, f3, f4 = T.f(1), T.f(2), T.f(3), T.f(4)
        Jout = np.zeros((*xi.shape[:-1], 3, 3))
        a, b = mw * w * f3, mw * f2  # m_w (f_2 J + omega f_3 I) = a I + b J
        Jout[..., 0, 0] = a
        Jout[..., 0, 1] = -b
        Jout[..., 1, 0] = b
        Jout[..., 1, 1] = a
        col = (
            (w * (f3 - f2))[..., None] * m
            - (f1 - f2)[..., None] * _J(m)
            + (mw * w * (2.0 * f4 - f3))[..., None] * _J(v)
            + (mw * (f2 - 2.0 * f3))[..., None] * v
        )
        Jout[..., :2, 2] = col
        return Jout

    def exp_dL_hess(self, xi, eta, u):
        """Jacobian of ``xi -> exp_dL_deriv(xi, eta) u``.  With eta = (m, m_w), u = (a, a_w),
        ``exp_dL_deriv(xi, eta) u = m_w (beta J + alpha) a + a_w (gamma m - delta J m
        + m_w (eps J v + zeta v))`` where alpha = omega f_3, beta = f_2, gamma = omega (f_3 - f_2),
        delta = f_1 - f_2, eps = omega (2 f_4 - f_3), zeta = f_2 - 2 f_3; their omega-derivatives
        are alpha' = zeta, beta' = eps, gamma' = 2 f_2 - 2 f_3 - f_1,
        delta' = omega (2 f_3 - f_2 - 2 f_4), eps' = 4 f_3 - 6 f_4 - f_2,
        zeta' = omega (4 f_4 - f_3 - 6 f_5)."""
        where = "SE2.exp_dL_hess"
        xi = self.check_algebra(xi, where=where)
        eta = self.check_algebra(eta, "eta", where)
        u = self.check_algebra(u, "u", where)
        xi, eta, u = np.broadcast_arrays(xi, eta, u)
        v, w = xi[..., :2], xi[..., 2]
        m, mw = eta[..., :2], eta[..., 2]
        a, aw = u[..., :2], u[..., 2]
        T = FTable(w * w)
        f1, f2, f3, f4, f5 = (T.f(n) for n in range(1, 6))
        eps_, zeta = w * (2.0 * f4 - f3), f2 - 2.0 * f3
        gamma_p = 2.0 * f2 - 2.0 * f3 - f1
        delta_p = w * (2.0 * f3 - f2 - 2.0 * f4)
        eps_p = 4.0 * f3 - 6.0 * f4 - f2
        zeta_p = w * (4.0 * f4 - f3 - 6.0 * f5)
        H = np.zeros((*xi.shape[:-1], 3, 3))
        c, d = aw * mw * zeta, aw * mw * eps_  # d/dv = a_w m_w (eps J + zeta I) = c I + d J
        H[..., 0, 0] = c
        H[..., 0, 1] = -d
        H[..., 1, 0] = d
        H[..., 1, 1] = c
        col = (
            (mw * eps_)[..., None] * _J(a)
            + (mw * zeta)[..., None] * a
            + (aw * gamma_p)[..., None] * m
            - (aw * delta_p)[..., None] * _J(m)
            + (aw * mw * eps_p)[..., None] * _J(v)
            + (aw * mw * zeta_p)[..., None] * v
        )
        H[..., :2, 2] = col
        return H


SE2 = SE2Group()
