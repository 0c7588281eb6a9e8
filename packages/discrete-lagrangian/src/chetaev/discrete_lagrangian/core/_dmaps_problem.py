"""The system check and initial state of the vector-space discretization-map methods.

The methods of ``discretization_maps`` run on a ``ConstrainedSystem(MechanicalSystem(...),
HolonomicConstraint(...))`` with a constant mass matrix (the paper's §5 setting; paper §2).
They read the system only through its :class:`~.SystemInterface` (``mass``, ``mass_inv``,
``potential_grad``, ``potential_hess``, ``holonomic_phi``, ``holonomic_jacobian``,
``holonomic_hessian``, ``multiplier``); this module checks that the interface has these
fields and builds initial states.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._util._errors import InputError
from .._util._validation import as_float
from ._interface import SystemInterface, interface_of
from ._state import State

__all__ = ["euclidean_interface", "initial_euclidean_state"]

_INITIAL_TOL = 1e-10


def euclidean_interface(system: Any) -> SystemInterface:
    """The interface of a constant-mass vector-space system with a holonomic constraint.

    Raises
    ------
    InputError
        If ``system`` is not a ``ConstrainedSystem`` over a constant-mass ``MechanicalSystem``
        on a vector space with a ``HolonomicConstraint``; the message names the fix.
    """
    iface = interface_of(system)
    if not iface.is_constrained:
        raise InputError(
            f"The discretization-map methods need ConstrainedSystem(MechanicalSystem(...), "
            f"HolonomicConstraint(...)), got {type(system).__name__}. Wrap your system and "
            f"its holonomic constraint in a ConstrainedSystem."
        )
    if iface.group is not None:
        raise InputError(
            "This is a Lie-group system: use LieDiscretizationMapMethod(kind, retraction) "
            "instead of the vector-space discretization-map methods."
        )
    if iface.mass is None or iface.potential_grad is None:
        raise InputError(
            "The vector-space discretization-map methods need a MechanicalSystem with a "
            "constant mass matrix (paper §5). For a q-dependent mass use "
            "ConstrainedPRK."
        )
    if iface.holonomic_phi is None:
        raise InputError(
            f"The discretization-map methods need a HolonomicConstraint φ(q) = 0, got "
            f"{type(iface.constraint).__name__}."
        )
    return iface


def initial_euclidean_state(system: Any, q0: Any, v0: Any, t0: float = 0.0,
                            tol: float = _INITIAL_TOL) -> State:
    """Check ``(q0, v0) ∈ TN`` and return ``State(q0, v0, p0 = M v0)``.

    Raises
    ------
    ConstraintViolationError
        If ``|φ(q0)|`` or ``|G(q0) v0|`` exceeds ``tol``.
    """
    iface = euclidean_interface(system)
    from ..methods._common import vector_initial_data

    # the same shape/batch checks and constraint-set check (one message) as ConstrainedPRK
    q0, v0 = vector_initial_data(system, q0, v0, "the discretization-map method",
                                 constrained=True)
    t0 = as_float(t0, "t0")
    system.check_initial(q0, v0, tol=tol)
    p0 = np.einsum("ij,...j->...i", iface.mass, v0)
    lam0 = np.asarray(iface.multiplier(q0, v0), dtype=float)
    return State(t=t0, q=q0.copy(), v=v0.copy(), p=np.broadcast_to(p0, q0.shape).copy(),
                 lam=lam0, n=0)
