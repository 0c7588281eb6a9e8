"""Abstract matrix Lie group protocol.

Conventions (high-order paper §6;
homogeneous-spaces-rkmk §2):

* elements are arrays of shape ``(*batch, *G.shape)``; algebra coordinates ``(*batch, G.dim)``;
  every function broadcasts over leading batch axes;
* ``hat``/``vee`` map coordinates to/from the matrix representation ``(*batch, n, n)``,
  ``n = G.matrix_dim``; ``as_matrix(g)`` is the element as such a matrix;
* ``Ad(g)`` is the matrix with ``hat(Ad(g) xi) = g hat(xi) g^{-1}``, ``ad(xi) eta = [xi, eta]``,
  ``Ad_star(g) = Ad(g)^T``, ``ad_star(xi) = ad(xi)^T`` (covectors paired by the dot product);
* left trivialization.  For a retraction tau in {exp, cay} (both with tau(-xi) = tau(xi)^{-1}):

      d/deps tau(xi + eps delta)|_0 = tau(xi) hat(dL(xi) delta) = hat(dR(xi) delta) tau(xi),

  dR(xi) = Ad(tau(xi)) dL(xi) = dL(-xi).  Derivative terms (homogeneous-spaces-rkmk §2):

      dL_deriv(xi, eta) delta = d/deps [dL(xi + eps delta) eta]|_0     (the Jacobian J^L(xi, eta))

  and likewise for dL_inv.  The group classes implement the retraction pieces under the names
  ``exp_*`` / ``cay_*``; users reach them through :func:`chetaev.liegroups.retraction`.

Validation and the internal fast path
-------------------------------------
Inputs are validated ONCE, at the public boundary.  Every public map ``m`` (``exp``, ``log``,
``exp_dL``, ``cay_dL_inv_deriv``, ...) converts its arguments to float64, checks their trailing
shape and finiteness (and group membership where documented, ``check=True``) and then calls the
unchecked kernel ``_k_<m>`` with the same positional arguments.  A kernel assumes validated
float64 arrays, performs no checks and raises nothing on good input; it returns exactly what
the public method returns.  Library code that already holds validated arrays (a
:class:`~chetaev.liegroups.Retraction` after checking ``xi`` once, a ``Product`` delegating to its
factors, composite maps such as ``dL_inv_hess``) calls kernels through ``_kernel``, never the
public methods, so nothing is checked twice.  Groups that define no kernel for some ``m`` fall
back to the public method (correct, only slower): ``G._kernel(m)`` returns ``(fn, checked)``
with ``checked = True`` when ``fn`` validates by itself.  Kernels are private: user code calls
the public methods (or the retraction object), which keep every guarantee of this package.
"""

from __future__ import annotations

import abc

import numpy as np

from ._errors import LieGroupError
from ._validation import as_array, broadcast_batch, input_eps, membership_tol

__all__ = ["MatrixLieGroup"]


