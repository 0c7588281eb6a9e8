"""SO(3): rotations of R^3, algebra coordinates w in R^3 with hat(w) v = w x v.

Closed forms (high-order paper §6.1, §7.5; homogeneous-spaces paper §4–§5), with
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
from ._errors import LieGroupError
from ._numerics import (
    SERIES_THETA_SQ,
    SMALL_SERIES,
    FTable,
    blocked,
    cross3,
    hat3,
    iso_apply,
    iso_from_coeffs,
    iso_hess,
    iso_jac,
    iso_third,
    sq3,
    vee3,
)
from ._validation import predicate_array

__all__ = ["SO3", "SO3Group"]

_EYE3 = np.eye(3)
_TWO_EYE3 = 2.0 * _EYE3  # constants of the Cayley kernels (no per-call allocation)


def _exp_dl_coeffs(T: FTable, order: int):
    """(r, p, q) of exp dL = r I + p X + q X^2 and their s-derivatives up to ``order``."""
    one = np.ones_like(T.s)
    zero = np.zeros_like(T.s)
    out = [(one, -T.f(2), T.f(3))]
    if order >= 1:
        out.append((zero, -T.df(2), T.df(3)))
    if order >= 2:
        out.append((zero, -T.d2f(2), T.d2f(3)))
    if order >= 3:
        out.append((zero, -T.d3f(2), T.d3f(3)))
    return out


_rot_from_coeffs = iso_from_coeffs  # a I + b hat(w) + c w w^T

#: hat(e_c)[b, a] stored as [b, a, c] (the constant part of the Cayley dL tensor)
_E3_BAC = np.moveaxis(hat3(np.eye(3)), 0, -1)


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
        return _rot_from_coeffs(v, w * w - sq3(v), 2.0 * w, 2.0)

    def is_element(self, g, tol: float = 1e-10):
        g = predicate_array(g)
        if g is None or g.shape[-2:] != (3, 3) or g.ndim < 2:
            return np.False_
        if g.size <= 9 * SMALL_SERIES:  # few elements: few numpy calls (their count dominates)
            ok = _is_rotation_small(g, tol)
        else:
            ok = blocked(lambda R: _is_rotation(R, tol), g, 2, (), dtype=bool)
        return ok[()] if ok.ndim == 0 else ok

    # Group operations and algebra: unchecked kernels (public methods in ``_base.py``).
    def _k_compose(self, g, h):
        return np.matmul(g, h)

    def _k_inverse(self, g):
        return np.swapaxes(g, -1, -2).copy()

    def _k_hat(self, xi):
        return hat3(xi)

    def _k_vee(self, X):
        return vee3(X)

    def _k_ad(self, xi):
        return hat3(xi)

    def _k_bracket(self, xi, eta):
        return np.cross(xi, eta)

    # Exponential.  Public methods validate (shape, dtype, finiteness, membership) and call the
    # unchecked kernels ``_k_*`` (the internal fast path documented in ``_base.py``).
    def exp(self, xi):
        return self._k_exp(self.check_algebra(xi, where="SO3.exp"))

    def log(self, g, check: bool = True):
        R = self.check_element(g, "g", "SO3.log")
        if check:
            self._require_element(R, "SO3.log")
        return self._k_log(R)

    def exp_dL(self, xi):
        return self._k_exp_dL(self.check_algebra(xi, where="SO3.exp_dL"))

    def _exp_dl_inv_c(self, T: FTable):
        return (T.f(3) - 2.0 * T.f(4)) / (2.0 * T.f(2))

    def exp_dL_inv(self, xi):
        return self._k_exp_dL_inv(self.check_algebra(xi, where="SO3.exp_dL_inv"))

    def exp_dL_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO3.exp_dL_deriv")
        return self._k_exp_dL_deriv(w, self.check_algebra(eta, "eta", "SO3.exp_dL_deriv"))

    def exp_dL_inv_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO3.exp_dL_inv_deriv")
        return self._k_exp_dL_inv_deriv(w, self.check_algebra(eta, "eta",
                                                               "SO3.exp_dL_inv_deriv"))

    def exp_dL_hess(self, xi, eta, v):
        """``(..., 3, 3)`` Jacobian of ``xi -> exp_dL_deriv(xi, eta) @ v`` (second derivative of
        ``exp_dL(xi) eta``; used for SE(3))."""
        return self._k_exp_dL_hess(*self._algebra_args("SO3.exp_dL_hess", xi=xi, eta=eta, v=v))

    def _algebra_args(self, where, **args):
        out = [self.check_algebra(a, nm, where) for nm, a in args.items()]
        shapes = {a.shape[:-1] for a in out}
        if len(shapes) > 1:
            from ._validation import broadcast_batch

            broadcast_batch(where, **{nm: (a, 1) for nm, a in zip(args, out)})
        return out

    def exp_dL_third(self, xi, eta, v, u):
        """``(..., 3, 3)`` Jacobian of ``xi -> exp_dL_hess(xi, eta, v) @ u``: the third
        derivative of ``exp_dL(xi) eta`` contracted with v and u (closed form, symmetric in v,
        u and the direction it acts on; used for the SE(3) second derivative)."""
        w = self.check_algebra(xi, where="SO3.exp_dL_third")
        eta = self.check_algebra(eta, "eta", "SO3.exp_dL_third")
        v = self.check_algebra(v, "v", "SO3.exp_dL_third")
        u = self.check_algebra(u, "u", "SO3.exp_dL_third")
        return self._k_exp_dL_third(w, eta, v, u)

    def exp_dL_apply(self, xi, eta):
        """``exp_dL(xi) @ eta`` without forming the matrix, shape ``(..., 3)``."""
        w, eta = self._algebra_args("SO3.exp_dL_apply", xi=xi, eta=eta)
        T = FTable(sq3(w))
        return iso_apply(w, eta, 1.0, -T.f(2), T.f(3))

    # Cayley (closed forms).
    def cay(self, xi):
        return self._k_cay(self.check_algebra(xi, where="SO3.cay"))

    def cay_inv(self, g, check: bool = True):
        R = self.check_element(g, "g", "SO3.cay_inv")
        if check:
            self._require_element(R, "SO3.cay_inv")
        return self._k_cay_inv(R)

    def cay_dL(self, xi):
        return self._k_cay_dL(self.check_algebra(xi, where="SO3.cay_dL"))

    def cay_dL_inv(self, xi):
        return self._k_cay_dL_inv(self.check_algebra(xi, where="SO3.cay_dL_inv"))

    def cay_dL_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO3.cay_dL_deriv")
        return self._k_cay_dL_deriv(w, self.check_algebra(eta, "eta", "SO3.cay_dL_deriv"))

    def cay_dL_inv_deriv(self, xi, eta):
        w = self.check_algebra(xi, where="SO3.cay_dL_inv_deriv")
        return self._k_cay_dL_inv_deriv(w, self.check_algebra(eta, "eta",
                                                               "SO3.cay_dL_inv_deriv"))

    def cay_dL_hess(self, xi, eta, v):
        """Second derivative of ``cay_dL(xi) eta`` contracted with v (see :meth:`exp_dL_hess`)."""
        return self._k_cay_dL_hess(*self._algebra_args("SO3.cay_dL_hess", xi=xi, eta=eta, v=v))

    # ------------------------------------------------------------------ Unchecked kernels.
    # Inputs are float64 arrays already validated by a public method (``_base.py``).
    def _k_Ad(self, g):
        return g

    def _k_Ad_pair(self, g):
        return g, g  # Ad(R) = R and Ad(R^T)^T = R

    def _k_exp(self, w):
        return blocked(_exp_core, w, 1, (3, 3))

    def _k_log(self, R):
        return blocked(_log_core, R, 2, (3,))

    def _k_exp_dL(self, w):
        return blocked(_exp_dl_core, w, 1, (3, 3))

    def _k_exp_dL_inv(self, w):
        return blocked(_exp_dl_inv_core, w, 1, (3, 3))

    def _k_exp_dL_deriv(self, w, eta):
        (r, p, q), (r1, p1, q1) = _exp_dl_coeffs(FTable(sq3(w)), 1)
        return iso_jac(w, eta, r, p, q, r1, p1, q1)

    def _k_exp_dL_inv_deriv(self, w, eta):
        # d(D^{-1}) eta = -D^{-1} J(w, D^{-1} eta)   (exact; see _base._inverse_deriv), with one
        # coefficient table for both D^{-1} and J
        T = FTable(sq3(w))
        Di = _exp_dl_inv_from_table(w, T)
        y = np.einsum("...ij,...j->...i", Di, eta)
        (r, p, q), (r1, p1, q1) = _exp_dl_coeffs(T, 1)
        return -(Di @ iso_jac(w, y, r, p, q, r1, p1, q1))

    def _k_exp_dL_hess(self, w, eta, v):
        c0, c1, c2 = _exp_dl_coeffs(FTable(sq3(w)), 2)
        return iso_hess(w, eta, v, *c0, *c1, *c2)

    def _k_exp_dL_third(self, w, eta, v, u):
        _, c1, c2, c3 = _exp_dl_coeffs(FTable(sq3(w)), 3)
        return iso_third(w, eta, v, u, *c1, *c2, *c3)

    def _k_cay(self, w):
        return blocked(_cay_core, w, 1, (3, 3))

    def _k_cay_inv(self, R):
        return blocked(_cay_inv_core, R, 2, (3,))

    def _k_cay_dL(self, w):
        return blocked(_cay_dl_core, w, 1, (3, 3))

    def _k_cay_dL_inv(self, w):
        return blocked(_cay_dl_inv_core, w, 1, (3, 3))

    def _k_cay_dL_deriv(self, w, eta):
        # dL(w) eta = 2c (2 eta - w x eta), c = 1/(4 + |w|^2), dc/dw = -2c^2 w^T:
        # J = -4c^2 (M eta) w^T + 2c hat(eta), M = 2I - hat(w)  (closed form, few array ops)
        c = 1.0 / (4.0 + sq3(w))
        Me = 2.0 * eta - cross3(w, eta)
        return (-4.0 * c * c)[..., None, None] * (Me[..., :, None] * w[..., None, :]) + (
            2.0 * c
        )[..., None, None] * hat3(eta)

    def _k_cay_dL_inv_deriv(self, w, eta):
        # d/dw [eta + w x eta / 2 + w (w . eta) / 4] = -hat(eta)/2 + ((w.eta) I + w eta^T)/4
        J = -0.5 * hat3(eta) + 0.25 * (w[..., :, None] * eta[..., None, :])
        we = 0.25 * np.einsum("...i,...i->...", w, eta)
        J[..., 0, 0] += we
        J[..., 1, 1] += we
        J[..., 2, 2] += we
        return J

    def _k_cay_dL_tensor(self, w):
        # T[b, a, c] = d dL_{ba} / d w_c = -4c^2 M_{ba} w_c - 2c hat(e_c)_{ba}, M = 2I - hat(w)
        c = 1.0 / (4.0 + sq3(w))
        M = _TWO_EYE3 - hat3(w)
        T = (-4.0 * c * c)[..., None, None, None] * (M[..., :, :, None] * w[..., None, None, :])
        return T - (2.0 * c)[..., None, None, None] * _E3_BAC

    def _k_cay_dL_deriv_T_deriv(self, w, eta, mu):
        # d/dw [J(w, eta)^T mu] with J from _k_cay_dL_deriv; m = mu^T M eta, x = eta x mu:
        # S = 16c^3 m w w^T + 4c^2 (w x^T + x w^T) - 4c^2 m I
        c = 1.0 / (4.0 + sq3(w))
        m = np.einsum("...b,...b->...", mu, 2.0 * eta - cross3(w, eta))
        x = cross3(eta, mu)
        c2 = 4.0 * c * c
        S = (16.0 * c**3 * m)[..., None, None] * (w[..., :, None] * w[..., None, :])
        S = S + c2[..., None, None] * (w[..., :, None] * x[..., None, :]
                                       + x[..., :, None] * w[..., None, :])
        return S - (c2 * m)[..., None, None] * _EYE3

    def _k_cay_dL_hess(self, w, eta, v):
        # d/dw of J v = -4c^2 (w.v) M eta + 2c eta x v (see _k_cay_dL_deriv):
        # H = 16c^3 (w.v) (M eta) w^T - 4c^2 [(M eta) v^T + (w.v) hat(eta) + (eta x v) w^T]
        c = 1.0 / (4.0 + sq3(w))
        wv = np.einsum("...i,...i->...", w, v)
        Me = 2.0 * eta - cross3(w, eta)
        c2 = (4.0 * c * c)[..., None, None]
        H = (16.0 * c**3 * wv)[..., None, None] * (Me[..., :, None] * w[..., None, :])
        H = H - c2 * (Me[..., :, None] * v[..., None, :] + cross3(eta, v)[..., :, None]
                      * w[..., None, :])
        return H - (c2 * wv[..., None, None]) * hat3(eta)


# ----------------------------------------------------------------------------- block kernels
def _is_rotation_small(R, tol):
    """:func:`_is_rotation` in a few whole-array calls: |R^T R - I|_max <= tol and
    |det R - 1| <= 3 tol; False for non-finite entries."""
    fin = np.isfinite(R).all(axis=(-1, -2))
    if not fin.all():
        R = np.where(fin[..., None, None], R, 0.0)
    E = np.swapaxes(R, -1, -2) @ R
    E -= _EYE3
    worst = np.abs(E).max(axis=(-1, -2))
    return (worst <= tol) & (np.abs(np.linalg.det(R) - 1.0) <= 3 * tol) & fin


def _is_rotation(R, tol):
    r = [[R[..., i, j] for j in range(3)] for i in range(3)]
    with np.errstate(invalid="ignore", over="ignore"):
        worst = np.zeros(R.shape[:-2])
        for i in range(3):
            for j in range(i, 3):
                gij = r[0][i] * r[0][j] + r[1][i] * r[1][j] + r[2][i] * r[2][j]
                if i == j:
                    gij = gij - 1.0
                worst = np.fmax(worst, np.abs(gij))
                worst[np.isnan(gij)] = np.inf
        det = (
            r[0][0] * (r[1][1] * r[2][2] - r[1][2] * r[2][1])
            - r[0][1] * (r[1][0] * r[2][2] - r[1][2] * r[2][0])
            + r[0][2] * (r[1][0] * r[2][1] - r[1][1] * r[2][0])
        )
        return (worst <= tol) & (np.abs(det - 1.0) <= 3 * tol)


def _exp_core(w):
    T = FTable(sq3(w))
    return iso_from_coeffs(w, T.f(0), T.f(1), T.f(2))


def _exp_dl_core(w):
    # I - f2 X + f3 X^2 = f1 I - f2 X + f3 w w^T   (1 - s f3 = f1)
    T = FTable(sq3(w))
    return iso_from_coeffs(w, T.f(1), -T.f(2), T.f(3))


def _exp_dl_inv_core(w):
    return _exp_dl_inv_from_table(w, FTable(sq3(w)))


def _exp_dl_inv_from_table(w, T):
    """I + X/2 + c X^2 = a I + X/2 + c w w^T with a = f1/(2 f2) = (theta/2) cot(theta/2) and
    c = (1 - a)/theta^2 = (2 f2 - f1)/(2 s f2) = (f3 - 2 f4)/(2 f2).

    Near theta = 2 pi (f2 -> 0) a and c grow like 2/(2 pi - theta), and the textbook form loses
    accuracy twice: (i) f3 - 2 f4 (both ~1/theta^2, from the upward recursion) cancels down to
    (2 f2 - f1)/s, an absolute rounding error of ~eps/theta^2 that c/a amplifies by
    1/(2 pi - theta); (ii) the diagonal a + c w_i^2 subtracts two numbers of size |a|.  Where
    the closed forms are used (s >= 4, the series threshold of f3 and f4) c is therefore
    computed as (2 f2 - f1)/(2 s f2) (no cancellation for theta >= 2: f1 = sin(theta)/theta is
    at most 0.46 < 2 f2 there, and negative beyond pi) and the diagonal as
    (a (w_j^2 + w_k^2) + w_i^2)/s.  Every entry is then accurate to a few ulps of the size of
    the matrix times the conditioning of a(theta) for theta < 2 pi (tests/test_accuracy.py
    compares with mpmath up to 2 pi - 1e-9).
    """
    f1, f2 = T.f(1), T.f(2)
    inv = 0.5 / f2
    a = f1 * inv
    c_series = (T.f(3) - 2.0 * T.f(4)) * inv
    if T.all_series:  # every theta < 2 (known without another array pass)
        return iso_from_coeffs(w, a, 0.5, c_series)
    M = iso_from_coeffs(w, a, 0.5, c_series)
    big = np.flatnonzero(T.s.reshape(-1) >= SERIES_THETA_SQ["n<=4"][0])  # f3, f4 closed forms
    if big.size == 0:
        return M
    # recompute the entries of the elements with theta >= 2 only (few, usually)
    M = np.ascontiguousarray(M)
    Mf = M.reshape(-1, 3, 3)  # a view: M is contiguous
    wf = w.reshape(-1, 3)[big]  # w, T.s and M share the batch shape
    sb = T.s.reshape(-1)[big]
    ab = a.reshape(-1)[big]
    f1b, f2b = f1.reshape(-1)[big], f2.reshape(-1)[big]
    cb = (2.0 * f2b - f1b) * (0.5 / f2b) / sb
    Mb = iso_from_coeffs(wf, ab, 0.5, cb)
    x2, y2, z2 = wf[:, 0] ** 2, wf[:, 1] ** 2, wf[:, 2] ** 2
    Mb[:, 0, 0] = (ab * (y2 + z2) + x2) / sb
    Mb[:, 1, 1] = (ab * (x2 + z2) + y2) / sb
    Mb[:, 2, 2] = (ab * (x2 + y2) + z2) / sb
    Mf[big] = Mb
    return M


def _cay_core(w):
    s = sq3(w)
    k = 4.0 / (4.0 + s)
    return iso_from_coeffs(w, 1.0 - 0.5 * k * s, k, 0.5 * k)


def _cay_dl_core(w):
    d = 2.0 / (4.0 + sq3(w))
    return iso_from_coeffs(w, 2.0 * d, -d, 0.0)


def _cay_dl_inv_core(w):
    return iso_from_coeffs(w, 1.0, 0.5, 0.25)  # (1 + s/4) I + X/2 + X^2/4 = I + X/2 + w w^T/4


def _cay_inv_core(R):
    den = 1.0 + R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    if np.any(den <= 1e-12):
        raise LieGroupError(
            "SO3.cay_inv: the rotation angle is (numerically) pi, where the inverse Cayley "
            "map is singular (1 + trace R = 0). Use the exp retraction or a smaller step."
        )
    k = 2.0 / den
    out = np.empty((*R.shape[:-2], 3))
    out[..., 0] = k * (R[..., 2, 1] - R[..., 1, 2])
    out[..., 1] = k * (R[..., 0, 2] - R[..., 2, 0])
    out[..., 2] = k * (R[..., 1, 0] - R[..., 0, 1])
    return out


def _quat_far(R):
    """Quaternion (w >= 0) for rotations with trace R < 0: 4 q q^T = P is read off R and
    q = P[k] / (2 sqrt(P[k, k])) for the largest of P[1, 1], P[2, 2], P[3, 3] (Shepperd); with
    trace < 0 one of them is >= 1 (no division by a small number)."""
    tr = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    d1 = 1.0 + 2.0 * R[..., 0, 0] - tr
    d2 = 1.0 + 2.0 * R[..., 1, 1] - tr
    d3 = 1.0 + 2.0 * R[..., 2, 2] - tr
    a = R[..., 2, 1] - R[..., 1, 2]
    b = R[..., 0, 2] - R[..., 2, 0]
    c = R[..., 1, 0] - R[..., 0, 1]
    xy = R[..., 0, 1] + R[..., 1, 0]
    xz = R[..., 0, 2] + R[..., 2, 0]
    yz = R[..., 1, 2] + R[..., 2, 1]
    k1 = (d1 >= d2) & (d1 >= d3)
    k2 = ~k1 & (d2 >= d3)
    rows = [
        np.where(k1, a, np.where(k2, b, c)),
        np.where(k1, d1, np.where(k2, xy, xz)),
        np.where(k1, xy, np.where(k2, d2, yz)),
        np.where(k1, xz, np.where(k2, yz, d3)),
    ]
    pkk = np.where(k1, d1, np.where(k2, d2, d3))
    scale = np.where(rows[0] < 0.0, -0.5, 0.5) / np.sqrt(pkk)
    return np.stack(rows, axis=-1) * scale[..., None]


def _log_core(R):
    """log via the unit quaternion q = (w, v) and theta = 2 atan2(|v|, w).  Where trace R >= 0
    (theta <= 2pi/3) w = sqrt(1 + tr R)/2 >= 1/2 and v = vee(R - R^T)/(4w); elsewhere Shepperd's
    largest-component rule (:func:`_quat_far`).  Accurate up to theta = pi."""
    tr = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    w = 0.5 * np.sqrt(np.maximum(1.0 + tr, 0.25))
    k = 0.25 / w
    v = np.empty((*R.shape[:-2], 3))
    v[..., 0] = k * (R[..., 2, 1] - R[..., 1, 2])
    v[..., 1] = k * (R[..., 0, 2] - R[..., 2, 0])
    v[..., 2] = k * (R[..., 1, 0] - R[..., 0, 1])
    far = tr < 0.0
    if np.any(far):
        q = _quat_far(R[far])
        w[far] = q[..., 0]
        v[far] = q[..., 1:]
    n = np.sqrt(sq3(v))
    pos = n > 0.0
    scale = np.where(pos, 2.0 * np.arctan2(n, w) / np.where(pos, n, 1.0), 2.0 / w)
    return scale[..., None] * v


SO3 = SO3Group()
