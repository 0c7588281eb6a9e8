"""Build the :class:`StageModel` of a ``ConstrainedSystem`` (the derivatives the step needs).

Everything comes from the ``chetaev.discrete_lagrangian`` system and constraint
objects: ``D1L``, ``D2L``, ``D11L``, ``D12L``, ``D21L``, ``D22L``, ``legendre_inv``
(mechanical systems), and the constraint's ``residual``, ``dphi_dq``, ``dphi_dv``,
``d2phi_dvdq`` and ``d2phi_dv2`` (analytic when the user supplied them, finite
differences in one broadcast call otherwise; that is the constraint's business).
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import InputError

from ._equations import StageModel

__all__ = ["constraint_dim", "stage_model"]


def constraint_dim(csys) -> int:
    """Number ``m`` of constraints (evaluated once when the constraint does not know it)."""
    m = getattr(csys.constraint, "m", None)
    if m is None:
        n = int(csys.system.n)
        m = np.shape(csys.constraint.residual(np.zeros(n), np.zeros(n)))[-1]
    return int(m)


def stage_model(csys) -> StageModel:
    """The :class:`StageModel` of ``csys`` (a vector-space ``ConstrainedSystem``).

    Raises
    ------
    InputError
        If the system lives on a Lie group or has a holonomic constraint.
    """
    sys_ = getattr(csys, "system", None)
    con = getattr(csys, "constraint", None)
    if sys_ is None or con is None:
        raise InputError(
            "NonholonomicPRK needs a ConstrainedSystem(system, constraint) from "
            f"chetaev.discrete_lagrangian, got {type(csys).__name__}."
        )
    if getattr(sys_, "group", None) is not None:
        raise InputError(
            "NonholonomicPRK works on vector spaces; this system lives on a Lie group. "
            "Use the Lie-group nonholonomic method of chetaev.nh_integrators instead."
        )
    if getattr(con, "is_holonomic", False):
        raise InputError(
            "NonholonomicPRK needs a velocity constraint (LinearVelocityConstraint or "
            "VelocityConstraint), got a HolonomicConstraint. Use the constrained SPRK of "
            "chetaev.discrete_lagrangian for holonomic constraints."
        )
    n = int(sys_.n)
    m = constraint_dim(csys)

    d2q = con.d2phi_dvdq  # [..., a, i, j] = d(dPhi_a/dv_i)/dq_j
    d2v = con.d2phi_dv2

    def phi_v_lam_q(q, v, lam):
        return np.einsum("...aij,...a->...ij", d2q(q, v), lam)

    # the constraint says whether it is A(q)v + a(q) (then it provides matrix/matrix_grad/
    # affine/affine_grad); a duck-typed constraint without the attribute is general
    linear_in_v = bool(getattr(con, "is_linear_in_velocity", False))
    if linear_in_v:
        phi_v_lam_v = None
    else:

        def phi_v_lam_v(q, v, lam):
            return np.einsum("...aij,...a->...ij", d2v(q, v), lam)

    mechanical = bool(getattr(sys_, "is_mechanical", False))
    constant_mass = mechanical and bool(getattr(sys_, "constant_mass", False))
    if constant_mass and hasattr(sys_, "gradV") and hasattr(sys_, "hessV"):
        # fast path, L = v.M v/2 - V(q) with constant M: skip the generic wrappers
        M = np.array(sys_.mass, dtype=float)
        MT, MinvT = M.T.copy(), np.linalg.inv(M).T.copy()
        zero = np.zeros((n, n))
        gradV, hessV = sys_.gradV, sys_.hessV
        return StageModel(
            n=n,
            m=m,
            D1L=lambda q, v: -gradV(q),
            D2L=lambda q, v: v @ MT,
            D11L=lambda q, v: -hessV(q),
            D12L=lambda q, v: np.broadcast_to(zero, (*q.shape[:-1], n, n)),
            D21L=lambda q, v: np.broadcast_to(zero, (*q.shape[:-1], n, n)),
            D22L=lambda q, v: np.broadcast_to(M, (*q.shape[:-1], n, n)),
            phi=con.residual,
            phi_q=con.dphi_dq,
            phi_v=con.dphi_dv,
            phi_v_lam_q=phi_v_lam_q,
            phi_v_lam_v=phi_v_lam_v,
            legendre_inv=lambda q, p: p @ MinvT,
            constant_D21L_zero=True,
            A=con.matrix if linear_in_v else None,
            affine=con.affine if linear_in_v and con.is_affine else None,
            A_grad=con.matrix_grad if linear_in_v else None,
            affine_grad=con.affine_grad if linear_in_v and con.is_affine else None,
            mass=M,
            mass_inv=np.linalg.inv(M),
        )
    return StageModel(
        n=n,
        m=m,
        D1L=sys_.D1L,
        D2L=sys_.D2L,
        D11L=sys_.D11L,
        D12L=sys_.D12L,
        D21L=sys_.D21L,
        D22L=sys_.D22L,
        phi=con.residual,
        phi_q=con.dphi_dq,
        phi_v=con.dphi_dv,
        phi_v_lam_q=phi_v_lam_q,
        phi_v_lam_v=phi_v_lam_v,
        legendre_inv=sys_.legendre_inv if mechanical else None,
        constant_D21L_zero=constant_mass,
        A=con.matrix if linear_in_v else None,
        affine=con.affine if linear_in_v and con.is_affine else None,
        A_grad=con.matrix_grad if linear_in_v else None,
        affine_grad=con.affine_grad if linear_in_v and con.is_affine else None,
    )
