"""Retractions tau: g -> G (exp and Cayley) with their trivialized tangents and derivatives.

Conventions (DESIGN.md; spec high-order-nonholonomic §3.1, homogeneous-spaces-rkmk §2):

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

import numpy as np

from ._base import MatrixLieGroup
from ._errors import LieGroupError

__all__ = ["Retraction", "retraction"]

_KINDS = {"exp": "exp", "cayley": "cay", "cay": "cay"}


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.einsum("...ij,...j->...i", A, x)


def _contract(J: np.ndarray, mu) -> np.ndarray:
    if mu is None:
        return J
    return np.einsum("...ij,...i->...j", J, np.asarray(mu, dtype=np.float64))


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
        self._p = _KINDS[kind]
        g, p = group, self._p
        self._tau = getattr(g, p)
        self._tau_inv = getattr(g, "log" if p == "exp" else "cay_inv")
        self._dL = getattr(g, p + "_dL")
        self._dL_inv = getattr(g, p + "_dL_inv")
        self._dL_deriv = getattr(g, p + "_dL_deriv")
        self._dL_inv_deriv = getattr(g, p + "_dL_inv_deriv")
        self._dL_hess = getattr(g, p + "_dL_hess")

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

    # ------------------------------------------------------------------ Maps.
    def __call__(self, xi) -> np.ndarray:
        """``tau(xi)``: ``(..., dim)`` -> elements ``(..., *group.shape)``."""
        return self._tau(xi)

    def inv(self, g, check: bool = True) -> np.ndarray:
        """``tau^{-1}(g)``: elements -> ``(..., dim)``; validates membership unless
        ``check=False``."""
        return self._tau_inv(g, check=check)

    # ------------------------------------------------------------------ Trivialized tangents.
    def dL(self, xi) -> np.ndarray:
        """``(..., d, d)``: d/deps tau(xi + eps delta)|_0 = tau(xi) hat(dL(xi) delta)."""
        return self._dL(xi)

    def dR(self, xi) -> np.ndarray:
        """``(..., d, d)``: d/deps tau(xi + eps delta)|_0 = hat(dR(xi) delta) tau(xi); = dL(-xi)."""
        return self._dL(-self.group.check_algebra(xi, where=f"{self!r}.dR"))

    def dL_inv(self, xi) -> np.ndarray:
        """``(..., d, d)`` inverse of :meth:`dL`."""
        return self._dL_inv(xi)

    def dR_inv(self, xi) -> np.ndarray:
        """``(..., d, d)`` inverse of :meth:`dR`; = dL_inv(-xi)."""
        return self._dL_inv(-self.group.check_algebra(xi, where=f"{self!r}.dR_inv"))

    # ------------------------------------------------------------------ Derivative terms.
    def dL_deriv(self, xi, eta, mu=None) -> np.ndarray:
        """Jacobian ``J`` ``(..., d, d)`` with ``J delta = d/deps [dL(xi + eps delta) eta]``;
        with ``mu`` given, the ``(..., d)`` vector ``J^T mu`` (= grad_xi <mu, dL(xi) eta>)."""
        return _contract(self._dL_deriv(xi, eta), mu)

    def dR_deriv(self, xi, eta, mu=None) -> np.ndarray:
        """As :meth:`dL_deriv` for dR: ``d/deps [dR(xi + eps delta) eta]``;
        equals ``-dL_deriv(-xi, eta)``."""
        xi = self.group.check_algebra(xi, where=f"{self!r}.dR_deriv")
        return _contract(-self._dL_deriv(-xi, eta), mu)

    def dL_inv_deriv(self, xi, eta, mu=None) -> np.ndarray:
        """As :meth:`dL_deriv` for dL_inv: ``J delta = d/deps [dL_inv(xi + eps delta) eta]``."""
        return _contract(self._dL_inv_deriv(xi, eta), mu)

    def dR_inv_deriv(self, xi, eta, mu=None) -> np.ndarray:
        """As :meth:`dL_deriv` for dR_inv: ``-dL_inv_deriv(-xi, eta)``."""
        xi = self.group.check_algebra(xi, where=f"{self!r}.dR_inv_deriv")
        return _contract(-self._dL_inv_deriv(-xi, eta), mu)

    # ------------------------------------------------------------------ Second derivatives.
    def dL_hess(self, xi, eta, u) -> np.ndarray:
        """``(..., d, d)`` matrix ``H`` with ``H delta = d/deps [dL_deriv(xi + eps delta, eta) u]``,
        the second derivative of ``xi -> dL(xi) eta`` in the directions u and delta (symmetric in
        them).  For Newton Jacobians of residuals containing ``dL_deriv``.  Closed forms except
        SE(3) exp (fourth-order differences of the closed-form first derivative, ~1e-12)."""
        return self._dL_hess(xi, eta, u)

    def dR_hess(self, xi, eta, u) -> np.ndarray:
        """As :meth:`dL_hess` for dR; equals ``dL_hess(-xi, eta, u)``."""
        xi = self.group.check_algebra(xi, where=f"{self!r}.dR_hess")
        return self._dL_hess(-xi, eta, u)

    def dL_inv_hess(self, xi, eta, u) -> np.ndarray:
        """As :meth:`dL_hess` for dL_inv:
        ``H delta = d/deps [dL_inv_deriv(xi + eps delta, eta) u]``.

        With D = dL, J(xi, y) = dL_deriv(xi, y), w = D^{-1} eta and K(xi, u) y = J(xi, y) u:
        ``H = D^{-1} [J(xi, D^{-1} J(xi, w) u) - dL_hess(xi, w, u)
        - K(xi, u) dL_inv_deriv(xi, eta)]``
        (exact, from d(D^{-1}) = -D^{-1} dD D^{-1})."""
        G = self.group
        where = f"{self!r}.dL_inv_hess"
        xi = G.check_algebra(xi, where=where)
        eta = G.check_algebra(eta, "eta", where)
        u = G.check_algebra(u, "u", where)
        xi, eta, u = np.broadcast_arrays(xi, eta, u)
        Di = self._dL_inv(xi)
        w = _mv(Di, eta)
        y = _mv(Di, _mv(self._dL_deriv(xi, w), u))
        Jk = self._dL_deriv(xi[..., None, :], np.eye(G.dim))  # (..., a, i, c): J(xi, e_a)
        K = np.swapaxes(np.einsum("...aic,...c->...ai", Jk, u), -1, -2)  # (..., i, a)
        inner = self._dL_deriv(xi, y) - self._dL_hess(xi, w, u) - K @ self._dL_inv_deriv(xi, eta)
        return Di @ inner

    def dR_inv_hess(self, xi, eta, u) -> np.ndarray:
        """As :meth:`dL_inv_hess` for dR_inv; equals ``dL_inv_hess(-xi, eta, u)``."""
        xi = self.group.check_algebra(xi, where=f"{self!r}.dR_inv_hess")
        return self.dL_inv_hess(-xi, eta, u)

    def ddL(self, xi, eta) -> np.ndarray:
        """The paper's second tangent dd^L tau_xi(eta, .) as a ``(..., d, d)`` matrix:
        ``d/deps [dL(xi + eps delta) eta] = dL(xi) ddL(xi, eta) delta``
        (high-order-nonholonomic §2.8); = dL_inv(xi) @ dL_deriv(xi, eta)."""
        return np.einsum("...ij,...jk->...ik", self._dL_inv(xi), self._dL_deriv(xi, eta))

    def ddL_star(self, xi, eta, pi) -> np.ndarray:
        """Dual ``(dd^L tau_xi)^*(eta, pi) = ddL(xi, eta)^T pi``, shape ``(..., d)``
        (high-order-nonholonomic §2.8, eq. (26))."""
        return _contract(self.ddL(xi, eta), pi)


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
    if kind not in _KINDS:
        raise LieGroupError(
            f"retraction: unknown kind {kind!r}; expected 'exp' or 'cayley'."
        )
    return Retraction(group, kind)
