"""The system interface (issue 15): built once per system, explicit capabilities, plain arrays.

The interface's callables are the system's own public methods (or a broadcast of them), so
every comparison below is exact (``np.array_equal``): no arithmetic separates the two sides.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    LinearVelocityConstraint,
    SystemInterface,
    interface_of,
)
from chetaev.discrete_lagrangian import testing as dlt
from chetaev.discrete_lagrangian.testing import assert_rounding_close

RNG = np.random.default_rng(20261126)


def _qv(n, batch=(4, 2)):
    return RNG.standard_normal((*batch, n)), RNG.standard_normal((*batch, n))


def test_built_once_and_cached():
    csys = dlt.harmonic_nonholonomic_particle()
    first = interface_of(csys)
    assert interface_of(csys) is first
    assert interface_of(first) is first  # an interface is its own interface
    other = dlt.harmonic_nonholonomic_particle()
    assert interface_of(other) is not first


def test_cache_released_with_the_system():
    from chetaev.discrete_lagrangian.core import _interface

    csys = dlt.harmonic_nonholonomic_particle()
    interface_of(csys)
    key = id(csys)
    assert key in _interface._CACHE
    del csys
    gc.collect()
    assert key not in _interface._CACHE


def test_linear_constraint_mechanical_system():
    csys = dlt.harmonic_nonholonomic_particle()
    iface = interface_of(csys)
    assert isinstance(iface, SystemInterface)
    assert iface.n == 3 and iface.group is None and iface.system is csys.system
    assert iface.has_second_derivatives
    assert iface.is_constrained and iface.linear_in_velocity
    assert iface.constraint_kind == "linear_velocity"
    assert iface.affine is None and iface.affine_grad is None  # Φ = A(q)v is linear
    np.testing.assert_array_equal(iface.mass, np.eye(3))
    np.testing.assert_array_equal(iface.mass_inv, np.eye(3))
    q, v = _qv(3)
    for name in ("D1L", "D2L", "D11L", "D12L", "D21L", "D22L", "legendre", "legendre_inv"):
        np.testing.assert_array_equal(getattr(iface, name)(q, v), getattr(csys, name)(q, v))
    np.testing.assert_array_equal(iface.A(q), csys.constraint.matrix(q))
    np.testing.assert_array_equal(iface.A_grad(q), csys.constraint.matrix_grad(q))
    np.testing.assert_array_equal(iface.phi(q, v), csys.constraint.residual(q, v))
    np.testing.assert_array_equal(iface.phi_v(q, v), csys.constraint.dphi_dv(q, v))
    np.testing.assert_array_equal(iface.phi_q(q, v), csys.constraint.dphi_dq(q, v))
    np.testing.assert_array_equal(iface.phi_vq(q, v), csys.constraint.d2phi_dvdq(q, v))
    np.testing.assert_array_equal(iface.multiplier(q, v), csys.multiplier(q, v))
    G = iface.metric(q)
    assert G.shape == (4, 2, 3, 3)  # broadcast over the batch axes of q
    np.testing.assert_array_equal(G, np.broadcast_to(np.eye(3), G.shape))


def test_affine_constraint():
    inner = dlt.harmonic_nonholonomic_particle().system
    con = LinearVelocityConstraint(lambda q: np.stack([-q[..., 1], 0 * q[..., 1],
                                                       1 + 0 * q[..., 1]], -1)[..., None, :],
                                   a=lambda q: np.sin(q[..., :1]))
    iface = interface_of(ConstrainedSystem(inner, con))
    q, _ = _qv(3)
    np.testing.assert_array_equal(iface.affine(q), con.affine(q))
    np.testing.assert_array_equal(iface.affine_grad(q), con.affine_grad(q))


def test_metric_of_a_general_lagrangian_is_d22l_at_rest():
    sys_ = dlt.double_pendulum(general=True)
    iface = interface_of(sys_)
    assert not iface.is_constrained and iface.m == 0 and iface.A is None
    assert iface.mass is None  # q-dependent mass matrix
    q, _ = _qv(2)
    np.testing.assert_array_equal(iface.metric(q), sys_.D22L(q, np.zeros_like(q)))


def test_holonomic_constraint():
    csys = dlt.spherical_pendulum()
    iface = interface_of(csys)
    assert iface.constraint_kind == "holonomic" and not iface.linear_in_velocity
    assert iface.A is None
    q, v = _qv(3)
    np.testing.assert_array_equal(iface.phi(q, v), csys.constraint.velocity_residual(q, v))


def test_group_is_carried():
    top = dlt.heavy_top()
    iface = interface_of(top)
    assert iface.group is not None and iface.group is top.group


def test_mechanical_split_and_position_level_holonomic_constraint():
    csys = dlt.spherical_pendulum()
    iface = interface_of(csys)
    q, _ = _qv(3)
    inner, con = csys.system, csys.constraint
    for name, ref in (("potential", inner.V), ("potential_grad", inner.gradV),
                      ("potential_hess", inner.hessV), ("holonomic_phi", con.phi),
                      ("holonomic_jacobian", con.jacobian), ("holonomic_hessian", con.hessian)):
        np.testing.assert_array_equal(getattr(iface, name)(q), ref(q))
    assert iface.inertia is None and iface.inertia_inv is None  # a vector space: see `mass`
    np.testing.assert_array_equal(iface.mass, inner.mass)
    # a velocity constraint has no position level; a general Lagrangian no potential
    nh = interface_of(dlt.harmonic_nonholonomic_particle())
    assert nh.holonomic_phi is nh.holonomic_jacobian is nh.holonomic_hessian is None
    general = interface_of(dlt.double_pendulum(general=True))
    assert general.potential is general.potential_grad is general.potential_hess is None


def test_group_inertia_and_potential():
    top = dlt.heavy_top()
    iface = interface_of(top)
    np.testing.assert_array_equal(iface.inertia, top.inertia)
    np.testing.assert_array_equal(iface.inertia_inv, np.linalg.inv(top.inertia))
    R = np.stack([np.eye(3), top.group.exp(np.array([0.3, -0.2, 0.5]))])
    for name, ref in (("potential", top.V), ("potential_grad", top.gradV),
                      ("potential_hess", top.hessV)):
        np.testing.assert_array_equal(getattr(iface, name)(R), ref(R))


def test_lie_engine_fields():
    """What the Lie PRK engine reads besides the L derivatives: whether the second
    derivatives are closed forms, and ad*_ζ f as a matrix in ζ (from ``ad_basis``)."""
    top = dlt.heavy_top()
    iface = interface_of(top)
    assert iface.analytic_second_derivatives
    assert iface.ad_basis.shape == (3, 3, 3) and not iface.ad_basis.flags.writeable
    for k, e in enumerate(np.eye(3)):
        np.testing.assert_array_equal(iface.ad_basis[k], top.group.ad(e))
    f, zeta = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))
    got = np.einsum("...ij,...j->...i", iface.coadjoint_matrix(f), zeta)
    ref = np.einsum("...ji,...j->...i", top.group.ad(zeta), f)
    # both sides: sums of 3 products of 3-term sums, in another order
    assert_rounding_close(got, ref, n_terms=3, n_ops=2, what="ad*_zeta f")
    flat = interface_of(dlt.henon_heiles())
    assert flat.ad_basis is None and flat.analytic_second_derivatives  # closed-form hessV


class _FirstDerivativesOnly:
    """A duck-typed system with D1L, D2L and n only (no second derivatives, no metric)."""

    n = 2

    def D1L(self, q, v):
        return -q

    def D2L(self, q, v):
        return v


def test_capabilities_are_explicit_fields():
    iface = interface_of(_FirstDerivativesOnly())
    assert not iface.has_second_derivatives and not iface.analytic_second_derivatives
    assert iface.D11L is iface.D12L is iface.D21L is iface.D22L is None
    assert iface.metric is None and iface.legendre_inv is None


def test_not_a_system_raises_naming_the_argument():
    with pytest.raises(InputError, match=r"`system`.*D1L"):
        interface_of(object())
