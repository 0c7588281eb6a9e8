"""Retractions tau: g -> G (exp and Cayley) with their trivialized tangents and derivatives.

Conventions (high-order paper §6.1; homogeneous-spaces paper §2):

    d/deps tau(xi + eps delta)|_0 = tau(xi) hat(dL(xi) delta) = hat(dR(xi) delta) tau(xi),

    dR(xi) = Ad(tau(xi)) dL(xi) = dL(-xi),     dR_inv(xi) = dL_inv(-xi)

(both retractions satisfy tau(-xi) = tau(xi)^{-1}).  Cayley is the papers' convention
cay(xi) = (I - hat(xi)/2)^{-1} (I + hat(xi)/2).

Derivative terms.  For ``D`` one of dL, dR, dL_inv, dR_inv the method ``D_deriv(xi, eta)``
returns the ``(..., d, d)`` Jacobian

    D_deriv(xi, eta) @ delta = d/deps [D(xi + eps delta) eta]|_0

(J^L(xi, eta) of homogeneous-spaces-rkmk §2).  With a covector ``mu``, ``D_deriv(xi, eta, mu)``
returns the ``(..., d)`` vector ``D_deriv(xi, eta)^T mu``, i.e. the gradient in xi of
``<mu, D(xi) eta>``.  The "second left-trivialized tangent" of high-order-nonholonomic §2.8,
defined by ``d/deps [dL(xi + eps delta) eta] = dL(xi) ddL(xi)(eta, delta)``, is
``ddL(xi, eta) = dL_inv(xi) @ dL_deriv(xi, eta)``, and its dual is
``ddL_star(xi, eta, pi) = ddL(xi, eta)^T pi``
(<(dd^L tau)^*(eta, Pi), delta> = <Pi, dd^L tau(eta, delta)>).
"""

from __future__ import annotations

import types

import numpy as np

from ._base import MatrixLieGroup
from ._errors import LieGroupError
from ._validation import broadcast_batch

__all__ = ["Retraction", "retraction"]

_KINDS = {"exp": "exp", "cayley": "cay", "cay": "cay"}


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.einsum("...ij,...j->...i", A, x)


