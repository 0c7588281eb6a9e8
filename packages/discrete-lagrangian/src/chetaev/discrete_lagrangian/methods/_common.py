"""Helpers shared by the integrators: initial-data checks and tableau checks."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._util._errors import HypothesisError, InputError
from .._util._validation import as_vector
from ..core._prk import PRKCoefficients

__all__ = [
    "check_symplectic",
    "vector_initial_data",
]


def vector_initial_data(system: Any, q0: Any, v0: Any, method: str,
                        constrained: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Validate (q0, v0) for a vector-space method; return broadcast float arrays.

    ``constrained``: True requires a ConstrainedSystem, False forbids it, None allows both.
    """
    if getattr(system, "group", None) is not None:
        raise InputError(
            f"{method} integrates systems on vector spaces; this system lives on a Lie group. "
            "Use LieVPRK instead."
        )
    has_c = hasattr(system, "constraint")
    if constrained is True and not has_c:
        raise InputError(
            f"{method} needs a ConstrainedSystem(system, HolonomicConstraint(...)); got an "
            f"unconstrained {type(system).__name__}. Use VPRK for unconstrained systems."
        )
    if constrained is False and has_c:
        raise InputError(
            f"{method} integrates unconstrained systems; for a holonomic constraint use "
            "ConstrainedPRK, for a nonholonomic one chetaev.nh_integrators."
        )
    n = system.n
    q0 = as_vector(q0, "q0", n)
    v0 = as_vector(v0, "v0", n)
    try:
        batch = np.broadcast_shapes(q0.shape[:-1], v0.shape[:-1])
    except ValueError:
        raise InputError(
            f"{method}: q0 and v0 batch shapes {q0.shape[:-1]} and {v0.shape[:-1]} do not "
            "broadcast; pass one velocity per initial configuration (same leading axes)."
        ) from None
    return (np.array(np.broadcast_to(q0, (*batch, n))),
            np.array(np.broadcast_to(v0, (*batch, n))))


def check_symplectic(coeffs: PRKCoefficients, method: str, tol: float = 1e-12) -> None:
    """Raise :class:`HypothesisError` unless b̂ = b and b_i â_ij + b̂_j a_ji = b_i b̂_j
    (the symplecticity condition of Theorem 4.2)."""
    b, bh, a, ah = coeffs.b, coeffs.bhat, coeffs.a, coeffs.ahat
    r1 = float(np.max(np.abs(b - bh)))
    r2 = float(np.max(np.abs(b[:, None] * ah + bh[None, :] * a.T - np.outer(b, bh))))
    if r1 > tol or r2 > tol:
        raise HypothesisError(
            f"{method} needs a symplectic partitioned pair (Theorem 4.2: b̂ = b and "
            f"b_i â_ij + b̂_j a_ji = b_i b̂_j); {coeffs.name or 'this pair'} violates it by "
            f"{max(r1, r2):.2e}. Pass a single Tableau (it is paired with its symplectic "
            "conjugate) or lobatto_iiia_iiib(s)."
        )
