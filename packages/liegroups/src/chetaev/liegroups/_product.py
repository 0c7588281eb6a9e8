"""Direct products G_1 x ... x G_m of matrix Lie groups.

Elements are block-diagonal matrices ``(k, k)``, ``k = sum of the factors' matrix_dim``; an R^n
factor is embedded as its translation matrix ``[[I, x], [0, 1]]``.  Algebra coordinates are
the concatenation of the factors' coordinates, and every matrix on the algebra (Ad, ad, the
trivialized tangents and their derivatives) is block diagonal.  Retractions act factor-wise
(high-order paper §7.4–7.5; discretization-maps paper §6.1).
"""

from __future__ import annotations

import functools

import numpy as np

from ._base import MatrixLieGroup
from ._errors import LieGroupError
from ._validation import broadcast_batch, predicate_array

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


class _KernelCache(dict):
    """``name -> [per-factor kernel of name]``, filled on first lookup (``__missing__``), so a
    cached lookup is one dict access."""

    def __init__(self, factors):
        super().__init__()
        self.factors = factors

    def __missing__(self, name: str) -> list:
        ks = []
        for f in self.factors:
            fn, checked = f._kernel(name)
            if checked and name in ("log", "cay_inv"):  # membership is checked once, here
                fn = functools.partial(fn, check=False)
            ks.append(fn)
        self[name] = ks
        return ks


