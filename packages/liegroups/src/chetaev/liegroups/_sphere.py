"""The sphere S^2 as the homogeneous space SO(3)/SO(2) (homogeneous-spaces paper §2, §4).

* action sigma(g, x) = g x, origin x0 (default the north pole e3), projection pi(g) = g x0;
* isotropy H = rotations about x0, h = span{x0}; with B the Euclidean inner product,
  m = {eta : eta . x0 = 0} and so(3) = m (+) h;
* infinitesimal action  D_1 sigma_(e, x)(eta) = eta x x;  left-trivialized lift
  (Prop. 2.2): if g' = g hat(eta) then x' = g (eta x x0);
* reduced constraint phi(eta) = C eta with C = x0^T (the rows of :meth:`constraint_matrix`);
* left-trivialized gradient of U(g x0):  N_0 = x0 x (g^T grad U(g x0)).
"""

from __future__ import annotations

import types

import numpy as np

from ._errors import LieGroupError
from ._numerics import hat3
from ._so3 import SO3, _rot_from_coeffs
from ._validation import (
    as_array,
    broadcast_batch,
    input_eps,
    membership_tol,
    predicate_array,
)

__all__ = ["S2", "Sphere2"]


class Sphere2:
    """S^2 = SO(3)/SO(2) with origin ``x0`` (unit 3-vector)."""

    group = SO3
    dim = 2
    ambient_dim = 3

    def __init__(self, x0=(0.0, 0.0, 1.0)):
        x0 = as_array(x0, (3,), "x0", "Sphere2")
        if x0.ndim != 1 or abs(np.linalg.norm(x0) - 1.0) > 1e-12:
            raise LieGroupError(f"Sphere2: expected a unit 3-vector x0, got {x0!r}.")
        self.x0 = x0.copy()
        self.x0.setflags(write=False)
        self.name = "S2"

    def __repr__(self) -> str:
        return f"Sphere2(x0={self.x0.tolist()})"

    # Points.  Input policy (``_validation.py``): shapes and dtypes always; finiteness, membership
    # of g in SO(3), |x| = 1 and tangency unless ``check=False``.
    def check_point(self, x, name: str = "x", where: str = "S2", tol: float | None = None,
                    check: bool = True) -> np.ndarray:
        """Validate points ``(..., 3)``; with ``check`` also finiteness and ``|x| = 1`` within
        ``tol`` (default ``3 sqrt(eps)`` of the input's dtype, see ``membership_tol``)."""
        arr = as_array(x, (3,), name, where, check)
        if check:
            tol = membership_tol(input_eps(x), 3) if tol is None else tol
            err = np.abs(np.sqrt(np.einsum("...i,...i->...", arr, arr)) - 1.0)
            if np.any(err > tol):
                raise LieGroupError(
                    f"{where}: expected unit vectors `{name}` on S^2 (|x| = 1 within {tol:.0e}); "
                    f"got |x| - 1 up to {float(err.max()):.1e}. Normalize the input "
                    f"(x / |x|), or pass check=False."
                )
        return arr

    def _g(self, g, where, check):
        return SO3.check_member(g, "g", where, check)

    @staticmethod
    def _batch(where, **items):
        if len({a.shape[: a.ndim - k] for a, k in items.values()}) > 1:
            broadcast_batch(where, **items)

    def is_point(self, x, tol: float = 1e-10):
        """Boolean (batch shape): ``|x| = 1`` within ``tol``."""
        x = predicate_array(x)
        if x is None or x.ndim < 1 or x.shape[-1] != 3:
            return np.False_
        with np.errstate(invalid="ignore"):
            ok = np.abs(np.linalg.norm(x, axis=-1) - 1.0) <= tol
        return ok[()] if ok.ndim == 0 else ok

    def random(self, rng, size=()) -> np.ndarray:
        """Uniform random points ``(*size, 3)``."""
        size = (size,) if np.isscalar(size) else tuple(size)
        x = rng.normal(size=(*size, 3))
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    # Action, projection, section.
    def action(self, g, x, check: bool = True) -> np.ndarray:
        """``sigma(g, x) = g x``, shape ``(..., 3)``; g in SO(3), x on S^2."""
        g = self._g(g, "S2.action", check)
        x = self.check_point(x, "x", "S2.action", check=check)
        self._batch("S2.action", g=(g, 2), x=(x, 1))
        return np.einsum("...ij,...j->...i", g, x)

    def project(self, g, check: bool = True) -> np.ndarray:
        """``pi(g) = g x0``, shape ``(..., 3)``; g in SO(3)."""
        return self.kernels.project(self._g(g, "S2.project", check))

    def section(self, x, check: bool = True) -> np.ndarray:
        """A rotation ``R`` with ``R x0 = x`` (right inverse of :meth:`project`), ``(..., 3, 3)``.

        For ``x . x0 >= -1/2`` this is the smallest rotation taking x0 to x (smooth there);
        otherwise the smallest rotation taking -x0 to x composed with a half turn about an axis
        orthogonal to x0 (no continuous global section exists).
        """
        x = self.check_point(x, "x", "S2.section", check=check)
        flip = np.einsum("...i,i->...", x, self.x0) < -0.5
        axis = np.cross(self.x0, np.eye(3)[np.argmin(np.abs(self.x0))])
        axis /= np.linalg.norm(axis)
        F = 2.0 * np.outer(axis, axis) - np.eye(3)  # half turn about `axis`: F x0 = -x0
        src = np.where(flip[..., None], -self.x0, self.x0)
        v = np.cross(src, x)
        c = np.einsum("...i,...i->...", src, x)
        # R = c I + hat(v) + v v^T / (1 + c)   (Rodrigues for the minimal rotation src -> x)
        R = _rot_from_coeffs(v, c, 1.0, 1.0 / (1.0 + c))
        return np.where(flip[..., None, None], R @ F, R)

    # Infinitesimal structure.
    def inf_action(self, xi, x, check: bool = True) -> np.ndarray:
        """Infinitesimal generator ``xi_M(x) = D_1 sigma_(e,x)(xi) = xi x x``, ``(..., 3)``;
        x on S^2."""
        xi = as_array(xi, (3,), "xi", "S2.inf_action", check)
        x = self.check_point(x, "x", "S2.inf_action", check=check)
        self._batch("S2.inf_action", xi=(xi, 1), x=(x, 1))
        return np.cross(xi, x)

    def velocity(self, g, eta, check: bool = True) -> np.ndarray:
        """Velocity of x = g x0 along g' = g hat(eta): ``g (eta x x0)`` (Prop. 2.2), (..., 3);
        g in SO(3)."""
        g = self._g(g, "S2.velocity", check)
        eta = as_array(eta, (3,), "eta", "S2.velocity", check)
        self._batch("S2.velocity", g=(g, 2), eta=(eta, 1))
        return np.einsum("...ij,...j->...i", g, np.cross(eta, self.x0))

    def lift(self, g, v, check: bool = True) -> np.ndarray:
        """The unique eta in m with ``velocity(g, eta) = v`` for v tangent at g x0:
        ``eta = x0 x (g^T v)``, shape ``(..., 3)``.  With ``check`` g must be in SO(3) and v
        tangent: ``|v . (g x0)| <= 3 sqrt(eps) |v|`` (the normal part would be dropped)."""
        where = "S2.lift"
        g = self._g(g, where, check)
        v = as_array(v, (3,), "v", where, check)
        self._batch(where, g=(g, 2), v=(v, 1))
        gtv = np.einsum("...ji,...j->...i", g, v)
        if check:
            normal = np.abs(gtv @ self.x0)
            tol = membership_tol(input_eps(v), 3) * np.sqrt(np.einsum("...i,...i->...", v, v))
            if np.any(normal > tol):
                raise LieGroupError(
                    f"{where}: expected `v` tangent to S^2 at x = g x0 (v . x = 0 within "
                    f"{membership_tol(input_eps(v), 3):.0e} |v|); its normal part is up to "
                    f"{float(np.max(normal)):.1e}. Project it first (v - (v . x) x), or pass "
                    "check=False to drop the normal part."
                )
        return np.cross(self.x0, gtv)

    @property
    def kernels(self) -> types.SimpleNamespace:
        """Unchecked :meth:`project` and :meth:`pullback_gradient` (same arguments, same
        numbers) for hot loops holding validated float64 arrays (a rotation g ``(..., 3, 3)``,
        a gradient ``(..., 3)``): no shape, dtype or finiteness checks (as
        ``Retraction.kernels``).  Use the public methods everywhere else."""
        k = self.__dict__.get("_kernels_ns")
        if k is None:
            x0 = self.x0

            def project(g):
                return np.einsum("...ij,j->...i", g, x0)

            def pullback_gradient(g, grad):
                return np.cross(x0, np.einsum("...ji,...j->...i", g, grad))

            k = types.SimpleNamespace(project=project, pullback_gradient=pullback_gradient)
            self.__dict__["_kernels_ns"] = k
        return k

    def pullback_gradient(self, g, grad, check: bool = True) -> np.ndarray:
        """Left-trivialized gradient of ``g -> U(g x0)`` from the ambient gradient of U at g x0:
        ``<N_0, chi> = d/deps U(g exp(eps chi) x0)``, ``N_0 = x0 x (g^T grad)``, ``(..., 3)``."""
        g = self._g(g, "S2.pullback_gradient", check)
        grad = as_array(grad, (3,), "grad", "S2.pullback_gradient", check)
        self._batch("S2.pullback_gradient", g=(g, 2), grad=(grad, 1))
        return self.kernels.pullback_gradient(g, grad)

    # Splitting so(3) = m (+) h.
    def isotropy_basis(self) -> np.ndarray:
        """Basis of h = Lie(H) as rows, shape (1, 3): ``[x0]``."""
        return self.x0[None, :].copy()

    def constraint_matrix(self) -> np.ndarray:
        """C with ``phi(eta) = C eta`` (rows B(e_j, .) for the isotropy basis), shape (1, 3)."""
        return self.x0[None, :].copy()

    def m_projector(self) -> np.ndarray:
        """Orthogonal projector onto m = h^perp: ``I - x0 x0^T``, shape (3, 3)."""
        return np.eye(3) - np.outer(self.x0, self.x0)

    def h_projector(self) -> np.ndarray:
        """Orthogonal projector onto h: ``x0 x0^T``, shape (3, 3)."""
        return np.outer(self.x0, self.x0)

    def split(self, xi, check: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``xi = xi_m + xi_h`` with xi_m in m and xi_h in h; returns ``(xi_m, xi_h)``."""
        xi = as_array(xi, (3,), "xi", "S2.split", check)
        xi_h = np.einsum("...i,i->...", xi, self.x0)[..., None] * self.x0
        return xi - xi_h, xi_h

    def tangent_projector(self, x, check: bool = True) -> np.ndarray:
        """Projector onto T_x S^2: ``I - x x^T``, shape ``(..., 3, 3)``; x on S^2."""
        x = self.check_point(x, "x", "S2.tangent_projector", check=check)
        return np.eye(3) - x[..., :, None] * x[..., None, :]

    def hat(self, xi, check: bool = True) -> np.ndarray:
        """so(3) hat of ``(..., 3)`` coordinates (``SO3.hat``)."""
        return hat3(as_array(xi, (3,), "xi", "S2.hat", check))


S2 = Sphere2()
