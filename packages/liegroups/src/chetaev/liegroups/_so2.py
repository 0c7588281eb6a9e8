"""SO(2): planar rotations, algebra coordinate omega (hat(omega) = omega J, J = [[0, -1], [1, 0]]).

SO(2) is abelian: Ad = 1, ad = 0, exp dL = 1.  Cayley: cay(omega) is the rotation by
2 atan(omega/2), so cay dL = 4/(4 + omega^2) and cay dL^{-1} = 1 + omega^2/4.
"""

from __future__ import annotations

import numpy as np

from ._base import MatrixLieGroup
from ._validation import predicate_array

__all__ = ["SO2", "SO2Group"]


def _rot2(c, s):
    R = np.empty((*np.shape(c), 2, 2))
    R[..., 0, 0] = c
    R[..., 0, 1] = -s
    R[..., 1, 0] = s
    R[..., 1, 1] = c
    return R


class SO2Group(MatrixLieGroup):
    """The rotation group SO(2) (elements (2, 2) rotation matrices)."""

    name = "SO2"
    dim = 1
    shape = (2, 2)
    matrix_dim = 2

    def _membership_text(self) -> str:
        return "R^T R = I and det R = 1"

    def random(self, rng, size=()):
        size = (size,) if np.isscalar(size) else tuple(size)
        a = rng.uniform(-np.pi, np.pi, size=size)
        return _rot2(np.cos(a), np.sin(a))

    def is_element(self, g, tol: float = 1e-10):
        g = predicate_array(g)
        if g is None or g.ndim < 2 or g.shape[-2:] != (2, 2):
            return np.False_
        with np.errstate(invalid="ignore"):
            E = np.einsum("...ki,...kj->...ij", g, g) - np.eye(2)
            ok = (np.max(np.abs(E), axis=(-1, -2)) <= tol) & (
                np.abs(np.linalg.det(g) - 1.0) <= 3 * tol
            )
        ok = ok & np.all(np.isfinite(g), axis=(-1, -2))
        return ok[()] if ok.ndim == 0 else ok

    def _k_compose(self, g, h):
        return np.matmul(np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64))

    def _k_inverse(self, g):
        return np.swapaxes(np.asarray(g, dtype=np.float64), -1, -2).copy()

    def _k_Ad(self, g):
        g = np.asarray(g, dtype=np.float64)
        return np.ones((*g.shape[:-2], 1, 1))

    def _k_hat(self, xi):
        xi = np.asarray(xi, dtype=np.float64)
        w = xi[..., 0]
        z = np.zeros_like(w)
        return _rot2(z, w)

    def _k_vee(self, X):
        X = np.asarray(X, dtype=np.float64)
        return 0.5 * (X[..., 1, 0] - X[..., 0, 1])[..., None]

    def _k_ad(self, xi):
        xi = np.asarray(xi, dtype=np.float64)
        return np.zeros((*xi.shape[:-1], 1, 1))

    def exp(self, xi):
        w = self.check_algebra(xi, where="SO2.exp")[..., 0]
        return _rot2(np.cos(w), np.sin(w))

    def log(self, g, check: bool = True):
        R = self.check_element(g, "g", "SO2.log")
        if check:
            self._require_element(R, "SO2.log")
        return np.arctan2(R[..., 1, 0] - R[..., 0, 1], R[..., 0, 0] + R[..., 1, 1])[..., None]

    def exp_dL(self, xi):
        xi = self.check_algebra(xi, where="SO2.exp_dL")
        return np.ones((*xi.shape[:-1], 1, 1))

    def exp_dL_inv(self, xi):
        return self.exp_dL(xi)

    def exp_dL_deriv(self, xi, eta):
        xi = self.check_algebra(xi, where="SO2.exp_dL_deriv")
        eta = self.check_algebra(eta, "eta", "SO2.exp_dL_deriv")
        return np.zeros((*np.broadcast_shapes(xi.shape, eta.shape), 1))

    def exp_dL_inv_deriv(self, xi, eta):
        return self.exp_dL_deriv(xi, eta)

    def exp_dL_hess(self, xi, eta, u):
        w = self.check_algebra(xi, where="SO2.exp_dL_hess")
        eta = self.check_algebra(eta, "eta", "SO2.exp_dL_hess")
        u = self.check_algebra(u, "u", "SO2.exp_dL_hess")
        return np.zeros((*np.broadcast_shapes(w.shape, eta.shape, u.shape), 1))

    def cay_dL_hess(self, xi, eta, u):
        w = self.check_algebra(xi, where="SO2.cay_dL_hess")
        eta = self.check_algebra(eta, "eta", "SO2.cay_dL_hess")
        u = self.check_algebra(u, "u", "SO2.cay_dL_hess")
        d = 4.0 + w * w
        return (eta * u * (24.0 * w * w - 32.0) / d**3)[..., None]

    def cay(self, xi):
        w = self.check_algebra(xi, where="SO2.cay")[..., 0]
        d = 4.0 + w * w
        return _rot2((4.0 - w * w) / d, 4.0 * w / d)

    def cay_inv(self, g, check: bool = True):
        R = self.check_element(g, "g", "SO2.cay_inv")
        if check:
            self._require_element(R, "SO2.cay_inv")
        c = 0.5 * (R[..., 0, 0] + R[..., 1, 1])
        s = 0.5 * (R[..., 1, 0] - R[..., 0, 1])
        if np.any(1.0 + c <= 1e-12):
            from ._errors import LieGroupError

            raise LieGroupError(
                "SO2.cay_inv: rotation by pi, where the inverse Cayley map is singular. "
                "Use the exp retraction or a smaller step."
            )
        return (2.0 * s / (1.0 + c))[..., None]

    def cay_dL(self, xi):
        w = self.check_algebra(xi, where="SO2.cay_dL")
        return (4.0 / (4.0 + w * w))[..., None]

    def cay_dL_inv(self, xi):
        w = self.check_algebra(xi, where="SO2.cay_dL_inv")
        return (1.0 + 0.25 * w * w)[..., None]

    def cay_dL_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO2.cay_dL_deriv")
        eta = self.check_algebra(eta, "eta", "SO2.cay_dL_deriv")
        return (-8.0 * w * eta / (4.0 + w * w) ** 2)[..., None]

    def cay_dL_inv_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO2.cay_dL_inv_deriv")
        eta = self.check_algebra(eta, "eta", "SO2.cay_dL_inv_deriv")
        return (0.5 * w * eta)[..., None]


SO2 = SO2Group()
