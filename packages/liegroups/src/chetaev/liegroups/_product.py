"""Direct products G_1 x ... x G_m of matrix Lie groups.

Elements are block-diagonal matrices ``(k, k)``, ``k = sum of the factors' matrix_dim``; an R^n
factor is embedded as its translation matrix ``[[I, x], [0, 1]]``.  Algebra coordinates are
the concatenation of the factors' coordinates, and every matrix on the algebra (Ad, ad, the
trivialized tangents and their derivatives) is block diagonal.  Retractions act factor-wise
(spec high-order-nonholonomic §3.2 "Products"; discretization-maps-holonomic §6.1).
"""

from __future__ import annotations

import numpy as np

from ._base import MatrixLieGroup
from ._errors import LieGroupError

__all__ = ["Product", "ProductGroup"]


def _block_diag(blocks: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    batch = np.broadcast_shapes(*(b.shape[:-2] for b in blocks))
    k = sum(sizes)
    out = np.zeros((*batch, k, k))
    i = 0
    for b, n in zip(blocks, sizes):
        out[..., i : i + n, i : i + n] = b
        i += n
    return out


class ProductGroup(MatrixLieGroup):
    """Direct product of groups; build with :func:`Product`."""

    def __init__(self, *factors: MatrixLieGroup):
        if len(factors) == 1 and isinstance(factors[0], (tuple, list)):
            factors = tuple(factors[0])
        if len(factors) < 1 or not all(isinstance(f, MatrixLieGroup) for f in factors):
            raise LieGroupError(
                "Product: expected one or more group objects (e.g. Product(SO3, Rn(2))), "
                f"got {factors!r}."
            )
        self.factors: tuple[MatrixLieGroup, ...] = tuple(factors)
        self.name = "x".join(f.name for f in self.factors)
        self.dims = [f.dim for f in self.factors]
        self.msizes = [f.matrix_dim for f in self.factors]
        self.dim = sum(self.dims)
        self.matrix_dim = sum(self.msizes)
        self.shape = (self.matrix_dim, self.matrix_dim)
        self._d_off = np.cumsum([0, *self.dims])
        self._m_off = np.cumsum([0, *self.msizes])

    def __eq__(self, other):
        return isinstance(other, ProductGroup) and other.factors == self.factors

    def __hash__(self):
        return hash(("Product", self.factors))

    # Parts.
    def split(self, xi) -> list[np.ndarray]:
        """Algebra coordinates ``(..., dim)`` -> list of per-factor coordinates."""
        xi = np.asarray(xi, dtype=np.float64)
        return [xi[..., self._d_off[i] : self._d_off[i + 1]] for i in range(len(self.factors))]

    def join(self, parts) -> np.ndarray:
        """Inverse of :meth:`split` (concatenation, broadcasting batch axes)."""
        parts = [np.asarray(p, dtype=np.float64) for p in parts]
        batch = np.broadcast_shapes(*(p.shape[:-1] for p in parts))
        return np.concatenate([np.broadcast_to(p, (*batch, p.shape[-1])) for p in parts], -1)

    def _blocks_of(self, M):
        return [
            M[..., self._m_off[i] : self._m_off[i + 1], self._m_off[i] : self._m_off[i + 1]]
            for i in range(len(self.factors))
        ]

    def element_parts(self, g) -> list[np.ndarray]:
        """Block-diagonal element(s) -> list of factor elements (R^n factors as (n,) vectors)."""
        g = self.check_element(g, "g", f"{self.name}.element_parts")
        return [f.from_matrix(B) for f, B in zip(self.factors, self._blocks_of(g))]

    def from_parts(self, parts) -> np.ndarray:
        """List of factor elements -> block-diagonal element(s) ``(..., k, k)``."""
        if len(parts) != len(self.factors):
            raise LieGroupError(
                f"{self.name}.from_parts: expected {len(self.factors)} parts (one per factor), "
                f"got {len(parts)}."
            )
        return _block_diag([f.as_matrix(p) for f, p in zip(self.factors, parts)], self.msizes)

    def _diag(self, mats):
        return _block_diag(list(mats), self.dims)

    # Factory / membership.
    def random(self, rng, size=()):
        return self.from_parts([f.random(rng, size) for f in self.factors])

    def is_element(self, g, tol: float = 1e-10):
        g = np.asarray(g, dtype=np.float64)
        if g.ndim < 2 or g.shape[-2:] != self.shape:
            return np.False_
        finite = np.all(np.isfinite(g), axis=(-1, -2))
        g = np.where(np.isfinite(g), g, 0.0)
        ok = finite
        mask = np.ones(self.shape, dtype=bool)
        for f, B, i in zip(self.factors, self._blocks_of(g), range(len(self.factors))):
            a, b = self._m_off[i], self._m_off[i + 1]
            mask[a:b, a:b] = False
            ok = ok & f.is_element(f.from_matrix(B), tol)
            if f.shape != (f.matrix_dim, f.matrix_dim):  # embedded vector group: check structure
                with np.errstate(invalid="ignore"):
                    ok = ok & (np.max(np.abs(f.as_matrix(f.from_matrix(B)) - B), (-1, -2)) <= tol)
        with np.errstate(invalid="ignore"):
            off = np.where(mask, np.abs(g), 0.0)
            ok = ok & (np.max(off, axis=(-1, -2)) <= tol)
        return ok[()] if np.ndim(ok) == 0 else ok

    def _membership_text(self) -> str:
        return "block-diagonal with factor blocks in " + ", ".join(f.name for f in self.factors)

    # Group operations.
    def compose(self, g, h):
        return np.matmul(np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64))

    def inverse(self, g):
        g = np.asarray(g, dtype=np.float64)
        parts = [f.from_matrix(B) for f, B in zip(self.factors, self._blocks_of(g))]
        return self.from_parts([f.inverse(p) for f, p in zip(self.factors, parts)])

    def Ad(self, g):
        g = np.asarray(g, dtype=np.float64)
        parts = [f.from_matrix(B) for f, B in zip(self.factors, self._blocks_of(g))]
        return self._diag(f.Ad(p) for f, p in zip(self.factors, parts))

    # Algebra.
    def hat(self, xi):
        return _block_diag([f.hat(x) for f, x in zip(self.factors, self.split(xi))], self.msizes)

    def vee(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.concatenate([f.vee(B) for f, B in zip(self.factors, self._blocks_of(X))], -1)

    def ad(self, xi):
        return self._diag(f.ad(x) for f, x in zip(self.factors, self.split(xi)))

    # Factor-wise maps.
    def _elementwise(self, method, xi, where):
        xi = self.check_algebra(xi, where=f"{self.name}.{where}")
        return self.from_parts(
            [getattr(f, method)(x) for f, x in zip(self.factors, self.split(xi))]
        )

    def _inverse_map(self, method, g, check, where):
        g = self.check_element(g, "g", f"{self.name}.{where}")
        if check:
            self._require_element(g, f"{self.name}.{where}")
        parts = [f.from_matrix(B) for f, B in zip(self.factors, self._blocks_of(g))]
        return np.concatenate(
            [getattr(f, method)(p, check=False) for f, p in zip(self.factors, parts)], -1
        )

    def _matrix_map(self, method, xi, where):
        xi = self.check_algebra(xi, where=f"{self.name}.{where}")
        return self._diag(getattr(f, method)(x) for f, x in zip(self.factors, self.split(xi)))

    def _deriv_map(self, method, xi, eta, where):
        xi = self.check_algebra(xi, where=f"{self.name}.{where}")
        eta = self.check_algebra(eta, "eta", f"{self.name}.{where}")
        return self._diag(
            getattr(f, method)(x, e)
            for f, x, e in zip(self.factors, self.split(xi), self.split(eta))
        )

    def _hess_map(self, method, xi, eta, u, where):
        xi = self.check_algebra(xi, where=f"{self.name}.{where}")
        eta = self.check_algebra(eta, "eta", f"{self.name}.{where}")
        u = self.check_algebra(u, "u", f"{self.name}.{where}")
        return self._diag(
            getattr(f, method)(x, e, v)
            for f, x, e, v in zip(self.factors, self.split(xi), self.split(eta), self.split(u))
        )

    def exp_dL_hess(self, xi, eta, u):
        return self._hess_map("exp_dL_hess", xi, eta, u, "exp_dL_hess")

    def cay_dL_hess(self, xi, eta, u):
        return self._hess_map("cay_dL_hess", xi, eta, u, "cay_dL_hess")

    def exp(self, xi):
        return self._elementwise("exp", xi, "exp")

    def log(self, g, check: bool = True):
        return self._inverse_map("log", g, check, "log")

    def exp_dL(self, xi):
        return self._matrix_map("exp_dL", xi, "exp_dL")

    def exp_dL_inv(self, xi):
        return self._matrix_map("exp_dL_inv", xi, "exp_dL_inv")

    def exp_dL_deriv(self, xi, eta):
        return self._deriv_map("exp_dL_deriv", xi, eta, "exp_dL_deriv")

    def exp_dL_inv_deriv(self, xi, eta):
        return self._deriv_map("exp_dL_inv_deriv", xi, eta, "exp_dL_inv_deriv")

    def cay(self, xi):
        return self._elementwise("cay", xi, "cay")

    def cay_inv(self, g, check: bool = True):
        return self._inverse_map("cay_inv", g, check, "cay_inv")

    def cay_dL(self, xi):
        return self._matrix_map("cay_dL", xi, "cay_dL")

    def cay_dL_inv(self, xi):
        return self._matrix_map("cay_dL_inv", xi, "cay_dL_inv")

    def cay_dL_deriv(self, xi, eta):
        return self._deriv_map("cay_dL_deriv", xi, eta, "cay_dL_deriv")

    def cay_dL_inv_deriv(self, xi, eta):
        return self._deriv_map("cay_dL_inv_deriv", xi, eta, "cay_dL_inv_deriv")


def Product(*factors: MatrixLieGroup) -> ProductGroup:
    """Direct product ``Product(SO3, Rn(2))``: block-diagonal elements, concatenated coordinates."""
    return ProductGroup(*factors)
