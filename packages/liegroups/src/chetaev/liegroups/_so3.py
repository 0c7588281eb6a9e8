"""SO(3): rotations of R^3, algebra coordinates w in R^3 with hat(w) v = w x v.

Closed forms (spec high-order-nonholonomic §3.2, homogeneous-spaces-rkmk §4), with
theta = |w|, X = hat(w) and f_n the functions of :mod:`._numerics`:

* exp(w)       = I + f_1 X + f_2 X^2                     (Rodrigues)
* exp dL(w)    = I - f_2 X + f_3 X^2,  dL^{-1} = I + X/2 + c X^2,  c = (f_3 - 2 f_4)/(2 f_2)
                                                           (= (1 - (theta/2) cot(theta/2))/theta^2)
* cay(w)       = I + 4/(4+theta^2) (X + X^2/2)
* cay dL(w)    = 2/(4+theta^2) (2I - X),   dL^{-1} = I + X/2 + w w^T/4
* log via a quaternion (Shepperd's largest-component rule) and atan2: accurate up to theta = pi.
"""

from __future__ import annotations

import numpy as np

from ._base import MatrixLieGroup
from ._numerics import FTable, hat3, iso_apply, iso_hess, iso_jac, iso_matrix, vee3

__all__ = ["SO3", "SO3Group"]


def _sq(w):
    return np.einsum("...i,...i->...", w, w)


def _exp_dl_coeffs(T: FTable, order: int):
    """(r, p, q) of exp dL = r I + p X + q X^2 and their s-derivatives up to ``order``."""
    one = np.ones_like(T.s)
    zero = np.zeros_like(T.s)
    out = [(one, -T.f(2), T.f(3))]
    if order >= 1:
        out.append((zero, -T.df(2), T.df(3)))
    if order >= 2:
        out.append((zero, -T.d2f(2), T.d2f(3)))
    return out


def _cay_dl_coeffs(s, order: int):
    d = 4.0 + s
    zero = np.zeros_like(s)
    out = [(4.0 / d, -2.0 / d, zero)]
    if order >= 1:
        out.append((-4.0 / d**2, 2.0 / d**2, zero))
    if order >= 2:
        out.append((8.0 / d**3, -4.0 / d**3, zero))
    return out


def _rot_from_coeffs(w, a, b, c):
    """a I + b X + c w w^T (a = cos theta for a rotation)."""
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    R = np.empty((*w.shape[:-1], 3, 3))
    cx, cy, cz = c * x, c * y, c * z
    bx, by, bz = b * x, b * y, b * z
    R[..., 0, 0] = a + cx * x
    R[..., 1, 1] = a + cy * y
    R[..., 2, 2] = a + cz * z
    cxy, cxz, cyz = cx * y, cx * z, cy * z
    R[..., 0, 1] = cxy - bz
    R[..., 1, 0] = cxy + bz
    R[..., 0, 2] = cxz + by
    R[..., 2, 0] = cxz - by
    R[..., 1, 2] = cyz - bx
    R[..., 2, 1] = cyz + bx
    return R