class Retraction:
    """A retraction ``tau`` on a group; build with :func:`retraction`.

    Attributes
    ----------
    group : MatrixLieGroup
    kind : {"exp", "cayley"}
    """

    def __init__(self, group: MatrixLieGroup, kind: str):
        self.group = group
        self.kind = "exp" if _KINDS[kind] == "exp" else "cayley"
        self._p = p = _KINDS[kind]
        # (kernel, checked) per role, looked up once (``_base.py``, "internal fast path"): the
        # public methods below validate their arguments once and call the unchecked kernels;
        # for a group without kernels they call its public (self-validating) methods.
        names = {
            "tau": p, "tau_inv": "log" if p == "exp" else "cay_inv", "dL": p + "_dL",
            "dL_inv": p + "_dL_inv", "dL_deriv": p + "_dL_deriv",
            "dL_inv_deriv": p + "_dL_inv_deriv", "dL_hess": p + "_dL_hess",
        }
        self._where = {role: f"{group.name}.{name}" for role, name in names.items()}
        k = {role: group._kernel(name) for role, name in names.items()}
        self._tau, self._tau_inv = k["tau"], k["tau_inv"]
        self._dL, self._dL_inv = k["dL"], k["dL_inv"]
        self._dL_deriv, self._dL_inv_deriv = k["dL_deriv"], k["dL_inv_deriv"]
        self._dL_hess = k["dL_hess"]
        # Full derivative tensors (closed forms where the group has them, e.g. SO(3) with
        # Cayley; products factor by factor; otherwise from dL_deriv / dL_hess).
        self._dL_tensor_g = getattr(group, f"_k_{p}_dL_tensor", None)
        self._dL_deriv_T_deriv_g = getattr(group, f"_k_{p}_dL_deriv_T_deriv", None)
        factors = getattr(group, "factors", None)
        self._factors = (
            None if factors is None
            else [(retraction(f, self.kind), sl) for f, sl in zip(factors, group._dsl)
                  if not f._flat]  # flat factors (R^n): zero derivative blocks, skipped
        )
        self._eye = np.eye(group.dim)

    def __repr__(self) -> str:
        return f"retraction({self.group.name}, {self.kind!r})"

    def __eq__(self, other):
        return (
            isinstance(other, Retraction) and other.group == self.group and other.kind == self.kind
        )

    def __hash__(self):
        return hash((self.group, self.kind))

    @property
    def dim(self) -> int:
        return self.group.dim

    @property
    def kernels(self) -> types.SimpleNamespace:
        """Unchecked maps for hot loops (a Newton iteration holding validated float64 arrays).

        Attributes ``tau``, ``dL``, ``dL_tensor``, ``dL_deriv_T_deriv`` (the maps of this
        retraction, same arguments and results as the methods of the same names) and the
        group's ``compose``, ``inverse``, ``Ad``, ``Ad_pair``.  They skip every check (shapes,
        dtypes, finiteness, broadcasting of batch axes is numpy's), may return views of their
        input (``Ad`` and ``Ad_pair`` of SO(3) return their argument), and are only for arrays
        already validated by a public method.  Use the public methods everywhere else.
        """
        k = self.__dict__.get("_kernels_ns")
        if k is None:
            G = self.group
            k = types.SimpleNamespace(
                tau=self._tau[0], dL=self._dL[0], dL_tensor=self._dL_tensor_k,
                dL_deriv_T_deriv=self._dL_deriv_T_deriv_k, compose=G._kernel("compose")[0],
                inverse=G._kernel("inverse")[0], Ad=G._kernel("Ad")[0],
                Ad_pair=G._kernel("Ad_pair")[0],
            )
            self.__dict__["_kernels_ns"] = k
        return k

    # ------------------------------------------------------------------ Validation (once).
    # Shapes and dtypes are checked on every call; finiteness unless ``check=False`` (the opt-out
    # of hot loops: a Newton iteration that already holds validated float64 arrays).
    def _a(self, x, name: str, role: str, check: bool = True) -> np.ndarray:
        return self.group.check_algebra(x, name, self._where[role], check)

    def _batch(self, where, **arrays):
        if len({a.shape[:-1] for a in arrays.values()}) > 1:
            broadcast_batch(where, **{nm: (a, 1) for nm, a in arrays.items()})

    def _run1(self, k, xi, role, check):
        fn, checked = k
        return fn(xi) if checked else fn(self._a(xi, "xi", role, check))

    def _run2(self, k, xi, eta, role, check):
        fn = k[0]
        xi, eta = self._a(xi, "xi", role, check), self._a(eta, "eta", role, check)
        if xi.shape[:-1] != eta.shape[:-1]:
            self._batch(self._where[role], xi=xi, eta=eta)
        return fn(xi, eta)

    def _run3(self, k, xi, eta, u, role, check):
        fn = k[0]
        xi, eta = self._a(xi, "xi", role, check), self._a(eta, "eta", role, check)
        u = self._a(u, "u", role, check)
        self._batch(self._where[role], xi=xi, eta=eta, u=u)
        return fn(xi, eta, u)

    def _neg(self, xi, method: str, check: bool = True) -> np.ndarray:
        return -self.group.check_algebra(xi, "xi", f"{self!r}.{method}", check)

    def _contract(self, J: np.ndarray, mu, method: str, check: bool,
                  name: str = "mu") -> np.ndarray:
        if mu is None:
            return J
        where = f"{self!r}.{method}"
        mu = self.group.check_algebra(mu, name, where, check)
        if mu.shape[:-1] != J.shape[:-2]:
            broadcast_batch(where, **{"result": (J, 2), name: (mu, 1)})
        return np.einsum("...ij,...i->...j", J, mu)

    # ------------------------------------------------------------------ Maps.
    def __call__(self, xi, check: bool = True) -> np.ndarray:
        """``tau(xi)``: ``(..., dim)`` -> elements ``(..., *group.shape)``.  Every method of a
        retraction checks shapes and dtypes; with ``check=False`` it skips the finiteness test
        (for hot loops that already hold validated float64 arrays)."""
        return self._run1(self._tau, xi, "tau", check)

    def inv(self, g, check: bool = True) -> np.ndarray:
        """``tau^{-1}(g)``: elements -> ``(..., dim)``; validates finiteness and membership
        unless ``check=False``."""
        fn, checked = self._tau_inv
        if checked:
            return fn(g, check=check)
        where = self._where["tau_inv"]
        g = self.group.check_member(g, "g", where, check)
        return fn(g)

    # ------------------------------------------------------------------ Trivialized tangents.
    def dL(self, xi, check: bool = True) -> np.ndarray:
        """``(..., d, d)``: d/deps tau(xi + eps delta)|_0 = tau(xi) hat(dL(xi) delta)."""
        return self._run1(self._dL, xi, "dL", check)

    def dR(self, xi, check: bool = True) -> np.ndarray:
        """``(..., d, d)``: d/deps tau(xi + eps delta)|_0 = hat(dR(xi) delta) tau(xi); = dL(-xi)."""
        return self._dL[0](self._neg(xi, "dR", check))

    def dL_inv(self, xi, check: bool = True) -> np.ndarray:
        """``(..., d, d)`` inverse of :meth:`dL`.

        Domain (exp): ``dL`` is singular where ``|omega| = 2 pi k``, k >= 1, for the rotation part
        ``omega`` (SO(3), SE(2), SE(3); nowhere for Cayley, SO(2), R^n).  For ``|omega| < 2 pi``
        the result is accurate to a few ulps relative to the size of its entries (SO(3): the
        entries along ``omega`` stay exact, e.g. ``[2, 2] = 1`` at ``omega = (0, 0, 2pi - 1e-9)``;
        the others grow like ``2 pi / (2 pi - |omega|)``, the true conditioning).  Beyond
        ``2 pi`` the closed form is evaluated as is (finite, but ``exp`` is no longer injective
        there: use ``log`` to bring ``omega`` back into ``|omega| <= pi``)."""
        return self._run1(self._dL_inv, xi, "dL_inv", check)

    def dR_inv(self, xi, check: bool = True) -> np.ndarray:
        """``(..., d, d)`` inverse of :meth:`dR`; = dL_inv(-xi) (same domain)."""
        return self._dL_inv[0](self._neg(xi, "dR_inv", check))

    # ------------------------------------------------------------------ Derivative terms.
    def dL_deriv(self, xi, eta, mu=None, check: bool = True) -> np.ndarray:
        """Jacobian ``J`` ``(..., d, d)`` with ``J delta = d/deps [dL(xi + eps delta) eta]``;
        with ``mu`` given, the ``(..., d)`` vector ``J^T mu`` (= grad_xi <mu, dL(xi) eta>)."""
        return self._contract(self._run2(self._dL_deriv, xi, eta, "dL_deriv", check), mu,
                              "dL_deriv", check)

    def dR_deriv(self, xi, eta, mu=None, check: bool = True) -> np.ndarray:
        """As :meth:`dL_deriv` for dR: ``d/deps [dR(xi + eps delta) eta]``;
        equals ``-dL_deriv(-xi, eta)``."""
        return self._contract(-self._run2(self._dL_deriv, self._neg(xi, "dR_deriv", check), eta,
                                          "dL_deriv", check), mu, "dR_deriv", check)

    def dL_inv_deriv(self, xi, eta, mu=None, check: bool = True) -> np.ndarray:
        """As :meth:`dL_deriv` for dL_inv: ``J delta = d/deps [dL_inv(xi + eps delta) eta]``."""
        return self._contract(self._run2(self._dL_inv_deriv, xi, eta, "dL_inv_deriv", check), mu,
                              "dL_inv_deriv", check)

    def dR_inv_deriv(self, xi, eta, mu=None, check: bool = True) -> np.ndarray:
        """As :meth:`dL_deriv` for dR_inv: ``-dL_inv_deriv(-xi, eta)``."""
        return self._contract(-self._run2(self._dL_inv_deriv, self._neg(xi, "dR_inv_deriv", check),
                                          eta, "dL_inv_deriv", check), mu, "dR_inv_deriv", check)

    def dL_tensor(self, xi, check: bool = True) -> np.ndarray:
        """``(..., d, d, d)`` tensor ``T`` of the first derivative of dL:
        ``T[..., b, a, c] = d dL(xi)_{ba} / d xi_c``, so that contracting ``a`` with eta gives
        :meth:`dL_deriv` ``(xi, eta)`` and contracting ``b`` with mu the Jacobian of
        ``dL(xi)^T mu`` (J^L(xi, .) of homogeneous-spaces-rkmk §2, for all eta at once).
        Closed form for SO(3) with Cayley (products factor by factor); otherwise
        ``dL_deriv`` at the unit vectors in one call."""
        return self._dL_tensor_k(self._a(xi, "xi", "dL_deriv", check))

    def _dL_tensor_k(self, xi) -> np.ndarray:
        """Kernel of :meth:`dL_tensor` (validated float64 input)."""
        if self._dL_tensor_g is not None:
            return self._dL_tensor_g(xi)
        d = self.group.dim
        if self._factors is not None:
            out = np.zeros((*xi.shape[:-1], d, d, d))
            for R, sl in self._factors:
                out[..., sl, sl, sl] = R._dL_tensor_k(xi[..., sl])
            return out
        J = self._dL_deriv[0](np.expand_dims(xi, -2), self._eye)  # (..., a, b, c)
        return np.moveaxis(J, -3, -2)

    def dL_deriv_T_deriv(self, xi, eta, mu, check: bool = True) -> np.ndarray:
        """``(..., d, d)`` matrix ``S`` with
        ``S delta = d/deps [dL_deriv(xi + eps delta, eta)^T mu]|_0``: the Jacobian in xi of
        ``dL_deriv(xi, eta, mu)`` (for Newton Jacobians of residuals containing
        ``J^L(xi, eta)^T mu``, e.g. the Lie-group RKMK/PRK steps).  Closed form for SO(3) with
        Cayley (products factor by factor); otherwise :meth:`dL_hess` at the unit vectors,
        contracted with mu (exact)."""
        where = f"{self!r}.dL_deriv_T_deriv"
        G = self.group
        xi = G.check_algebra(xi, "xi", where, check)
        eta = G.check_algebra(eta, "eta", where, check)
        mu = G.check_algebra(mu, "mu", where, check)
        self._batch(where, xi=xi, eta=eta, mu=mu)
        return self._dL_deriv_T_deriv_k(xi, eta, mu)

    def _dL_deriv_T_deriv_k(self, xi, eta, mu) -> np.ndarray:
        """Kernel of :meth:`dL_deriv_T_deriv` (validated float64 inputs)."""
        if self._dL_deriv_T_deriv_g is not None:
            return self._dL_deriv_T_deriv_g(xi, eta, mu)
        d = self.group.dim
        if self._factors is not None:
            batch = np.broadcast_shapes(xi.shape[:-1], eta.shape[:-1], mu.shape[:-1])
            out = np.zeros((*batch, d, d))
            for R, sl in self._factors:
                out[..., sl, sl] = R._dL_deriv_T_deriv_k(xi[..., sl], eta[..., sl], mu[..., sl])
            return out
        H = self._dL_hess[0](np.expand_dims(xi, -2), np.expand_dims(eta, -2), self._eye)
        return np.einsum("...cbe,...b->...ce", H, mu)  # H[c] = dL_hess(xi, eta, e_c)

    # ------------------------------------------------------------------ Second derivatives.
    def dL_hess(self, xi, eta, u, check: bool = True) -> np.ndarray:
        """``(..., d, d)`` matrix ``H`` with ``H delta = d/deps [dL_deriv(xi + eps delta, eta) u]``,
        the second derivative of ``xi -> dL(xi) eta`` in the directions u and delta (symmetric in
        them).  For Newton Jacobians of residuals containing ``dL_deriv``.  Closed forms."""
        return self._run3(self._dL_hess, xi, eta, u, "dL_hess", check)

    def dR_hess(self, xi, eta, u, check: bool = True) -> np.ndarray:
        """As :meth:`dL_hess` for dR; equals ``dL_hess(-xi, eta, u)``."""
        return self._run3(self._dL_hess, self._neg(xi, "dR_hess", check), eta, u, "dL_hess",
                          check)

    def dL_inv_hess(self, xi, eta, u, check: bool = True) -> np.ndarray:
        """As :meth:`dL_hess` for dL_inv:
        ``H delta = d/deps [dL_inv_deriv(xi + eps delta, eta) u]``.

        With D = dL, J(xi, y) = dL_deriv(xi, y), w = D^{-1} eta and K(xi, u) y = J(xi, y) u:
        ``H = D^{-1} [J(xi, D^{-1} J(xi, w) u) - dL_hess(xi, w, u)
        - K(xi, u) dL_inv_deriv(xi, eta)]``
        (exact, from d(D^{-1}) = -D^{-1} dD D^{-1})."""
        G = self.group
        where = f"{self!r}.dL_inv_hess"
        xi = G.check_algebra(xi, "xi", where, check)
        eta = G.check_algebra(eta, "eta", where, check)
        u = G.check_algebra(u, "u", where, check)
        self._batch(where, xi=xi, eta=eta, u=u)
        return self._dL_inv_hess_k(xi, eta, u)

    def _dL_inv_hess_k(self, xi, eta, u) -> np.ndarray:
        """Kernel of :meth:`dL_inv_hess` (validated float64 inputs)."""
        d = self.group.dim
        xi, eta, u = np.broadcast_arrays(xi, eta, u)
        dL_inv, dL_deriv = self._dL_inv[0], self._dL_deriv[0]
        Di = dL_inv(xi)
        w = _mv(Di, eta)
        y = _mv(Di, _mv(dL_deriv(xi, w), u))
        Jk = dL_deriv(xi[..., None, :], np.eye(d))  # (..., a, i, c): J(xi, e_a)
        K = np.swapaxes(np.einsum("...aic,...c->...ai", Jk, u), -1, -2)  # (..., i, a)
        inner = dL_deriv(xi, y) - self._dL_hess[0](xi, w, u) - K @ self._dL_inv_deriv[0](xi, eta)
        return Di @ inner

    def dR_inv_hess(self, xi, eta, u, check: bool = True) -> np.ndarray:
        """As :meth:`dL_inv_hess` for dR_inv; equals ``dL_inv_hess(-xi, eta, u)``."""
        return self.dL_inv_hess(self._neg(xi, "dR_inv_hess", check), eta, u, check)

    def ddL(self, xi, eta, check: bool = True) -> np.ndarray:
        """The paper's second tangent dd^L tau_xi(eta, .) as a ``(..., d, d)`` matrix:
        ``d/deps [dL(xi + eps delta) eta] = dL(xi) ddL(xi, eta) delta``
        (high-order-nonholonomic §2.8); = dL_inv(xi) @ dL_deriv(xi, eta)."""
        where = f"{self!r}.ddL"
        xi = self.group.check_algebra(xi, "xi", where, check)
        eta = self.group.check_algebra(eta, "eta", where, check)
        self._batch(where, xi=xi, eta=eta)
        return np.einsum("...ij,...jk->...ik", self._dL_inv[0](xi), self._dL_deriv[0](xi, eta))

    def ddL_star(self, xi, eta, pi, check: bool = True) -> np.ndarray:
        """Dual ``(dd^L tau_xi)^*(eta, pi) = ddL(xi, eta)^T pi``, shape ``(..., d)``
        (high-order-nonholonomic §2.8, eq. (26))."""
        return self._contract(self.ddL(xi, eta, check), pi, "ddL_star", check, "pi")


_CACHE: dict = {}


def retraction(group: MatrixLieGroup, kind: str = "cayley") -> Retraction:
    """The retraction ``kind`` ("exp" or "cayley"; "cay" is accepted) on ``group``.

    Examples
    --------
    >>> import numpy as np
    >>> from chetaev.liegroups import SO3, retraction
    >>> cay = retraction(SO3, "cayley")
    >>> xi = np.array([0.3, -0.2, 0.5])
    >>> bool(np.allclose(cay.inv(cay(xi)), xi))
    True
    """
    if not isinstance(group, MatrixLieGroup):
        raise LieGroupError(
            "retraction: expected a group object such as SO3 or Product(SO3, Rn(2)), "
            f"got {group!r}."
        )
    if not isinstance(kind, str) or kind not in _KINDS:
        raise LieGroupError(
            f"retraction: unknown kind {kind!r}; expected 'exp' or 'cayley'."
        )
    key = (group, _KINDS[kind])
    tau = _CACHE.get(key)
    if tau is None or tau.group is not group:  # one object per group and kind (immutable)
        tau = _CACHE[key] = Retraction(group, kind)
    return tau
