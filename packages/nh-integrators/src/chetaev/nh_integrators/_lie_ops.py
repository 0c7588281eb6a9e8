"""Retraction and group operations used by the Lie-group nonholonomic PRK step.

The step (``_lie_core``) needs, for a group ``G`` with algebra dimension ``d`` and a
retraction τ, these broadcasting operations (high-order paper §6.1,
homogeneous-spaces paper §2–§4):

* ``compose(g, h)``; ``Ad_pair(T)`` = (Ad(T), Ad(T⁻¹)ᵀ = Ad*_{T⁻¹}), ``(..., d, d)`` each;
  ``P(f)``, the matrix of ζ ↦ ad_ζᵀ f;
* ``tau(xi)`` (an element; for a product the block-diagonal matrix);
* ``dL_and_tensor(xi)``: the left-trivialized tangent dL(ξ) (d/dε τ(ξ+εδ)|₀ = τ(ξ)·hat(dL(ξ)δ))
  and the exact third-order tensor ``T[..., b, a, c] = ∂dL(ξ)_{ba}/∂ξ_c``. Contracting ``a``
  with v gives the Jacobian J^L(ξ, v) = ∂_ξ(dL(ξ) v) of homogeneous-spaces-rkmk §2; contracting
  ``b`` with p gives the derivative of dL(ξ)ᵀp.

Sources, all exact (no truncated series: truncation would limit the
Newton residual): closed forms for SO(3) with Cayley (derived from the definitions)::

    dL(ξ) = 2/(4+θ²) (2I − ξ̂),   ∂dL/∂ξ_c = −4ξ_c/(4+θ²)² (2I − ξ̂) − 2/(4+θ²) ê_c

τ = id for Rⁿ; products factor by factor (block-diagonal); otherwise the group's own
``cay_dL``/``cay_dL_deriv`` or ``exp_dL``/``exp_dL_deriv`` from ``chetaev.liegroups``, with
generic fallbacks: the matrix Cayley formula dL(ξ)v = vee(B⁻¹v̂A⁻¹) (A = I − ξ̂/2, B = I + ξ̂/2)
and its derivative, and for exp the block-matrix (Van Loan) form of φ₁(−ad_ξ).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__: list[str] = []


def _hat3(w: np.ndarray) -> np.ndarray:
    Z = np.zeros((*w.shape[:-1], 3, 3))
    Z[..., 0, 1], Z[..., 0, 2] = -w[..., 2], w[..., 1]
    Z[..., 1, 0], Z[..., 1, 2] = w[..., 2], -w[..., 0]
    Z[..., 2, 0], Z[..., 2, 1] = -w[..., 1], w[..., 0]
    return Z


_E3 = _hat3(np.eye(3))  # ê_c, (3, 3, 3)


class _RetractionOps:
    """Group + retraction operations on algebra coordinates, broadcasting over batch axes.

    Parameters
    ----------
    group
        A ``chetaev.liegroups`` group object (``dim``, ``shape``, ``hat``, ``vee``, ``Ad``,
        ``ad``, ``inverse``; products also ``factors``).
    kind
        ``"cayley"`` or ``"exp"``.
    """

    def __init__(self, group: Any, kind: str) -> None:
        self.group = group
        self.kind = kind
        self.d = int(group.dim)
        self.elem_shape = tuple(group.shape)
        self.elem_ndim = len(self.elem_shape)
        self.matrix = self.elem_ndim == 2
        self.ad_basis = np.asarray(group.ad(np.eye(self.d)), dtype=float)  # ad(e_k): (d, d, d)
        self.so3 = self.matrix and self.d == 3 and self.elem_shape == (3, 3) and getattr(
            group, "name", "") == "SO3"
        factors = getattr(group, "factors", None)
        self.factors = None
        if factors is not None and self.matrix:
            self.factors = [_RetractionOps(f, kind) for f in factors]
            self.doff = np.cumsum([0] + [f.d for f in self.factors])
            self.msz = [int(f.matrix_dim) for f in factors]
            self.moff = np.cumsum([0, *self.msz])
        if self.matrix:
            self.basis_hat = np.asarray(group.hat(np.eye(self.d)), dtype=float)  # (d, k, k)
            self.ident = np.eye(self.elem_shape[0])

    # group operations -------------------------------------------------------------------
    def compose(self, g: np.ndarray, h: np.ndarray) -> np.ndarray:
        return g @ h if self.matrix else g + h

    def matrix_of(self, g: np.ndarray) -> np.ndarray:
        """Matrix representation of an element (Rⁿ: the translation matrix)."""
        if self.matrix:
            return g
        n = self.d
        M = np.zeros((*g.shape[:-1], n + 1, n + 1))
        M[..., np.arange(n + 1), np.arange(n + 1)] = 1.0
        M[..., :n, n] = g
        return M

    def Ad_pair(self, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Ad(T), Ad(T⁻¹)ᵀ), each ``(..., d, d)``."""
        if not self.matrix:
            eye = np.broadcast_to(np.eye(self.d), (*T.shape[:-1], self.d, self.d))
            return eye, eye
        if self.so3:
            return T, T
        if self.factors is not None:
            batch = T.shape[:-2]
            A1 = np.zeros((*batch, self.d, self.d))
            A2 = np.zeros((*batch, self.d, self.d))
            for k, f in enumerate(self.factors):
                blk = T[..., self.moff[k] : self.moff[k + 1], self.moff[k] : self.moff[k + 1]]
                if not f.matrix:
                    blk = blk[..., : f.d, f.d]
                a1, a2 = f.Ad_pair(blk)
                sl = slice(self.doff[k], self.doff[k + 1])
                A1[..., sl, sl] = a1
                A2[..., sl, sl] = a2
            return A1, A2
        A1 = np.asarray(self.group.Ad(T, check=False), dtype=float)
        A2 = np.swapaxes(np.asarray(self.group.Ad(self.group.inverse(T, check=False), check=False),
                                    dtype=float), -1, -2)
        return A1, A2

    def P(self, f: np.ndarray) -> np.ndarray:
        """Matrix of ζ ↦ ad(ζ)ᵀ f = ad*_ζ f, shape ``(..., d, d)``."""
        return np.einsum("kba,...b->...ak", self.ad_basis, f)

    # retraction ---------------------------------------------------------------------------
    def tau(self, xi: np.ndarray) -> np.ndarray:
        """τ(ξ) as an element of the group (products: the block-diagonal matrix)."""
        xi = np.asarray(xi, dtype=float)
        if not self.matrix:
            return xi.copy()
        if self.so3 and self.kind == "cayley":
            X = _hat3(xi)
            c = 4.0 / (4.0 + np.sum(xi * xi, axis=-1))[..., None, None]
            return np.eye(3) + c * (X + 0.5 * (X @ X))
        if self.factors is not None:
            out = np.zeros(xi.shape[:-1] + self.elem_shape)
            for k, f in enumerate(self.factors):
                blk = f.matrix_of(f.tau(xi[..., self.doff[k] : self.doff[k + 1]]))
                out[..., self.moff[k] : self.moff[k + 1], self.moff[k] : self.moff[k + 1]] = blk
            return out
        if self.kind == "cayley":
            if hasattr(self.group, "cay"):
                return np.asarray(self.group.cay(xi), dtype=float)
            X = self.group.hat(xi, check=False)
            return np.linalg.solve(self.ident - 0.5 * X, self.ident + 0.5 * X)
        return np.asarray(self.group.exp(xi), dtype=float)

    def dL_and_tensor(self, xi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(dL(ξ), T)`` with ``T[..., b, a, c] = ∂ dL(ξ)_{ba} / ∂ξ_c`` (exact)."""
        xi = np.asarray(xi, dtype=float)
        d = self.d
        batch = xi.shape[:-1]
        if not self.matrix:  # Rⁿ: τ is the identity, dL = I, T = 0
            return np.broadcast_to(np.eye(d), (*batch, d, d)), np.zeros((*batch, d, d, d))
        if self.so3 and self.kind == "cayley":
            q = 1.0 / (4.0 + np.sum(xi * xi, axis=-1))[..., None, None]
            M = 2.0 * np.eye(3) - _hat3(xi)
            D = 2.0 * q * M
            T = -4.0 * (q * q)[..., None] * M[..., :, :, None] * xi[..., None, None, :]
            T = T - 2.0 * q[..., None] * np.moveaxis(_E3, 0, -1)  # [b, a, c] = ê_c[b, a]
            return D, T
        if self.factors is not None:
            D = np.zeros((*batch, d, d))
            T = np.zeros((*batch, d, d, d))
            for k, f in enumerate(self.factors):
                sl = slice(self.doff[k], self.doff[k + 1])
                Df, Tf = f.dL_and_tensor(xi[..., sl])
                D[..., sl, sl] = Df
                T[..., sl, sl, sl] = Tf
            return D, T
        pref = "cay" if self.kind == "cayley" else "exp"
        if hasattr(self.group, pref + "_dL_deriv"):  # closed forms of chetaev.liegroups
            D = np.asarray(getattr(self.group, pref + "_dL")(xi), dtype=float)
            Jb = getattr(self.group, pref + "_dL_deriv")(np.expand_dims(xi, -2), np.eye(d))
            return D, np.moveaxis(np.asarray(Jb, dtype=float), -3, -2)  # (..., b, a, c)
        if self.kind == "cayley":
            X = self.group.hat(xi, check=False)
            Ainv = np.linalg.inv(self.ident - 0.5 * X)
            Binv = np.linalg.inv(self.ident + 0.5 * X)
            E = self.basis_hat
            BEA = np.einsum("...ij,ajk,...kl->...ail", Binv, E, Ainv)  # B⁻¹E_aA⁻¹
            D = np.swapaxes(self.group.vee(BEA, check=False), -1, -2)
            BE = np.einsum("...ij,cjk->...cik", Binv, E)  # B⁻¹E_c
            EA = np.einsum("cij,...jk->...cik", E, Ainv)  # E_cA⁻¹
            t1 = np.einsum("...cij,...ajk->...acik", BE, BEA)
            t2 = np.einsum("...aij,...cjk->...acik", BEA, EA)
            V = self.group.vee(0.5 * (t2 - t1), check=False)  # (..., a, c, b)
            return D, np.moveaxis(V, -1, -3)
        return _dexp_left(xi, self.ad_basis)


    def dtensor_contract(self, xi: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``S[..., c, e] = Σ_{a,b} ∂T[..., b, a, c]/∂ξ_e v_a p_b`` = ∂_ξ(J^L(ξ, v)ᵀ p).

        Closed form for SO(3) with Cayley (q = 1/(4+θ²), M = 2I − ξ̂, m = pᵀMv, w = v × p)::

            S = 16q³ m ξξᵀ + 4q² (ξ wᵀ + w ξᵀ) − 4q² m I

        zero on Rⁿ, factor by factor on products, otherwise central differences of the exact
        tensor in one broadcast call (this term only enters the Newton matrix).
        """
        xi = np.asarray(xi, dtype=float)
        d = self.d
        batch = np.broadcast_shapes(xi.shape[:-1], v.shape[:-1], p.shape[:-1])
        if not self.matrix:
            return np.zeros((*batch, d, d))
        if self.so3 and self.kind == "cayley":
            q = 1.0 / (4.0 + np.sum(xi * xi, axis=-1))
            M = 2.0 * np.eye(3) - _hat3(xi)
            m = np.einsum("...b,...ba,...a->...", p, M, v)
            w = np.cross(v, p)
            xx = xi[..., :, None] * xi[..., None, :]
            S = (16.0 * q**3 * m)[..., None, None] * xx
            S = S + (4.0 * q * q)[..., None, None] * (
                xi[..., :, None] * w[..., None, :] + w[..., :, None] * xi[..., None, :]
            )
            return S - (4.0 * q * q * m)[..., None, None] * np.eye(3)
        if self.factors is not None:
            out = np.zeros((*batch, d, d))
            for k, f in enumerate(self.factors):
                sl = slice(self.doff[k], self.doff[k + 1])
                out[..., sl, sl] = f.dtensor_contract(xi[..., sl], v[..., sl], p[..., sl])
            return out
        eps = 2e-6
        E = eps * np.concatenate([np.eye(d), -np.eye(d)])
        T = self.dL_and_tensor(xi[..., None, :] + E)[1]  # (..., 2d, b, a, c)
        vals = np.einsum("...kbac,...a,...b->...kc", T, v, p)
        der = (vals[..., :d, :] - vals[..., d:, :]) / (2 * eps)  # (..., e, c)
        return np.swapaxes(der, -1, -2)


def _dexp_left(xi: np.ndarray, ad_basis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """dL for τ = exp and its derivative tensor, via one batched block ``expm``.

    dL(ξ) = φ₁(Z), Z = −ad_ξ, is the (1, 2) block of expm([[Z, I], [0, 0]]). For the derivative
    in direction e_c (dZ = −ad(e_c)) Van Loan's identity gives the Fréchet derivative as the
    (1, 2) block of the upper-right quadrant of expm([[B, E_c], [0, B]]) with B the block matrix
    above and E_c = [[−ad(e_c), 0], [0, 0]].
    """
    from scipy.linalg import expm

    d = ad_basis.shape[-1]
    Z = -np.einsum("...c,cij->...ij", xi, ad_basis)
    batch = Z.shape[:-2]
    B = np.zeros((*batch, 2 * d, 2 * d))
    B[..., :d, :d] = Z
    B[..., :d, d:] = np.eye(d)
    big = np.zeros((*batch, d, 4 * d, 4 * d))
    big[..., :, : 2 * d, : 2 * d] = B[..., None, :, :]
    big[..., :, 2 * d :, 2 * d :] = B[..., None, :, :]
    big[..., :, :d, 2 * d : 3 * d] = -ad_basis
    F = expm(big)
    D = F[..., 0, :d, d : 2 * d]
    T = F[..., :, :d, 3 * d :]  # (..., c, b, a)
    return D, np.moveaxis(T, -3, -1)
