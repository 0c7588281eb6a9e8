"""Build the :class:`StageModel` of a ``ConstrainedSystem`` (the derivatives the step needs).

Everything comes from the system's :class:`~chetaev.discrete_lagrangian.SystemInterface`
(``interface_of``, issue 15; the projection described in its Notes): ``D1L`` … ``D22L``,
``legendre_inv`` (mechanical systems), ``mass``/``mass_inv`` and ``potential_grad``/
``potential_hess`` (the constant-mass fast path), and the constraint's ``phi``, ``phi_q``,
``phi_v``, ``phi_vq``, ``phi_vv`` (analytic when the user supplied them, finite differences
in one broadcast call otherwise; that is the constraint's business) and ``A``, ``affine`` and
their gradients.
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import InputError, interface_of

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
    iface = interface_of(csys)
    n = iface.n
    m = constraint_dim(csys) if iface.m is None else int(iface.m)

    d2q = iface.phi_vq  # [..., a, i, j] = d(dPhi_a/dv_i)/dq_j
    d2v = iface.phi_vv

    def phi_v_lam_q(q, v, lam):
        return np.einsum("...aij,...a->...ij", d2q(q, v), lam)

    # A(q)v + a(q) (then A, its gradient and the affine term are set); a general constraint
    # has a v-dependent phi_v
    linear_in_v = iface.linear_in_velocity
    if linear_in_v:
        phi_v_lam_v = None
    else:

        def phi_v_lam_v(q, v, lam):
            return np.einsum("...aij,...a->...ij", d2v(q, v), lam)

    mechanical = iface.potential is not None  # L = v.M(q)v/2 - V(q)
    constant_mass = mechanical and iface.mass is not None
    if constant_mass and iface.potential_grad is not None and iface.potential_hess is not None:
        # fast path, L = v.M v/2 - V(q) with constant M: skip the generic wrappers
        M = iface.mass
        MT, MinvT = M.T.copy(), iface.mass_inv.T.copy()
        zero = np.zeros((n, n))
        gradV, hessV = iface.potential_grad, iface.potential_hess
        return StageModel(
            n=n,
            m=m,
            D1L=lambda q, v: -gradV(q),
            D2L=lambda q, v: v @ MT,
            D11L=lambda q, v: -hessV(q),
            D12L=lambda q, v: np.broadcast_to(zero, (*q.shape[:-1], n, n)),
            D21L=lambda q, v: np.broadcast_to(zero, (*q.shape[:-1], n, n)),
            D22L=lambda q, v: np.broadcast_to(M, (*q.shape[:-1], n, n)),
            phi=iface.phi,
            phi_q=iface.phi_q,
            phi_v=iface.phi_v,
            phi_v_lam_q=phi_v_lam_q,
            phi_v_lam_v=phi_v_lam_v,
            legendre_inv=lambda q, p: p @ MinvT,
            constant_D21L_zero=True,
            A=iface.A,
            affine=iface.affine,
            A_grad=iface.A_grad,
            affine_grad=iface.affine_grad,
            mass=M,
            mass_inv=iface.mass_inv,
        )
    return StageModel(
        n=n,
        m=m,
        D1L=iface.D1L,
        D2L=iface.D2L,
        D11L=iface.D11L,
        D12L=iface.D12L,
        D21L=iface.D21L,
        D22L=iface.D22L,
        phi=iface.phi,
        phi_q=iface.phi_q,
        phi_v=iface.phi_v,
        phi_v_lam_q=phi_v_lam_q,
        phi_v_lam_v=phi_v_lam_v,
        legendre_inv=iface.legendre_inv if mechanical else None,
        constant_D21L_zero=constant_mass,
        A=iface.A,
        affine=iface.affine,
        A_grad=iface.A_grad,
        affine_grad=iface.affine_grad,
    )
