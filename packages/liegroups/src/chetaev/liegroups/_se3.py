"""SE(3): rigid motions of space, g = [[R, p], [0, 1]], algebra coordinates xi = (v, omega)
(translation first, as in jaxlie), hat(xi) = [[hat(omega), v], [0, 0]].

* exp(xi) = [[exp(omega), V v], [0, 1]],  V = I + f_2 X + f_3 X^2 (the SO(3) dR of exp)
* log: omega = log R (quaternion, accurate to pi), v = V^{-1} p, V^{-1} = I - X/2 + c X^2
* Ad_g = [[R, hat(p) R], [0, R]],  ad_xi = [[hat(omega), hat(v)], [0, hat(omega)]]
* exp dL(xi) = F(-ad_xi) with F(z) = (e^z - 1)/z.  ad_xi is block upper triangular with equal
  diagonal blocks, so F(-ad_xi) = [[D, M], [0, D]] with D = SO(3) exp dL(omega) and
  M = d/deps D(omega + eps v) (the Frechet derivative of F at -hat(omega) along -hat(v)); i.e.
  M eta = J^L_SO3(omega, eta) v.  dL^{-1} = [[D^{-1}, -D^{-1} M D^{-1}], [0, D^{-1}]].
* dL_deriv uses the closed-form SO(3) first and second derivatives of D, dL_hess also the
  closed-form third one (exact, no series truncation, no finite differences).
Cayley uses the exact matrix formulas of :class:`MatrixLieGroup`.
"""

from __future__ import annotations

import numpy as np

from ._base import MatrixLieGroup
from ._numerics import FTable, hat3, iso_apply, iso_hess, iso_third, sq3, vee3
from ._so3 import SO3, _exp_dl_coeffs
from ._validation import predicate_array

__all__ = ["SE3", "SE3Group"]

_EYE3 = np.eye(3)


def _blocks(TL, TR, BR):
    out = np.zeros((*TL.shape[:-2], 6, 6))
    out[..., :3, :3] = TL
    out[..., :3, 3:] = TR
    out[..., 3:, 3:] = BR
    return out


