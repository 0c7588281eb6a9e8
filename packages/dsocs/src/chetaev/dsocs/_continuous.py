"""Continuous second-order constrained systems (SOCS, Def. 2.1) as needed by the builders.

A SOCS is (Q, L, C_K, C_V) with C_K = {c(q, v, a) = 0} and C_V|_(q,v,a) spanned by the rows
of ``variations(q, v, a)``. Its equations of motion (eq. (1)) in coordinates are (paper Def. 2.1,
2.2, eq. (1))

    c(q, q̇, q̈) = 0,    E(q, q̇, q̈)·D_EL L(q, q̇, q̈) = 0,
    D_EL L = ∂L/∂q − d/dt ∂L/∂q̇.

The Lagrangian comes from a ``chetaev.discrete_lagrangian`` system, read through its
``D1L(q, v)`` (∂L/∂q), ``D2L(q, v)`` (∂L/∂v) and ``energy(q, v)``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
from chetaev.discrete_lagrangian import NewtonOptions, newton_solve

from ._errors import DSOCSInputError
from ._validation import fd_jacobian

__all__ = ["SOCS", "lagrangian_functions"]


def lagrangian_functions(system) -> dict[str, Callable]:
    """Continuous-Lagrangian callables read from a discrete_lagrangian system.

    Returns a dict with ``dLdq``, ``dLdv``, ``lagrangian`` (L = v·∂L/∂v − E) and, where the
    system provides them, analytic second-derivative blocks ``d2L_dqdq``, ``d2L_dqdv``,
    ``d2L_dvdv`` (otherwise they are left out and finite differences are used).
    """
    for name in ("D1L", "D2L"):
        if not callable(getattr(system, name, None)):
            raise DSOCSInputError(
                f"system must be a chetaev.discrete_lagrangian Lagrangian system with a "
                f"callable {name}(q, v); got {type(system).__name__} without it."
            )
    out: dict[str, Callable] = {"dLdq": system.D1L, "dLdv": system.D2L}
    if callable(getattr(system, "lagrangian", None)):
        out["lagrangian"] = system.lagrangian
    elif callable(getattr(system, "energy", None)):

        def lagrangian(q, v):
            v = np.asarray(v, float)
            return np.einsum("...i,...i->...", v, system.D2L(q, v)) - system.energy(q, v)

        out["lagrangian"] = lagrangian
    # chetaev.discrete_lagrangian convention: D11L = ∂²L/∂q², D12L[i, j] = ∂²L/∂q_i∂v_j,
    # D22L = ∂²L/∂v² (they fall back to finite differences inside the system when needed)
    blocks = {
        "d2L_dqdq": getattr(system, "D11L", None),
        "d2L_dqdv": getattr(system, "D12L", None),
        "d2L_dvdv": getattr(system, "D22L", None),
    }
    if all(callable(b) for b in blocks.values()):
        out.update(blocks)
    return out


@attrs.frozen(eq=False)
class SOCS:
    """A continuous second-order constrained Lagrangian system (Def. 2.1).

    Parameters
    ----------
    system : object
        ``chetaev.discrete_lagrangian`` Lagrangian system (``D1L``, ``D2L``, ``n``).
    constraint : callable
        ``constraint(q, v, a)`` → (..., m): C_K = {constraint = 0}.
    variations : callable
        ``variations(q, v, a)`` → (..., r, n): rows spanning C_V|_(q,v,a).
    constraint_jacobian : callable, optional
        ``constraint_jacobian(q, v, a)`` → (c_q, c_v, c_a), each (..., m, n).
    derivative_check : bool, keyword-only, default True
        Verify ``constraint_jacobian`` (and the system's derivatives) against central finite
        differences once, before the first step of a DSOCS built on this SOCS
        (:meth:`check_derivatives`); ``False`` skips it.
    """

    system: object
    constraint: Callable
    variations: Callable
    constraint_jacobian: Callable | None = None
    derivative_check: bool = attrs.field(default=True, kw_only=True)

    def check_derivatives(self, q, v, a=None) -> None:
        """Compare every supplied derivative with a central finite difference at (q, v, a).

        ``constraint_jacobian`` = (c_q, c_v, c_a) against ``constraint``, slot by slot, and
        the Lagrangian system's own ``check_derivatives(q, v)`` (when it has one), at the
        point and two nearby points (:func:`chetaev.discrete_lagrangian.compare_derivative`).

        Parameters
        ----------
        q, v : array_like, shape (n,) or (..., n)
            Position and velocity (the first configuration of a batch is used).
        a : array_like, optional
            Acceleration (zero by default).

        Raises
        ------
        DerivativeError
            A derivative disagrees with the finite difference (names the argument, the
            worst entry and both values).
        DSOCSInputError
            Non-finite or mis-shaped points.
        """
        from ._derivcheck import check_socs
        from ._validation import as_points

        q = as_points(q, "q")
        n = q.shape[-1]
        v = as_points(v, "v", n)
        a = np.zeros(n) if a is None else as_points(a, "a", n)
        q, v, a = (x.reshape(-1, n)[0] for x in (q, v, a))
        check_socs(self, q, v, a)

    def euler_lagrange(self, q, v, a) -> np.ndarray:
        """D_EL L(q, v, a) = ∂L/∂q − (∂²L/∂v∂q)v − (∂²L/∂v²)a (paper Def. 2.1, 2.2, eq. (1)
        sign)."""
        q, v, a = np.broadcast_arrays(*(np.asarray(x, float) for x in (q, v, a)))
        sysm = self.system
        if callable(getattr(sysm, "D21L", None)) and callable(getattr(sysm, "D22L", None)):
            # chetaev.discrete_lagrangian: D21L[i, j] = ∂²L/∂v_i∂q_j, D22L = ∂²L/∂v²
            dLv = np.einsum("...ij,...j->...i", sysm.D21L(q, v), v) + np.einsum(
                "...ij,...j->...i", sysm.D22L(q, v), a)
        else:
            # d/dt ∂L/∂v along (q̇, v̇) = (v, a): one central difference
            nv = np.maximum(np.max(np.abs(np.concatenate([v, a], -1)), axis=-1), 1.0)
            scl = 1.0 + np.max(np.abs(np.concatenate([q, v], -1)), axis=-1)
            e = (1e-6 * scl / nv)[..., None]
            dLv = (
                np.asarray(sysm.D2L(q + e * v, v + e * a))
                - np.asarray(sysm.D2L(q - e * v, v - e * a))
            ) / (2 * e)
        return np.asarray(sysm.D1L(q, v)) - dLv

    def residual(self, q, v, a, force=None) -> np.ndarray:
        """Equations (1) in coordinates: [c(q,v,a); E(q,v,a)·D_EL L(q,v,a)].

        ``force``: an external force F (..., n) at (q, v) (issue 20): the forced equations
        (Lagrange–d'Alembert with F) E·(D_EL L + F) = 0.
        """
        c = np.asarray(self.constraint(q, v, a), float)
        E = np.asarray(self.variations(q, v, a), float)
        el = self.euler_lagrange(q, v, a)
        if force is not None:
            el = el + np.asarray(force, float)
        return np.concatenate([c, np.einsum("...rn,...n->...r", E, el)], -1)

    def acceleration(self, q, v, a_guess=None, tol: float = 1e-13, max_iter: int = 50,
                     force=None):
        """Solve eq. (1) for the acceleration a at (q, v) (Newton on ``residual``; ``force``:
        the external force F(q, v, u) (..., n) of the forced equations, fixed during the
        solve since it does not depend on a).

        Raises
        ------
        DSOCSInputError
            If no consistent acceleration is found (e.g. on the singular set of the
            inertia-wheel constraint, G = 0, paper §4.2, eqs. (8)–(10)).
        """
        q, v = (np.asarray(x, float) for x in (q, v))
        a0 = np.zeros_like(q) if a_guess is None else np.asarray(a_guess, float)
        qe, ve = q[..., None, :], v[..., None, :]
        fe = None if force is None else np.asarray(force, float)[..., None, :]
        res = newton_solve(
            lambda a: self.residual(q, v, a, force),
            a0,
            lambda a: fd_jacobian(lambda x: self.residual(qe, ve, x, fe), a),
            NewtonOptions(tol=tol, max_iter=max_iter),
            gauss_newton=True,
            damped=True,
        )
        if not np.all(res.converged):
            raise DSOCSInputError(
                "could not solve the continuous equations (1) for the initial acceleration "
                f"(residual {np.max(res.residual):.1e}); the initial data may lie on a "
                "singular set of the constraint. Use start='paper' or pass an explicit "
                "acceleration to DSOCSIntegrator(acceleration=...)."
            )
        return res.x
