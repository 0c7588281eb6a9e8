"""Narrow adapters between chetaev.gni and the system classes of chetaev.discrete_lagrangian.

GNI needs from a ``ConstrainedSystem(system, constraint)`` only: ``system.D1L``,
``system.D2L`` (and second derivatives when available), a metric ``G(q)``, and from the
constraint ``dphi_dv(q, v)`` (``mu``) and ``residual(q, v)`` (``mu v + a``).
"""

from __future__ import annotations

import numpy as np

from ._errors import InputError


def metric(system, q: np.ndarray, override=None) -> np.ndarray:
    """The metric ``G(q)`` ``(..., n, n)`` used by the projectors (paper (3)).

    ``override`` (a callable ``q -> G``) wins; otherwise the system's mass matrix ``M(q)``,
    otherwise ``∂²L/∂v²`` at ``v = 0`` (the metric of ``L = ½ vᵀG(q)v − V(q)``).
    """
    q = np.asarray(q, dtype=float)
    if override is not None:
        G = override(q)
    elif hasattr(system, "M"):
        G = system.M(q)
    elif hasattr(system, "D22L"):
        G = system.D22L(q, np.zeros_like(q))
    else:
        raise InputError(
            "GNI needs a metric for the projectors P and Q, but the system has neither a "
            "mass matrix M(q) nor D22L; pass GNI(..., metric=lambda q: G(q)) returning a "
            "symmetric positive definite (..., n, n) array"
        )
    G = np.asarray(G, dtype=float)
    return np.broadcast_to(G, q.shape[:-1] + G.shape[-2:])


def has_second_derivatives(system) -> bool:
    """True when the system provides ``D11L``, ``D12L`` and ``D22L``."""
    return all(hasattr(system, nm) for nm in ("D11L", "D12L", "D22L"))


def second_derivatives(system, q, v, need_qq: bool = True):
    """``(L_qq, L_qv, L_vv)`` at ``(q, v)`` as ``(..., n, n)`` arrays, or ``None``.

    ``L_qv[i, j] = ∂²L/∂q_i ∂v_j``. Uses the system's analytic (or its own finite-difference)
    blocks ``D11L``, ``D12L``, ``D22L``; ``L_qq`` is ``None`` when ``need_qq`` is False.
    """
    if not has_second_derivatives(system):
        return None
    Lqq = np.asarray(system.D11L(q, v), dtype=float) if need_qq else None
    Lqv = np.asarray(system.D12L(q, v), dtype=float)
    return Lqq, Lqv, np.asarray(system.D22L(q, v), dtype=float)


def constraint_parts(constraint, q, n):
    """``(mu, a)`` of a linear or affine velocity constraint ``mu(q) v + a(q) = 0``.

    ``a`` is ``None`` for a linear constraint. Uses ``matrix``/``affine`` of
    ``LinearVelocityConstraint`` when present, else ``dphi_dv`` and ``residual(q, 0)``.
    """
    if hasattr(constraint, "matrix") and hasattr(constraint, "is_affine"):
        mu = np.asarray(constraint.matrix(q), dtype=float)
        a = np.asarray(constraint.affine(q), dtype=float) if constraint.is_affine else None
        return mu, a
    zero = np.zeros((*np.shape(q)[:-1], n))
    mu = np.asarray(constraint.dphi_dv(q, zero), dtype=float)
    a = np.asarray(constraint.residual(q, zero), dtype=float)
    if not np.any(a):
        a = None
    return mu, a