class MatrixLieGroup(abc.ABC):
    """A matrix Lie group with coordinates on its Lie algebra.

    Subclasses set the class-level accessors ``name``, ``dim``, ``shape`` and ``matrix_dim`` and
    implement the abstract methods.  The Cayley-retraction pieces have exact generic
    implementations on the matrix representation (``A = I - hat(xi)/2``, ``B = I + hat(xi)/2``;
    high-order paper §6.1); groups override them with closed forms where they have
    them.  The exponential pieces have no generic fallback: every group supplies closed forms.
    """

    # ------------------------------------------------------------------ Accessors.
    #: internal: True when Ad, dL and dL_inv are the identity and the derivatives of dL vanish
    #: for both retractions (R^n); products then skip the factor's kernels (``_product.py``)
    _flat: bool = False
    #: short name used in messages ("SO3", "SE2", "R3", "SO3xR2", ...)
    name: str
    #: dimension of the Lie algebra (length of algebra coordinate vectors)
    dim: int
    #: shape of one group element: (3, 3) for SO3, (n,) for Rn, (k, k) for a Product
    shape: tuple[int, ...]
    #: size n of the n x n matrix representation (as_matrix / hat)
    matrix_dim: int
    #: tolerance of the membership tests of ``check=True`` calls; ``None`` (default): scaled to
    #: the input's dtype and the matrix size, ``matrix_dim * sqrt(eps)`` (``membership_tol``)
    element_tol: float | None = None

    def __init_subclass__(cls, **kwargs):
        """Give the multi-argument closed forms a subclass defines (``exp_dL_deriv(xi, eta)``,
        ``cay_dL_hess(xi, eta, u)``, ...) a typed error for batch axes that do not broadcast:
        a comparison of the argument shapes before the call (the closed forms validate each
        argument themselves)."""
        super().__init_subclass__(**kwargs)
        for name in _MULTI_ARG:
            fn = cls.__dict__.get(name)
            if fn is not None and not getattr(fn, "_batch_guarded", False):
                setattr(cls, name, _batch_guard(fn, name))

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.name == self.name

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    # ------------------------------------------------------------------ Internal fast path.
    def _kernel(self, name: str):
        """``(fn, checked)``: the unchecked kernel ``_k_<name>`` of the public map ``name`` if
        the group defines one (``checked=False``: the caller must pass validated float64
        arrays), else the public method itself (``checked=True``).  See the module docstring."""
        k = getattr(self, "_k_" + name, None)
        return (k, False) if k is not None else (getattr(self, name), True)

    def _k_as_matrix(self, g):
        return g

    def _k_from_matrix(self, M):
        return M

    # ------------------------------------------------------------------ Factory.
    def identity(self, batch_shape: tuple[int, ...] = ()) -> np.ndarray:
        """Identity element, shape ``(*batch_shape, *shape)``."""
        e = self._k_from_matrix(np.eye(self.matrix_dim))
        return np.broadcast_to(e, (*tuple(batch_shape), *self.shape)).copy()

    @abc.abstractmethod
    def random(self, rng: np.random.Generator, size: tuple[int, ...] | int = ()) -> np.ndarray:
        """Random elements, shape ``(*size, *shape)`` (Haar-uniform on compact factors, standard
        normal on translation parts)."""

    # ------------------------------------------------------------------ Validation.
    def check_element(self, g, name: str = "g", where: str | None = None,
                      check: bool = True) -> np.ndarray:
        """Validate shape and dtype of ``g`` (and finiteness with ``check``); return float64.
        Does not test membership (see :meth:`check_member`)."""
        return as_array(g, self.shape, name, where or self.name, check)

    def check_member(self, g, name: str = "g", where: str | None = None,
                     check: bool = True) -> np.ndarray:
        """Validate shape and dtype of ``g`` and, with ``check``, finiteness and membership
        (tolerance :func:`membership_tol` of the input's dtype); return float64."""
        where = where or self.name
        arr = as_array(g, self.shape, name, where, check)
        if check:
            self._require_element(arr, where, name=name, eps=input_eps(g))
        return arr

    def check_algebra(self, xi, name: str = "xi", where: str | None = None,
                      check: bool = True) -> np.ndarray:
        """Validate algebra coordinates ``(..., dim)`` (finiteness with ``check``); float64."""
        return as_array(xi, (self.dim,), name, where or self.name, check)

    def check_algebra_matrix(self, X, name: str = "X", where: str | None = None,
                             check: bool = True) -> np.ndarray:
        """Validate matrices ``(..., n, n)`` (finiteness with ``check``); float64.  Membership in
        the algebra is not required: :meth:`vee` reads the algebra part of any matrix (the
        skew part for rotations), which finite-difference and projection code relies on."""
        n = self.matrix_dim
        return as_array(X, (n, n), name, where or self.name, check)

    def _require_element(self, g: np.ndarray, where: str, tol: float | None = None,
                         name: str = "g", eps: float | None = None) -> None:
        if tol is None:
            tol = self.element_tol
        if tol is None:
            tol = membership_tol(eps if eps is not None else input_eps(g), self.matrix_dim)
        ok = np.asarray(self.is_element(g, tol))
        if not np.all(ok):
            n_bad = int(ok.size - np.count_nonzero(ok))
            raise LieGroupError(
                f"{where}: expected elements of {self.name} ({self._membership_text()}, "
                f"tolerance {tol:.0e}); {n_bad} of {ok.size} input(s) `{name}` are not. "
                f"Project the input onto the group first, or pass check=False to skip the test."
            )

    def _membership_text(self) -> str:
        return "a valid group element"

    def _pair(self, where, a, b, na, nb, ka, kb):
        """Batch axes of two validated arrays must broadcast (typed error otherwise)."""
        if a.shape[: a.ndim - ka] != b.shape[: b.ndim - kb]:
            broadcast_batch(where, **{na: (a, ka), nb: (b, kb)})

    # ------------------------------------------------------------------ Matrix representation.
    def as_matrix(self, g, check: bool = True) -> np.ndarray:
        """Element(s) as matrices ``(..., n, n)``; identity for matrix-valued groups.
        Validates membership unless ``check=False``."""
        return self._k_as_matrix(self.check_member(g, "g", f"{self.name}.as_matrix", check))

    def from_matrix(self, M, check: bool = True) -> np.ndarray:
        """Inverse of :meth:`as_matrix`: ``(..., n, n)`` matrices -> elements.  Checks shape and
        dtype (and finiteness unless ``check=False``) but deliberately not membership: it is a
        change of representation, used e.g. on ODE solutions that drift off the group by their
        tolerance.  Test membership with :meth:`is_element` or :meth:`check_member`."""
        n = self.matrix_dim
        return self._k_from_matrix(as_array(M, (n, n), "M", f"{self.name}.from_matrix", check))

    @abc.abstractmethod
    def is_element(self, g, tol: float = 1e-10):
        """Membership test.  Returns a boolean array of the batch shape (a numpy bool for a
        single element); False for a wrong trailing shape, a non-real dtype or non-finite
        entries.

        Parameters
        ----------
        g : array_like
            Candidate elements, shape ``(..., *shape)``.
        tol : float, optional
            Absolute bound on every entry of ``R^T R - I`` of the rotation block, on
            ``|det R - 1|`` (``3 tol``: with ``R^T R = I + E``, ``det R - 1 ~ tr(E) / 2``, at
            most ``1.5 tol`` for n <= 3, so the determinant test only rejects reflections and
            never an ``R`` the orthogonality test accepts) and on the fixed last row of the
            SE(n) matrices.  The default ``1e-10`` is a fixed float64 value: an element that went
            through k products is off the group by about ``k n eps`` (~7e-16 k for n = 3), so it
            accepts ~1e5 unprojected compositions.  The ``check=True`` paths of the group
            operations do not use this default: they pass ``membership_tol`` (``n sqrt(eps)`` of
            the input's dtype, or ``element_tol``).  ``R^n`` only checks finiteness."""

    # ------------------------------------------------------------------ Group operations.
    # Public methods validate (shapes and dtypes always; finiteness and membership unless
    # ``check=False``) and call the unchecked kernels ``_k_*`` every group implements.
    def compose(self, g, h, check: bool = True) -> np.ndarray:
        """Group product ``g h`` (broadcasting), shape ``(..., *shape)``."""
        where = f"{self.name}.compose"
        g = self.check_member(g, "g", where, check)
        h = self.check_member(h, "h", where, check)
        k = len(self.shape)
        self._pair(where, g, h, "g", "h", k, k)
        return self._k_compose(g, h)

    def inverse(self, g, check: bool = True) -> np.ndarray:
        """Group inverse ``g^{-1}``, shape ``(..., *shape)``."""
        return self._k_inverse(self.check_member(g, "g", f"{self.name}.inverse", check))

    def between(self, g, h, check: bool = True) -> np.ndarray:
        """``g^{-1} h``."""
        where = f"{self.name}.between"
        g = self.check_member(g, "g", where, check)
        h = self.check_member(h, "h", where, check)
        k = len(self.shape)
        self._pair(where, g, h, "g", "h", k, k)
        return self._k_compose(self._k_inverse(g), h)

    def Ad(self, g, check: bool = True) -> np.ndarray:
        """Adjoint matrix ``(..., dim, dim)``: ``hat(Ad(g) xi) = g hat(xi) g^{-1}``."""
        g = self.check_member(g, "g", f"{self.name}.Ad", check)
        out = self._k_Ad(g)
        return out.copy() if out is g else out

    def Ad_pair(self, g, check: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(Ad(g), Ad_star(g^{-1}))``, each ``(..., dim, dim)``, in one call: the transport of
        algebra vectors by g and of covectors by g^{-1} (``Ad*_{g^{-1}} = Ad(g^{-1})^T``), as
        in the momentum updates of Lie-group RKMK/PRK steps (homogeneous-spaces paper eq. (3d)).
        Cheaper than two calls where a closed form exists (SO(3): both are g; R^n: both I)."""
        g = self.check_member(g, "g", f"{self.name}.Ad_pair", check)
        A, B = self._k_Ad_pair(g)
        return np.array(A), np.array(B)

    def Ad_star(self, g, check: bool = True) -> np.ndarray:
        """Coadjoint matrix ``Ad(g)^T``, ``(..., dim, dim)``:
        ``<Ad_star(g) mu, xi> = <mu, Ad(g) xi>``."""
        g = self.check_member(g, "g", f"{self.name}.Ad_star", check)
        return np.swapaxes(self._k_Ad(g), -1, -2).copy()

    # ------------------------------------------------------------------ Algebra.
    def hat(self, xi, check: bool = True) -> np.ndarray:
        """Coordinates ``(..., dim)`` -> algebra matrices ``(..., n, n)``."""
        return self._k_hat(self.check_algebra(xi, "xi", f"{self.name}.hat", check))

    def vee(self, X, check: bool = True) -> np.ndarray:
        """Algebra matrices ``(..., n, n)`` -> coordinates ``(..., dim)`` (inverse of hat).  For a
        matrix outside the algebra it returns the coordinates of its algebra part (documented
        projection: ``vee(X) = vee(P X)`` with P the projection reading the algebra entries,
        e.g. the skew part ``(X - X^T)/2`` for rotations)."""
        return self._k_vee(self.check_algebra_matrix(X, "X", f"{self.name}.vee", check))

    def ad(self, xi, check: bool = True) -> np.ndarray:
        """``(..., dim, dim)`` matrix of ``eta -> [xi, eta]``;
        ``ad(xi) = d/dt Ad(exp(t xi))|_0``."""
        return self._k_ad(self.check_algebra(xi, "xi", f"{self.name}.ad", check))

    def ad_star(self, xi, check: bool = True) -> np.ndarray:
        """``ad(xi)^T`` ``(..., dim, dim)``."""
        xi = self.check_algebra(xi, "xi", f"{self.name}.ad_star", check)
        return np.swapaxes(self._k_ad(xi), -1, -2).copy()

    def bracket(self, xi, eta, check: bool = True) -> np.ndarray:
        """Lie bracket ``[xi, eta] = ad(xi) eta``, shape ``(..., dim)``."""
        where = f"{self.name}.bracket"
        xi = self.check_algebra(xi, "xi", where, check)
        eta = self.check_algebra(eta, "eta", where, check)
        self._pair(where, xi, eta, "xi", "eta", 1, 1)
        return self._k_bracket(xi, eta)

    def generators(self) -> np.ndarray:
        """Basis of the algebra as matrices, shape ``(dim, n, n)``: ``hat(e_k)``."""
        return self._k_hat(np.eye(self.dim))

    # ------------------------------------------------------------------ Kernels (unchecked).
    @abc.abstractmethod
    def _k_compose(self, g, h) -> np.ndarray:
        """Unchecked group product."""

    @abc.abstractmethod
    def _k_inverse(self, g) -> np.ndarray:
        """Unchecked group inverse."""

    @abc.abstractmethod
    def _k_Ad(self, g) -> np.ndarray:
        """Unchecked adjoint matrix."""

    def _k_Ad_pair(self, g) -> tuple[np.ndarray, np.ndarray]:
        """Unchecked :meth:`Ad_pair` (results may share memory with g or with each other)."""
        return self._k_Ad(g), np.swapaxes(self._k_Ad(self._k_inverse(g)), -1, -2)

    @abc.abstractmethod
    def _k_hat(self, xi) -> np.ndarray:
        """Unchecked hat."""

    @abc.abstractmethod
    def _k_vee(self, X) -> np.ndarray:
        """Unchecked vee (reads the algebra part of X)."""

    @abc.abstractmethod
    def _k_ad(self, xi) -> np.ndarray:
        """Unchecked ad."""

    def _k_bracket(self, xi, eta) -> np.ndarray:
        return np.einsum("...ij,...j->...i", self._k_ad(xi), eta)

    # ------------------------------------------------------------------ Exponential retraction.
    @abc.abstractmethod
    def exp(self, xi) -> np.ndarray:
        """Group exponential ``expm(hat(xi))``, shape ``(..., *shape)`` (closed form)."""

    @abc.abstractmethod
    def log(self, g, check: bool = True) -> np.ndarray:
        """Principal logarithm, shape ``(..., dim)``; ``exp(log(g)) = g``.  With ``check`` the input
        is validated to be a group element (LieGroupError otherwise)."""

    @abc.abstractmethod
    def exp_dL(self, xi) -> np.ndarray:
        """Left-trivialized tangent of exp, ``(..., dim, dim)``:
        ``d/deps exp(xi + eps d) = exp(xi) hat(exp_dL(xi) d)``; equals sum_k (-ad xi)^k/(k+1)!."""

    @abc.abstractmethod
    def exp_dL_inv(self, xi) -> np.ndarray:
        """Inverse matrix of :meth:`exp_dL`, ``(..., dim, dim)``."""

    @abc.abstractmethod
    def exp_dL_deriv(self, xi, eta) -> np.ndarray:
        """``(..., dim, dim)`` Jacobian ``J`` with ``J d = d/deps [exp_dL(xi + eps d) eta]|_0``."""

    @abc.abstractmethod
    def exp_dL_hess(self, xi, eta, u) -> np.ndarray:
        """``(..., dim, dim)`` Jacobian ``H`` with
        ``H d = d/deps [exp_dL_deriv(xi + eps d, eta) u]`` (the second derivative of
        ``exp_dL(xi) eta``, symmetric in ``u`` and ``d``)."""

    def exp_dL_inv_deriv(self, xi, eta) -> np.ndarray:
        """Jacobian of ``xi -> exp_dL_inv(xi) eta``: ``-dL^{-1} J^L(xi, dL^{-1} eta)`` (exact)."""
        where = f"{self.name}.exp_dL_inv_deriv"
        xi = self.check_algebra(xi, "xi", where)
        eta = self.check_algebra(eta, "eta", where)
        return _inverse_deriv(self.exp_dL_inv(xi), self.exp_dL_deriv, xi, eta)

    # ------------------------------------------------------------------ Cayley retraction.
    def _cay_AB(self, xi):
        X = self._k_hat(self.check_algebra(xi, where=f"{self.name}.cay"))
        eye = np.eye(self.matrix_dim)
        return eye - 0.5 * X, eye + 0.5 * X

    def cay(self, xi) -> np.ndarray:
        """Cayley map ``(I - hat(xi)/2)^{-1} (I + hat(xi)/2)``, shape ``(..., *shape)``."""
        A, B = self._cay_AB(xi)
        return self._k_from_matrix(np.linalg.solve(A, B))

    def cay_inv(self, g, check: bool = True) -> np.ndarray:
        """Inverse Cayley map ``vee(2 (g - I)(g + I)^{-1})``, shape ``(..., dim)``; undefined
        where ``g + I`` is singular (rotations by pi)."""
        where = f"{self.name}.cay_inv"
        g = self.check_element(g, "g", where)
        if check:
            self._require_element(g, where)
        M = self._k_as_matrix(g)
        eye = np.eye(self.matrix_dim)
        P = M + eye
        if np.any(np.abs(np.linalg.det(P)) <= 1e-12 * 2.0**self.matrix_dim):  # det(2I) = 2^n
            raise LieGroupError(
                f"{where}: g + I is singular (a rotation by pi); the Cayley map cannot reach "
                "such elements. Use the exp retraction or a smaller step."
            )
        X = 2.0 * np.swapaxes(np.linalg.solve(np.swapaxes(P, -1, -2), np.swapaxes(M - eye, -1, -2)),
                              -1, -2)
        return self._k_vee(X)

    def _columns(self, T: np.ndarray) -> np.ndarray:
        """(..., k, n, n) stack of algebra matrices (one per basis direction k) -> (..., dim, k)."""
        return np.swapaxes(self._k_vee(T), -1, -2)

    def cay_dL(self, xi) -> np.ndarray:
        """Left-trivialized tangent of cay, ``(..., dim, dim)``:
        ``dL(xi) d = vee(B^{-1} hat(d) A^{-1})``."""
        A, B = self._cay_AB(xi)
        Ai, Bi = np.linalg.inv(A), np.linalg.inv(B)
        E = self.generators()
        T = np.einsum("...ij,kjl,...lm->...kim", Bi, E, Ai)
        return self._columns(T)

    def cay_dL_inv(self, xi) -> np.ndarray:
        """Inverse of :meth:`cay_dL`: ``dL^{-1}(xi) d = vee(B hat(d) A)``."""
        A, B = self._cay_AB(xi)
        E = self.generators()
        T = np.einsum("...ij,kjl,...lm->...kim", B, E, A)
        return self._columns(T)

    def cay_dL_deriv(self, xi, eta) -> np.ndarray:
        """Jacobian of ``xi -> cay_dL(xi) eta``:
        ``J d = vee(B^{-1} ½(hat(eta) A^{-1} hat(d) - hat(d) B^{-1} hat(eta)) A^{-1})``."""
        A, B = self._cay_AB(xi)
        Ai, Bi = np.linalg.inv(A), np.linalg.inv(B)
        H = self._k_hat(self.check_algebra(eta, "eta", f"{self.name}.cay_dL_deriv"))
        E = self.generators()
        left = (H @ Ai)[..., None, :, :] @ E
        right = E @ (Bi @ H)[..., None, :, :]
        T = 0.5 * (Bi[..., None, :, :] @ (left - right) @ Ai[..., None, :, :])
        return self._columns(T)

    def cay_dL_hess(self, xi, eta, u) -> np.ndarray:
        """Jacobian of ``xi -> cay_dL_deriv(xi, eta) u`` from the second derivative of
        ``B^{-1} hat(eta) A^{-1}``: with P = B^{-1}, Q = A^{-1}, U = hat(u), H = hat(eta),
        ``H d = vee(¼ [P D (M1 - M4) + PUP D PHQ + PHQ D QUQ + (M4 - M1) D Q])``,
        ``M1 = PUPHQ``, ``M4 = PHQUQ``, D = hat(d)."""
        A, B = self._cay_AB(xi)
        Q, P = np.linalg.inv(A), np.linalg.inv(B)
        where = f"{self.name}.cay_dL_hess"
        H = self._k_hat(self.check_algebra(eta, "eta", where))
        U = self._k_hat(self.check_algebra(u, "u", where))
        PUP = P @ U @ P
        PHQ = P @ H @ Q
        QUQ = Q @ U @ Q
        M1 = PUP @ H @ Q
        M4 = PHQ @ U @ Q
        E = self.generators()

        def x(M):
            return M[..., None, :, :]

        T = 0.25 * (
            x(P) @ E @ x(M1 - M4)
            + x(PUP) @ E @ x(PHQ)
            + x(PHQ) @ E @ x(QUQ)
            + x(M4 - M1) @ E @ x(Q)
        )
        return self._columns(T)

    def cay_dL_inv_deriv(self, xi, eta) -> np.ndarray:
        """Jacobian of ``xi -> cay_dL_inv(xi) eta``:
        ``J d = vee(½ hat(d) hat(eta) A - ½ B hat(eta) hat(d))``."""
        A, B = self._cay_AB(xi)
        H = self._k_hat(self.check_algebra(eta, "eta", f"{self.name}.cay_dL_inv_deriv"))
        E = self.generators()
        T = 0.5 * (E @ (H @ A)[..., None, :, :] - (B @ H)[..., None, :, :] @ E)
        return self._columns(T)


#: public closed forms with several algebra arguments (guarded by ``_batch_guard``)
_MULTI_ARG = ("exp_dL_deriv", "exp_dL_inv_deriv", "exp_dL_hess", "exp_dL_third", "exp_dL_apply",
              "cay_dL_deriv", "cay_dL_inv_deriv", "cay_dL_hess")


def _batch_guard(fn, name: str):
    import functools
    import inspect

    arg_names = [p for p in inspect.signature(fn).parameters][1:]

    @functools.wraps(fn)
    def guarded(self, *args):
        shapes = [np.shape(a)[:-1] for a in args]
        if any(sh != shapes[0] for sh in shapes[1:]):
            try:
                np.broadcast_shapes(*shapes)
            except ValueError:
                desc = ", ".join(f"`{n}` batch {sh}" for n, sh in zip(arg_names, shapes))
                raise LieGroupError(
                    f"{self.name}.{name}: the leading batch axes of the arguments do not "
                    f"broadcast ({desc}). Give them equal batch shapes, or shapes that broadcast "
                    "(e.g. add axes of size 1)."
                ) from None
        return fn(self, *args)

    guarded._batch_guarded = True
    return guarded


def _inverse_deriv(dL_inv: np.ndarray, dL_deriv, xi, eta) -> np.ndarray:
    """Jacobian of ``xi -> dL(xi)^{-1} eta`` from that of ``dL``:
    ``d(D^{-1}) eta = -D^{-1} (dD) D^{-1} eta``, i.e. ``-D^{-1} J^L(xi, D^{-1} eta)``."""
    w = np.einsum("...ij,...j->...i", dL_inv, np.asarray(eta, dtype=np.float64))
    return -np.einsum("...ij,...jk->...ik", dL_inv, dL_deriv(xi, w))


for _name in _MULTI_ARG:  # the generic closed forms of the base class (Cayley, exp dL_inv_deriv)
    _fn = MatrixLieGroup.__dict__.get(_name)
    if _fn is not None and not getattr(_fn, "__isabstractmethod__", False):
        setattr(MatrixLieGroup, _name, _batch_guard(_fn, _name))
