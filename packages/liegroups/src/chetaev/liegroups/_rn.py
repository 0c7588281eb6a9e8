"""R^n as an abelian group: elements are plain (n,) vectors, composition is addition.

The matrix representation (used by ``hat`` and inside products) is the translation matrix
``[[I, x], [0, 1]]``; ``hat(x) = [[0, x], [0, 0]]``.  Both retractions are the identity map:
``tau(xi) = xi``, dL = dR = I, all derivative terms vanish, Ad = I, ad = 0
(high-order paper §6).
"""

from __future__ import annotations

import functools

import numpy as np

from ._base import MatrixLieGroup
from ._errors import LieGroupError
from ._validation import predicate_array

__all__ = ["Rn", "RnGroup"]


class RnGroup(MatrixLieGroup):
    """The additive group R^n."""

    # Ad = dL = dL_inv = I and every derivative of dL is zero, for both retractions: products
    # write these blocks directly instead of calling the factor's kernels (``_product.py``).
    _flat = True

    def __init__(self, n: int):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise LieGroupError(f"Rn: expected a positive integer dimension n, got {n!r}.")
        self.n = int(n)
        self.name = f"R{self.n}"
        self.dim = self.n
        self.shape = (self.n,)
        self.matrix_dim = self.n + 1

    def __reduce__(self):
        return (Rn, (self.n,))

    def random(self, rng, size=()):
        size = (size,) if np.isscalar(size) else tuple(size)
        return rng.normal(size=(*size, self.n))

    def is_element(self, g, tol: float = 1e-10):
        g = predicate_array(g)
        if g is None or g.ndim < 1 or g.shape[-1] != self.n:
            return np.False_
        ok = np.all(np.isfinite(g), axis=-1)
        return ok[()] if ok.ndim == 0 else ok

    def _k_compose(self, g, h):
        return np.asarray(g, dtype=np.float64) + np.asarray(h, dtype=np.float64)

    def _k_inverse(self, g):
        return -np.asarray(g, dtype=np.float64)

    def _eye(self, batch):
        out = np.zeros((*batch, self.n, self.n))
        out.reshape(-1, self.n * self.n)[:, :: self.n + 1] = 1.0  # the diagonals (a view)
        return out

    def _k_hat(self, xi):
        xi = np.asarray(xi, dtype=np.float64)
        M = np.zeros((*xi.shape[:-1], self.n + 1, self.n + 1))
        M[..., : self.n, self.n] = xi
        return M

    def _k_vee(self, X):
        return np.array(np.asarray(X, dtype=np.float64)[..., : self.n, self.n])

    def _k_ad(self, xi):
        return np.zeros((*np.shape(xi)[:-1], self.n, self.n))

    def _k_bracket(self, xi, eta):
        return np.zeros(np.broadcast_shapes(np.shape(xi), np.shape(eta)))

    def exp(self, xi):
        return np.array(self.check_algebra(xi, where=f"{self.name}.exp"))

    def log(self, g, check: bool = True):
        return np.array(self.check_element(g, "g", f"{self.name}.log"))

    def exp_dL(self, xi):
        return self._eye(self.check_algebra(xi, where=f"{self.name}.exp_dL").shape[:-1])

    exp_dL_inv = exp_dL

    def exp_dL_deriv(self, xi, eta):
        xi = self.check_algebra(xi, where=f"{self.name}.dL_deriv")
        eta = self.check_algebra(eta, "eta", f"{self.name}.dL_deriv")
        return np.zeros((*np.broadcast_shapes(xi.shape, eta.shape), self.n))

    exp_dL_inv_deriv = exp_dL_deriv

    def exp_dL_hess(self, xi, eta, u):
        where = f"{self.name}.dL_hess"
        xi = self.check_algebra(xi, "xi", where)
        eta = self.check_algebra(eta, "eta", where)
        u = self.check_algebra(u, "u", where)
        return np.zeros((*np.broadcast_shapes(xi.shape, eta.shape, u.shape), self.n))

    # Cayley is the identity on R^n as well.
    def cay(self, xi):
        return np.array(self.check_algebra(xi, where=f"{self.name}.cay"))

    def cay_inv(self, g, check: bool = True):
        return np.array(self.check_element(g, "g", f"{self.name}.cay_inv"))

    cay_dL = exp_dL
    cay_dL_inv = exp_dL
    cay_dL_deriv = exp_dL_deriv
    cay_dL_inv_deriv = exp_dL_deriv
    cay_dL_hess = exp_dL_hess

    # Unchecked kernels (validated float64 inputs; see ``_base.py``).
    def _k_as_matrix(self, g):
        n = self.n
        M = np.zeros((*g.shape[:-1], n + 1, n + 1))
        idx = np.arange(n + 1)
        M[..., idx, idx] = 1.0
        M[..., :n, n] = g
        return M

    def _k_from_matrix(self, M):
        return np.array(M[..., : self.n, self.n])

    def _k_Ad(self, g):
        return self._eye(g.shape[:-1])

    def _k_Ad_pair(self, g):
        e = self._eye(g.shape[:-1])
        return e, e

    def _k_exp(self, xi):
        return np.array(xi)

    def _k_log(self, g):
        return np.array(g)

    _k_cay = _k_exp
    _k_cay_inv = _k_log

    def _k_exp_dL(self, xi):
        return self._eye(xi.shape[:-1])

    _k_exp_dL_inv = _k_cay_dL = _k_cay_dL_inv = _k_exp_dL

    def _k_exp_dL_deriv(self, xi, eta):
        return np.zeros((*np.broadcast_shapes(xi.shape, eta.shape), self.n))

    _k_exp_dL_inv_deriv = _k_cay_dL_deriv = _k_cay_dL_inv_deriv = _k_exp_dL_deriv

    def _k_exp_dL_hess(self, xi, eta, u):
        return np.zeros((*np.broadcast_shapes(xi.shape, eta.shape, u.shape), self.n))

    _k_cay_dL_hess = _k_exp_dL_hess

    def _k_exp_dL_tensor(self, xi):
        return np.zeros((*xi.shape[:-1], self.n, self.n, self.n))

    _k_cay_dL_tensor = _k_exp_dL_tensor

    def _k_exp_dL_deriv_T_deriv(self, xi, eta, mu):
        batch = np.broadcast_shapes(xi.shape[:-1], eta.shape[:-1], mu.shape[:-1])
        return np.zeros((*batch, self.n, self.n))

    _k_cay_dL_deriv_T_deriv = _k_exp_dL_deriv_T_deriv


@functools.cache
def _rn_cached(n: int) -> RnGroup:
    return RnGroup(n)


def Rn(n: int) -> RnGroup:
    """The additive group R^n, elements (n,) vectors (cached: ``Rn(3) is Rn(3)``)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise LieGroupError(f"Rn: expected a positive integer dimension n, got {n!r}.")
    return _rn_cached(int(n))