class SE3Group(MatrixLieGroup):
    """The special Euclidean group SE(3) (elements (4, 4) homogeneous matrices)."""

    name = "SE3"
    dim = 6
    shape = (4, 4)
    matrix_dim = 4

    def _membership_text(self) -> str:
        return "[[R, p], [0, 1]] with R^T R = I, det R = 1"

    def random(self, rng, size=()):
        size = (size,) if np.isscalar(size) else tuple(size)
        return self._make(SO3.random(rng, size), rng.normal(size=(*size, 3)))

    @staticmethod
    def _make(R, p):
        R, p = np.asarray(R), np.asarray(p)
        batch = np.broadcast_shapes(R.shape[:-2], p.shape[:-1])
        g = np.zeros((*batch, 4, 4))
        g[..., :3, :3] = R
        g[..., :3, 3] = p
        g[..., 3, 3] = 1.0
        return g

    def is_element(self, g, tol: float = 1e-10):
        g = predicate_array(g)
        if g is None or g.ndim < 2 or g.shape[-2:] != (4, 4):
            return np.False_
        ok = SO3.is_element(g[..., :3, :3], tol)
        with np.errstate(invalid="ignore"):
            last = np.abs(g[..., 3, :] - np.array([0.0, 0.0, 0.0, 1.0]))
            ok = ok & (np.max(last, axis=-1) <= tol) & np.all(np.isfinite(g), axis=(-1, -2))
        return ok[()] if np.ndim(ok) == 0 else ok

    def _k_compose(self, g, h):
        return np.matmul(np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64))

    def _k_inverse(self, g):
        g = np.asarray(g, dtype=np.float64)
        Rt = np.swapaxes(g[..., :3, :3], -1, -2)
        return self._make(Rt, -np.einsum("...ij,...j->...i", Rt, g[..., :3, 3]))

    def _k_Ad(self, g):
        g = np.asarray(g, dtype=np.float64)
        R = g[..., :3, :3]
        return _blocks(R, hat3(g[..., :3, 3]) @ R, R)

    def _k_hat(self, xi):
        xi = np.asarray(xi, dtype=np.float64)
        X = np.zeros((*xi.shape[:-1], 4, 4))
        X[..., :3, :3] = hat3(xi[..., 3:])
        X[..., :3, 3] = xi[..., :3]
        return X

    def _k_vee(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.concatenate([X[..., :3, 3], vee3(X[..., :3, :3])], axis=-1)

    def _k_ad(self, xi):
        xi = np.asarray(xi, dtype=np.float64)
        W = hat3(xi[..., 3:])
        return _blocks(W, hat3(xi[..., :3]), W)

    # Exponential.
    def exp(self, xi):
        xi = self.check_algebra(xi, where="SE3.exp")
        v, w = xi[..., :3], xi[..., 3:]
        T = FTable(np.einsum("...i,...i->...", w, w))
        from ._so3 import _rot_from_coeffs

        R = _rot_from_coeffs(w, T.f(0), T.f(1), T.f(2))
        return self._make(R, iso_apply(w, v, 1.0, T.f(2), T.f(3)))

    def log(self, g, check: bool = True):
        g = self.check_element(g, "g", "SE3.log")
        if check:
            self._require_element(g, "SE3.log")
        w = SO3.log(g[..., :3, :3], check=False)
        T = FTable(np.einsum("...i,...i->...", w, w))
        v = iso_apply(w, g[..., :3, 3], 1.0, -0.5, SO3._exp_dl_inv_c(T))
        return np.concatenate([v, w], axis=-1)

    def _M(self, w, v, deriv):
        """M(w, v) = d/deps D(w + eps v): column k is J^L_SO3(w, e_k) v."""
        Jk = deriv(w[..., None, :], _EYE3)  # (..., k, 3, 3)
        return np.swapaxes(np.einsum("...kij,...j->...ki", Jk, v), -1, -2)

    def _tangent(self, xi, dL, deriv):
        v, w = xi[..., :3], xi[..., 3:]
        D = dL(w)
        return D, self._M(w, v, deriv)

    def exp_dL(self, xi):
        xi = self.check_algebra(xi, where="SE3.exp_dL")
        D, M = self._tangent(xi, SO3.exp_dL, SO3.exp_dL_deriv)
        return _blocks(D, M, D)

    def exp_dL_inv(self, xi):
        xi = self.check_algebra(xi, where="SE3.exp_dL_inv")
        v, w = xi[..., :3], xi[..., 3:]
        Di = SO3.exp_dL_inv(w)
        M = self._M(w, v, SO3.exp_dL_deriv)
        return _blocks(Di, -Di @ M @ Di, Di)

    def exp_dL_deriv(self, xi, eta):
        """Jacobian of ``xi -> exp_dL(xi) eta`` with eta = (a, b) (translation, rotation parts):
        [[J(w, b), J(w, a) + H(w, b, v)], [0, J(w, b)]] with J the SO(3) Jacobian of
        ``D(w) eta`` and H(w, b, v) = d/dw [J(w, b) v] (closed form, :meth:`SO3Group.exp_dL_hess`).
        """
        xi = self.check_algebra(xi, where="SE3.exp_dL_deriv")
        eta = self.check_algebra(eta, "eta", "SE3.exp_dL_deriv")
        xi, eta = np.broadcast_arrays(xi, eta)
        v, w = xi[..., :3], xi[..., 3:]
        a, b = eta[..., :3], eta[..., 3:]
        Jb = SO3.exp_dL_deriv(w, b)
        TR = SO3.exp_dL_deriv(w, a) + SO3.exp_dL_hess(w, b, v)
        return _blocks(Jb, TR, Jb)

    def exp_dL_hess(self, xi, eta, u):
        """Jacobian of ``xi -> exp_dL_deriv(xi, eta) u`` (closed form).  With xi = (v, w),
        eta = (a, b), u = (u_v, u_w), J, H the SO(3) first and second derivatives of
        ``D(w) eta`` (:meth:`SO3Group.exp_dL_deriv`, :meth:`SO3Group.exp_dL_hess`) and T the
        third (:meth:`SO3Group.exp_dL_third`), ``exp_dL_deriv(xi, eta) u =
        [J(w,b) u_v + J(w,a) u_w + H(w,b,v) u_w ; J(w,b) u_w]``, whose Jacobian is

            [[H(w,b,u_w), H(w,b,u_v) + H(w,a,u_w) + T(w,b,v,u_w)], [0, H(w,b,u_w)]]

        (H(w,b,v) u_w = H(w,b,u_w) v: the second derivative is symmetric).  Exact: no finite
        differences, no truncated series outside the small-angle branches of ``f_n``."""
        xi = self.check_algebra(xi, where="SE3.exp_dL_hess")
        eta = self.check_algebra(eta, "eta", "SE3.exp_dL_hess")
        u = self.check_algebra(u, "u", "SE3.exp_dL_hess")
        xi, eta, u = np.broadcast_arrays(xi, eta, u)
        v, w = xi[..., :3], xi[..., 3:]
        a, b = eta[..., :3], eta[..., 3:]
        uv, uw = u[..., :3], u[..., 3:]
        c0, c1, c2, c3 = _exp_dl_coeffs(FTable(sq3(w)), 3)
        # the three SO(3) second derivatives in one broadcast call (stacked on a new axis 0)
        Hs = iso_hess(w, np.stack([b, b, a]), np.stack([uw, uv, uw]), *c0, *c1, *c2)
        TR = Hs[1] + Hs[2] + iso_third(w, b, v, uw, *c1, *c2, *c3)
        return _blocks(Hs[0], TR, Hs[0])


SE3 = SE3Group()