class ProductGroup(MatrixLieGroup):
    """Direct product of groups; build with :func:`Product`."""

    def __init__(self, *factors: MatrixLieGroup):
        if len(factors) == 1 and isinstance(factors[0], (tuple, list)):
            factors = tuple(factors[0])
        if len(factors) < 1 or not all(isinstance(f, MatrixLieGroup) for f in factors):
            raise LieGroupError(
                "Product: expected the `factors` to be one or more group objects (e.g. "
                f"Product(SO3, Rn(2))), got {factors!r}."
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
        # block structure, fixed at construction (no per-call dispatch on it)
        self._dsl = [slice(int(a), int(b)) for a, b in zip(self._d_off[:-1], self._d_off[1:])]
        self._msl = [slice(int(a), int(b)) for a, b in zip(self._m_off[:-1], self._m_off[1:])]
        # per-factor kernels by name (``factor._kernel``), built on first use
        self._kcache: dict[str, list] = _KernelCache(self.factors)
        # flat factors (R^n): their Ad / dL / dL_inv blocks are the identity and the derivative
        # blocks zero, written directly; the other factors run their kernels on slices
        flat = [f._flat for f in self.factors]
        di = np.concatenate([np.arange(self._d_off[i], self._d_off[i + 1])
                             for i in range(len(flat)) if flat[i]] or [np.zeros(0, int)])
        self._flat_diag = di if di.size else None
        self._curved = [i for i in range(len(flat)) if not flat[i]]

    def __eq__(self, other):
        return isinstance(other, ProductGroup) and other.factors == self.factors

    def __hash__(self):
        return hash(("Product", self.factors))

    # Parts.
    def split(self, xi, check: bool = True) -> list[np.ndarray]:
        """Algebra coordinates ``(..., dim)`` -> list of per-factor coordinates."""
        return self._split(self.check_algebra(xi, "xi", f"{self.name}.split", check))

    def _split(self, xi):
        return [xi[..., sl] for sl in self._dsl]

    def _parts_list(self, parts, where: str) -> list:
        if isinstance(parts, np.ndarray) or not hasattr(parts, "__len__"):
            raise LieGroupError(
                f"{where}: expected `parts` as a list of {len(self.factors)} arrays (one per "
                f"factor {', '.join(f.name for f in self.factors)}), got {type(parts).__name__}."
            )
        if len(parts) != len(self.factors):
            raise LieGroupError(
                f"{where}: expected {len(self.factors)} parts (one per factor), "
                f"got {len(parts)}."
            )
        return list(parts)

    def join(self, parts, check: bool = True) -> np.ndarray:
        """Inverse of :meth:`split` (concatenation, broadcasting batch axes)."""
        where = f"{self.name}.join"
        parts = [f.check_algebra(p, f"parts[{i}]", where, check)
                 for i, (f, p) in enumerate(zip(self.factors, self._parts_list(parts, where)))]
        batch = broadcast_batch(where, **{f"parts[{i}]": (p, 1) for i, p in enumerate(parts)})
        return np.concatenate([np.broadcast_to(p, (*batch, p.shape[-1])) for p in parts], -1)

    def _blocks_of(self, M):
        return [
            M[..., self._m_off[i] : self._m_off[i + 1], self._m_off[i] : self._m_off[i + 1]]
            for i in range(len(self.factors))
        ]

    def element_parts(self, g, check: bool = True) -> list[np.ndarray]:
        """Block-diagonal element(s) -> list of factor elements (R^n factors as (n,) vectors);
        validates membership unless ``check=False``."""
        g = self.check_member(g, "g", f"{self.name}.element_parts", check)
        return [f._k_from_matrix(B) for f, B in zip(self.factors, self._blocks_of(g))]

    def from_parts(self, parts, check: bool = True) -> np.ndarray:
        """List of factor elements -> block-diagonal element(s) ``(..., k, k)``; each part is
        validated as an element of its factor unless ``check=False``."""
        where = f"{self.name}.from_parts"
        parts = [f.check_member(p, f"parts[{i}]", where, check)
                 for i, (f, p) in enumerate(zip(self.factors, self._parts_list(parts, where)))]
        broadcast_batch(where, **{f"parts[{i}]": (p, len(f.shape))
                                  for i, (f, p) in enumerate(zip(self.factors, parts))})
        return _block_diag([f._k_as_matrix(p) for f, p in zip(self.factors, parts)],
                           self.msizes)

    def _diag(self, mats):
        return _block_diag(list(mats), self.dims)

    # Factory / membership.
    def random(self, rng, size=()):
        return self.from_parts([f.random(rng, size) for f in self.factors], check=False)

    def is_element(self, g, tol: float = 1e-10):
        g = predicate_array(g)
        if g is None or g.ndim < 2 or g.shape[-2:] != self.shape:
            return np.False_
        finite = np.all(np.isfinite(g), axis=(-1, -2))
        g = np.where(np.isfinite(g), g, 0.0)
        ok = finite
        mask = np.ones(self.shape, dtype=bool)
        for f, B, i in zip(self.factors, self._blocks_of(g), range(len(self.factors))):
            a, b = self._m_off[i], self._m_off[i + 1]
            mask[a:b, a:b] = False
            ok = ok & f.is_element(f._k_from_matrix(B), tol)
            if f.shape != (f.matrix_dim, f.matrix_dim):  # embedded vector group: check structure
                with np.errstate(invalid="ignore"):
                    ok = ok & (np.max(np.abs(f._k_as_matrix(f._k_from_matrix(B)) - B), (-1, -2))
                                <= tol)
        with np.errstate(invalid="ignore"):
            off = np.where(mask, np.abs(g), 0.0)
            ok = ok & (np.max(off, axis=(-1, -2)) <= tol)
        return ok[()] if np.ndim(ok) == 0 else ok

    def _membership_text(self) -> str:
        return "block-diagonal with factor blocks in " + ", ".join(f.name for f in self.factors)

    # Group operations.
    def _k_compose(self, g, h):
        return np.matmul(np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64))

    def _k_inverse(self, g):
        g = np.asarray(g, dtype=np.float64)
        out = np.zeros(g.shape)
        kc = self._kcache
        for f, fm, am, ms in zip(self.factors, kc["from_matrix"], kc["as_matrix"], self._msl):
            out[..., ms, ms] = am(f._k_inverse(fm(g[..., ms, ms])))
        return out

    # Algebra.
    def _k_hat(self, xi):
        return _block_diag([f._k_hat(x) for f, x in zip(self.factors, self._split(xi))],
                           self.msizes)

    def _k_vee(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.concatenate([f._k_vee(B) for f, B in zip(self.factors, self._blocks_of(X))], -1)

    def _k_ad(self, xi):
        return self._diag(f._k_ad(x) for f, x in zip(self.factors, self._split(xi)))

    # Factor-wise maps: public methods validate once, then the kernels below run the factors'
    # kernels on slices and write the blocks into one preallocated array (``_base.py``).
    def _k_elementwise(self, name, xi):
        out = np.zeros((*xi.shape[:-1], self.matrix_dim, self.matrix_dim))
        kc = self._kcache
        for k, am, ds, ms in zip(kc[name], kc["as_matrix"], self._dsl, self._msl):
            out[..., ms, ms] = am(k(xi[..., ds]))
        return out

    def _k_inverse_map(self, name, g):
        return np.concatenate(
            [k(fm(g[..., ms, ms]))
             for k, fm, ms in zip(self._kcache[name], self._kcache["from_matrix"], self._msl)], -1)

    def _k_matrix_map(self, name, xi):  # dL / dL_inv: identity on flat factors
        out = self._eye_flat(xi.shape[:-1])
        ks = self._kcache[name]
        for i in self._curved:
            ds = self._dsl[i]
            out[..., ds, ds] = ks[i](xi[..., ds])
        return out

    def _k_deriv_map(self, name, xi, eta):  # derivatives: zero on flat factors
        out = np.zeros((*np.broadcast_shapes(xi.shape[:-1], eta.shape[:-1]), self.dim, self.dim))
        ks = self._kcache[name]
        for i in self._curved:
            ds = self._dsl[i]
            out[..., ds, ds] = ks[i](xi[..., ds], eta[..., ds])
        return out

    def _k_hess_map(self, name, xi, eta, u):
        batch = np.broadcast_shapes(xi.shape[:-1], eta.shape[:-1], u.shape[:-1])
        out = np.zeros((*batch, self.dim, self.dim))
        ks = self._kcache[name]
        for i in self._curved:
            ds = self._dsl[i]
            out[..., ds, ds] = ks[i](xi[..., ds], eta[..., ds], u[..., ds])
        return out

    def _eye_flat(self, batch):
        """Zeros ``(*batch, dim, dim)`` with the identity on the flat factors' blocks."""
        out = np.zeros((*batch, self.dim, self.dim))
        if self._flat_diag is not None:
            out[..., self._flat_diag, self._flat_diag] = 1.0
        return out

    def _k_Ad(self, g):
        out = self._eye_flat(g.shape[:-2])
        ks, fms = self._kcache["Ad"], self._kcache["from_matrix"]
        for i in self._curved:
            ms, ds = self._msl[i], self._dsl[i]
            out[..., ds, ds] = ks[i](fms[i](g[..., ms, ms]))
        return out

    def _k_Ad_pair(self, g):
        A = self._eye_flat(g.shape[:-2])
        B = A.copy()
        ks, fms = self._kcache["Ad_pair"], self._kcache["from_matrix"]
        for i in self._curved:
            ms, ds = self._msl[i], self._dsl[i]
            A[..., ds, ds], B[..., ds, ds] = ks[i](fms[i](g[..., ms, ms]))
        return A, B

    def _k_exp(self, xi):
        return self._k_elementwise("exp", xi)

    def _k_cay(self, xi):
        return self._k_elementwise("cay", xi)

    def _k_log(self, g):
        return self._k_inverse_map("log", g)

    def _k_cay_inv(self, g):
        return self._k_inverse_map("cay_inv", g)

    def _k_exp_dL(self, xi):
        return self._k_matrix_map("exp_dL", xi)

    def _k_exp_dL_inv(self, xi):
        return self._k_matrix_map("exp_dL_inv", xi)

    def _k_cay_dL(self, xi):
        return self._k_matrix_map("cay_dL", xi)

    def _k_cay_dL_inv(self, xi):
        return self._k_matrix_map("cay_dL_inv", xi)

    def _k_exp_dL_deriv(self, xi, eta):
        return self._k_deriv_map("exp_dL_deriv", xi, eta)

    def _k_exp_dL_inv_deriv(self, xi, eta):
        return self._k_deriv_map("exp_dL_inv_deriv", xi, eta)

    def _k_cay_dL_deriv(self, xi, eta):
        return self._k_deriv_map("cay_dL_deriv", xi, eta)

    def _k_cay_dL_inv_deriv(self, xi, eta):
        return self._k_deriv_map("cay_dL_inv_deriv", xi, eta)

    def _k_exp_dL_hess(self, xi, eta, u):
        return self._k_hess_map("exp_dL_hess", xi, eta, u)

    def _k_cay_dL_hess(self, xi, eta, u):
        return self._k_hess_map("cay_dL_hess", xi, eta, u)

    # Public factor-wise maps.
    def _checked(self, name, where, *args):
        args = [self.check_algebra(a, nm, f"{self.name}.{where}")
                for a, nm in zip(args, ("xi", "eta", "u"))]
        return getattr(self, "_k_" + name)(*args)

    def _inverse_public(self, name, g, check):
        where = f"{self.name}.{name}"
        g = self.check_element(g, "g", where)
        if check:
            self._require_element(g, where)
        return getattr(self, "_k_" + name)(g)

    def exp_dL_hess(self, xi, eta, u):
        return self._checked("exp_dL_hess", "exp_dL_hess", xi, eta, u)

    def cay_dL_hess(self, xi, eta, u):
        return self._checked("cay_dL_hess", "cay_dL_hess", xi, eta, u)

    def exp(self, xi):
        return self._checked("exp", "exp", xi)

    def log(self, g, check: bool = True):
        return self._inverse_public("log", g, check)

    def exp_dL(self, xi):
        return self._checked("exp_dL", "exp_dL", xi)

    def exp_dL_inv(self, xi):
        return self._checked("exp_dL_inv", "exp_dL_inv", xi)

    def exp_dL_deriv(self, xi, eta):
        return self._checked("exp_dL_deriv", "exp_dL_deriv", xi, eta)

    def exp_dL_inv_deriv(self, xi, eta):
        return self._checked("exp_dL_inv_deriv", "exp_dL_inv_deriv", xi, eta)

    def cay(self, xi):
        return self._checked("cay", "cay", xi)

    def cay_inv(self, g, check: bool = True):
        return self._inverse_public("cay_inv", g, check)

    def cay_dL(self, xi):
        return self._checked("cay_dL", "cay_dL", xi)

    def cay_dL_inv(self, xi):
        return self._checked("cay_dL_inv", "cay_dL_inv", xi)

    def cay_dL_deriv(self, xi, eta):
        return self._checked("cay_dL_deriv", "cay_dL_deriv", xi, eta)

    def cay_dL_inv_deriv(self, xi, eta):
        return self._checked("cay_dL_inv_deriv", "cay_dL_inv_deriv", xi, eta)


def Product(*factors: MatrixLieGroup) -> ProductGroup:
    """Direct product ``Product(SO3, Rn(2))``: block-diagonal elements, concatenated coordinates."""
    return ProductGroup(*factors)
