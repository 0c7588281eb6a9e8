"""Discrete kinematic constraints D_K ⊂ Q³ and variational constraints D_V (Def. 3.1).

D_K = {g(q0, q1, q2) = 0} with g: Q³ → ℝ^m; D_V|(q0,q1,q2) ⊂ T_{q1}Q is given by a basis
(rows of an (r, n) matrix) or by an annihilator (rows spanning D_V°). Paper Def. 3.1, 3.2.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from ._errors import DSOCSInputError
from ._validation import fd_jacobian

__all__ = ["KinematicConstraint", "VariationalConstraint"]


@attrs.frozen(eq=False)
class KinematicConstraint:
    """D_K = {(q0, q1, q2): g(q0, q1, q2) = 0} (Def. 3.1 (3)).

    Parameters
    ----------
    g : callable
        ``g(q0, q1, q2)`` → ``(..., m)``; broadcasts over leading axes.
    jacobian : callable, optional
        ``jacobian(q0, q1, q2)`` → ``(J0, J1, J2)``, each ``(..., m, n)``: the slot
        derivatives D_1g, D_2g, D_3g of eq. (2). Central differences otherwise.
    derivative_check : bool, keyword-only, default True
        Whether :meth:`DSOCS.check_derivatives` compares ``jacobian`` with central
        differences of ``g`` (``False``: skip it, e.g. for a non-smooth ``g``).
    """

    g: Callable = attrs.field()
    jacobian: Callable | None = None
    derivative_check: bool = attrs.field(default=True, kw_only=True)

    def __attrs_post_init__(self) -> None:
        for name, f in (("g", self.g), ("jacobian", self.jacobian)):
            if f is not None and not callable(f):
                raise DSOCSInputError(
                    f"KinematicConstraint: {name} must be a callable of (q0, q1, q2); got "
                    f"{type(f).__name__}."
                )

    def residual(self, q0, q1, q2) -> np.ndarray:
        """g(q0, q1, q2) → (..., m)."""
        return np.asarray(self.g(q0, q1, q2), dtype=float)

    def jacobian_q2(self, q0, q1, q2) -> np.ndarray:
        """D_3g only, (..., m, n) (what Newton needs)."""
        if self.jacobian is not None:
            return np.asarray(self.jacobian(q0, q1, q2)[2], dtype=float)
        q0, q1, q2 = np.broadcast_arrays(*(np.asarray(x, float) for x in (q0, q1, q2)))
        return fd_jacobian(lambda x: self.g(q0[..., None, :], q1[..., None, :], x), q2)

    def jacobians(self, q0, q1, q2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(D_1g, D_2g, D_3g), each (..., m, n)."""
        if self.jacobian is not None:
            return tuple(np.asarray(j, dtype=float) for j in self.jacobian(q0, q1, q2))
        q0, q1, q2 = np.broadcast_arrays(*(np.asarray(x, float) for x in (q0, q1, q2)))

        def e(x):
            return x[..., None, :]

        return (
            fd_jacobian(lambda x: self.g(x, e(q1), e(q2)), q0),
            fd_jacobian(lambda x: self.g(e(q0), x, e(q2)), q1),
            fd_jacobian(lambda x: self.g(e(q0), e(q1), x), q2),
        )


@attrs.frozen(eq=False)
class VariationalConstraint:
    """D_V|(q0, q1, q2) ⊂ T_{q1}Q, given by a basis or by an annihilator (Def. 3.1 (4)).

    Parameters
    ----------
    basis : callable, optional
        ``basis(q0, q1, q2)`` → ``(..., r, n)``: rows span D_V. Then β has the r
        components ``basis · p`` (the trivialization φ of Thm 5.1).
    annihilator : callable, optional
        ``annihilator(q0, q1, q2)`` → ``(..., m_V, n)``: rows span D_V°. Then β is
        represented by the n components of ``(I − A⁺A) p`` (rank n − m_V), a smooth
        choice; the step is then solved by Gauss–Newton.

    depends_on : tuple of int
        Slots (0, 1, 2 for q0, q1, q2) the subspace depends on; () for a constant D_V.
        Only these slots get the (finite-difference) derivative of the basis.

    Exactly one of basis/annihilator must be given.
    """

    basis: Callable | None = None
    annihilator: Callable | None = None
    depends_on: tuple[int, ...] = (0, 1, 2)

    def __attrs_post_init__(self) -> None:
        if (self.basis is None) == (self.annihilator is None):
            raise DSOCSInputError(
                "VariationalConstraint needs exactly one of basis=... (rows spanning D_V) "
                "or annihilator=... (rows spanning the annihilator of D_V)."
            )
        given = self.basis if self.basis is not None else self.annihilator
        if not callable(given):
            raise DSOCSInputError(
                "basis/annihilator must be a callable (q0, q1, q2) -> (..., r, n); got "
                f"{type(given).__name__}."
            )
        try:
            slots = tuple(int(k) for k in self.depends_on)
        except (TypeError, ValueError):
            slots = None
        if slots is None or not set(slots) <= {0, 1, 2}:
            raise DSOCSInputError(
                "depends_on must list the slots 0, 1, 2 (q0, q1, q2) the subspace D_V "
                f"depends on, e.g. (1,) or () for a constant D_V; got {self.depends_on!r}."
            )
        object.__setattr__(self, "depends_on", tuple(sorted(set(slots))))

    def components(self, q0, q1, q2, p) -> np.ndarray:
        """φ∘β: the components of the covector p restricted to D_V, (..., r) or (..., n)."""
        p = np.asarray(p, dtype=float)
        if self.basis is not None:
            E = np.asarray(self.basis(q0, q1, q2), dtype=float)
            return np.einsum("...rn,...n->...r", E, p)
        A = np.asarray(self.annihilator(q0, q1, q2), dtype=float)
        Ap = np.linalg.pinv(A)  # (..., n, m)
        return p - np.einsum("...nm,...m->...n", Ap, np.einsum("...mn,...n->...m", A, p))

    def matrix(self, q0, q1, q2) -> np.ndarray:
        """The linear map p ↦ components(p) as a (..., r, n) matrix."""
        if self.basis is not None:
            return np.asarray(self.basis(q0, q1, q2), dtype=float)
        A = np.asarray(self.annihilator(q0, q1, q2), dtype=float)
        n = A.shape[-1]
        return np.eye(n) - np.linalg.pinv(A) @ A

    def matrix_jvp(self, q0, q1, q2, p, slot: int) -> np.ndarray:
        """∂/∂q_slot of ``matrix(q0,q1,q2)·p`` at fixed p → (..., r, n); central differences."""
        qs = [np.asarray(x, float) for x in np.broadcast_arrays(q0, q1, q2)]
        p = np.asarray(p, float)[..., None, :]
        e = [x[..., None, :] for x in qs]

        def f(x):
            args = list(e)
            args[slot] = x
            return np.einsum("...rn,...n->...r", self.matrix(*args), p)

        return fd_jacobian(f, qs[slot])
