"""Adapters: read the arrays and callables the discretization-map kernels need from systems.

The methods of ``discretization_maps`` run on a ``ConstrainedSystem(MechanicalSystem(...),
HolonomicConstraint(...))`` with a constant mass matrix (the paper's §5 setting;
paper §2).  This module turns such a system into a small frozen bundle of ``M``, ``M⁻¹``,
``∇V``, ``∇²V``, ``φ``, ``G = Dφ`` and the constraint Hessian, and builds initial states.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError
from .._util._validation import as_float
from ._state import State

__all__ = ["EuclideanProblem", "as_euclidean_problem", "initial_euclidean_state"]

_INITIAL_TOL = 1e-10


@attrs.frozen(eq=False)
class EuclideanProblem:
    """Constant-mass mechanical system with a holonomic constraint, as plain callables."""

    M: np.ndarray
    Minv: np.ndarray
    V: Any
    grad_V: Any
    hess_V: Any
    phi: Any
    jac: Any
    hess_phi: Any
    n: int
    multiplier: Any = None


def _parts(system: Any) -> tuple[Any, Any]:
    inner = getattr(system, "system", None)
    constraint = getattr(system, "constraint", None)
    if inner is None or constraint is None:
        raise InputError(
            f"The discretization-map methods need ConstrainedSystem(MechanicalSystem(...), "
            f"HolonomicConstraint(...)), got {type(system).__name__}. Wrap your system and "
            f"its holonomic constraint in a ConstrainedSystem."
        )
    return inner, constraint


def as_euclidean_problem(system: Any) -> EuclideanProblem:
    """Extract the vector-space problem; raise :class:`InputError` if it does not fit."""
    inner, constraint = _parts(system)
    if getattr(inner, "group", None) is not None:
        raise InputError(
            "This is a Lie-group system: use LieDiscretizationMapMethod(kind, retraction) "
            "instead of the vector-space discretization-map methods."
        )
    if not getattr(inner, "is_mechanical", False) or not getattr(inner, "constant_mass", False):
        raise InputError(
            "The vector-space discretization-map methods need a MechanicalSystem with a "
            "constant mass matrix (paper §5). For a q-dependent mass use "
            "ConstrainedPRK."
        )
    if not hasattr(constraint, "phi") or not hasattr(constraint, "jacobian"):
        raise InputError(
            f"The discretization-map methods need a HolonomicConstraint φ(q) = 0, got "
            f"{type(constraint).__name__}."
        )
    n = int(inner.n)
    M = np.asarray(inner.mass, dtype=float)
    Minv = np.linalg.inv(M)

    def phi(q):
        return np.asarray(constraint.phi(q), dtype=float)

    def jac(q):
        return np.asarray(constraint.jacobian(q), dtype=float)

    def hess_phi(q):
        return np.asarray(constraint.hessian(q), dtype=float)

    return EuclideanProblem(M=M, Minv=Minv, V=inner.V, grad_V=inner.gradV,
                            hess_V=inner.hessV, phi=phi, jac=jac, hess_phi=hess_phi, n=n,
                            multiplier=system.multiplier)


def initial_euclidean_state(system: Any, q0: Any, v0: Any, t0: float = 0.0,
                            tol: float = _INITIAL_TOL) -> State:
    """Check ``(q0, v0) ∈ TN`` and return ``State(q0, v0, p0 = M v0)``.

    Raises
    ------
    ConstraintViolationError
        If ``|φ(q0)|`` or ``|G(q0) v0|`` exceeds ``tol``.
    """
    prob = as_euclidean_problem(system)
    from ..methods._common import vector_initial_data

    # the same shape/batch checks and constraint-set check (one message) as ConstrainedPRK
    q0, v0 = vector_initial_data(system, q0, v0, "the discretization-map method",
                                 constrained=True)
    t0 = as_float(t0, "t0")
    system.check_initial(q0, v0, tol=tol)
    p0 = np.einsum("ij,...j->...i", prob.M, v0)
    lam0 = np.asarray(system.multiplier(q0, v0), dtype=float)
    return State(t=t0, q=q0.copy(), v=v0.copy(), p=np.broadcast_to(p0, q0.shape).copy(),
                 lam=lam0, n=0)