class SO3Group(MatrixLieGroup):
    """The rotation group SO(3) (elements (3, 3) orthogonal matrices with det 1)."""

    name = "SO3"
    dim = 3
    shape = (3, 3)
    matrix_dim = 3

    def _membership_text(self) -> str:
        return "R^T R = I and det R = 1"

    # Factory.
    def random(self, rng, size=()):
        size = (size,) if np.isscalar(size) else tuple(size)
        q = rng.normal(size=(*size, 4))
        q /= np.linalg.norm(q, axis=-1, keepdims=True)
        return self._from_quat(q)

    @staticmethod
    def _from_quat(q):
        w, v = q[..., 0], q[..., 1:]
        # R = (w^2 - |v|^2) I + 2 w hat(v) + 2 v v^T
        return _rot_from_coeffs(v, w * w - _sq(v), 2.0 * w, 2.0)

    def is_element(self, g, tol: float = 1e-10):
        g = np.asarray(g, dtype=np.float64)
        if g.shape[-2:] != (3, 3) or g.ndim < 2:
            return np.False_
        with np.errstate(invalid="ignore"):
            E = np.einsum("...ki,...kj->...ij", g, g) - np.eye(3)
            orth = np.max(np.abs(E), axis=(-1, -2)) <= tol
            det = np.abs(np.linalg.det(g) - 1.0) <= 3 * tol
        ok = orth & det & np.all(np.isfinite(g), axis=(-1, -2))
        return ok[()] if ok.ndim == 0 else ok

    # Group operations.
    def compose(self, g, h):
        return np.matmul(np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64))

    def inverse(self, g):
        return np.swapaxes(np.asarray(g, dtype=np.float64), -1, -2).copy()

    def Ad(self, g):
        return np.array(g, dtype=np.float64)

    # Algebra.
    def hat(self, xi):
        return hat3(np.asarray(xi, dtype=np.float64))

    def vee(self, X):
        return vee3(np.asarray(X, dtype=np.float64))

    def ad(self, xi):
        return hat3(np.asarray(xi, dtype=np.float64))

    def bracket(self, xi, eta):
        return np.cross(np.asarray(xi, dtype=np.float64), np.asarray(eta, dtype=np.float64))

    # Exponential.
    def exp(self, xi):
        w = self.check_algebra(xi, where="SO3.exp")
        T = FTable(_sq(w))
        return _rot_from_coeffs(w, T.f(0), T.f(1), T.f(2))

    def log(self, g, check: bool = True):
        R = self.check_element(g, "g", "SO3.log")
        if check:
            self._require_element(R, "SO3.log")
        q = self._to_quat(R)
        w, v = q[..., 0], q[..., 1:]
        n = np.sqrt(_sq(v))
        pos = n > 0.0
        n_safe = np.where(pos, n, 1.0)
        scale = np.where(pos, 2.0 * np.arctan2(n, w) / n_safe, 2.0 / np.where(pos, 1.0, w))
        return scale[..., None] * v

    @staticmethod
    def _to_quat(R):
        """Unit quaternion (w >= 0) of rotation matrices, Shepperd's largest-component rule:
        the symmetric matrix P = 4 q q^T is read off R, and q = P[k] / (2 sqrt(P[k, k])) for the
        largest diagonal entry k (no division by a small number)."""
        r00, r11, r22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
        P = np.empty((*R.shape[:-2], 4, 4))
        P[..., 0, 0] = 1.0 + r00 + r11 + r22
        P[..., 1, 1] = 1.0 + r00 - r11 - r22
        P[..., 2, 2] = 1.0 - r00 + r11 - r22
        P[..., 3, 3] = 1.0 - r00 - r11 + r22
        a = R[..., 2, 1] - R[..., 1, 2]
        b = R[..., 0, 2] - R[..., 2, 0]
        c = R[..., 1, 0] - R[..., 0, 1]
        d = R[..., 0, 1] + R[..., 1, 0]
        e = R[..., 0, 2] + R[..., 2, 0]
        f = R[..., 1, 2] + R[..., 2, 1]
        P[..., 0, 1] = P[..., 1, 0] = a
        P[..., 0, 2] = P[..., 2, 0] = b
        P[..., 0, 3] = P[..., 3, 0] = c
        P[..., 1, 2] = P[..., 2, 1] = d
        P[..., 1, 3] = P[..., 3, 1] = e
        P[..., 2, 3] = P[..., 3, 2] = f
        diag = np.stack([P[..., 0, 0], P[..., 1, 1], P[..., 2, 2], P[..., 3, 3]], axis=-1)
        k = np.argmax(diag, axis=-1)
        row = np.take_along_axis(P, k[..., None, None], axis=-2)[..., 0, :]
        pkk = np.take_along_axis(diag, k[..., None], axis=-1)[..., 0]
        q = row / (2.0 * np.sqrt(pkk))[..., None]
        return np.where((q[..., :1] < 0.0), -q, q)

    def exp_dL(self, xi):
        w = self.check_algebra(xi, where="SO3.exp_dL")
        T = FTable(_sq(w))
        return iso_matrix(w, 1.0, -T.f(2), T.f(3))

    def _exp_dl_inv_c(self, T: FTable):
        return (T.f(3) - 2.0 * T.f(4)) / (2.0 * T.f(2))

    def exp_dL_inv(self, xi):
        w = self.check_algebra(xi, where="SO3.exp_dL_inv")
        T = FTable(_sq(w))
        return iso_matrix(w, 1.0, 0.5, self._exp_dl_inv_c(T))

    def exp_dL_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO3.exp_dL_deriv")
        eta = self.check_algebra(eta, "eta", "SO3.exp_dL_deriv")
        (r, p, q), (r1, p1, q1) = _exp_dl_coeffs(FTable(_sq(w)), 1)
        return iso_jac(w, eta, r, p, q, r1, p1, q1)

    def exp_dL_hess(self, xi, eta, v):
        """``(..., 3, 3)`` Jacobian of ``xi -> exp_dL_deriv(xi, eta) @ v`` (second derivative of
        ``exp_dL(xi) eta``; used for SE(3))."""
        w = np.asarray(xi, dtype=np.float64)
        c0, c1, c2 = _exp_dl_coeffs(FTable(_sq(w)), 2)
        return iso_hess(w, eta, v, *c0, *c1, *c2)

    def exp_dL_apply(self, xi, eta):
        w = np.asarray(xi, dtype=np.float64)
        T = FTable(_sq(w))
        return iso_apply(w, eta, 1.0, -T.f(2), T.f(3))

    # Cayley (closed forms).
    def cay(self, xi):
        w = self.check_algebra(xi, where="SO3.cay")
        s = _sq(w)
        k = 4.0 / (4.0 + s)
        # I + k X + k/2 X^2 = (1 - k s/2) I + k X + k/2 w w^T
        return _rot_from_coeffs(w, 1.0 - 0.5 * k * s, k, 0.5 * k)

    def cay_inv(self, g, check: bool = True):
        R = self.check_element(g, "g", "SO3.cay_inv")
        if check:
            self._require_element(R, "SO3.cay_inv")
        den = 1.0 + R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
        if np.any(den <= 1e-12):
            from ._errors import LieGroupError

            raise LieGroupError(
                "SO3.cay_inv: the rotation angle is (numerically) pi, where the inverse Cayley "
                "map is singular (1 + trace R = 0). Use the exp retraction or a smaller step."
            )
        v = np.stack(
            [R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]],
            axis=-1,
        )
        return (2.0 / den)[..., None] * v

    def cay_dL(self, xi):
        w = self.check_algebra(xi, where="SO3.cay_dL")
        (r, p, q), = _cay_dl_coeffs(_sq(w), 0)
        return iso_matrix(w, r, p, q)

    def cay_dL_inv(self, xi):
        w = self.check_algebra(xi, where="SO3.cay_dL_inv")
        s = _sq(w)
        return iso_matrix(w, 1.0 + 0.25 * s, 0.5, 0.25)

    def cay_dL_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO3.cay_dL_deriv")
        eta = self.check_algebra(eta, "eta", "SO3.cay_dL_deriv")
        (r, p, q), (r1, p1, q1) = _cay_dl_coeffs(_sq(w), 1)
        return iso_jac(w, eta, r, p, q, r1, p1, q1)

    def cay_dL_inv_deriv(self, xi, eta):
        # d/dw [eta + w x eta / 2 + w (w . eta) / 4] = -hat(eta)/2 + ((w.eta) I + w eta^T)/4
        w = self.check_algebra(xi, where="SO3.cay_dL_inv_deriv")
        eta = self.check_algebra(eta, "eta", "SO3.cay_dL_inv_deriv")
        J = -0.5 * hat3(eta) + 0.25 * (w[..., :, None] * eta[..., None, :])
        we = 0.25 * np.einsum("...i,...i->...", w, eta)
        J[..., 0, 0] += we
        J[..., 1, 1] += we
        J[..., 2, 2] += we
        return J

    def cay_dL_hess(self, xi, eta, v):
        """Second derivative of ``cay_dL(xi) eta`` contracted with v (see :meth:`exp_dL_hess`)."""
        w = np.asarray(xi, dtype=np.float64)
        c0, c1, c2 = _cay_dl_coeffs(_sq(w), 2)
        return iso_hess(w, eta, v, *c0, *c1, *c2)


SO3 = SO3Group()
