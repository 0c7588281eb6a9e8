"""Continuous systems: derivatives, Legendre maps, multipliers, input checks."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    ConstraintViolationError,
    HolonomicConstraint,
    InputError,
    LagrangianSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
    SingularMatrixError,
    VelocityConstraint,
)
from chetaev.discrete_lagrangian.testing import (
    cartesian_pendulum,
    double_pendulum,
    henon_heiles,
)

RNG = np.random.default_rng(1)


@pytest.mark.parametrize("batch", [(), (3,), (2, 4)])
def test_fd_second_derivatives_match_analytic(batch):
    exact = double_pendulum(general=True, analytic=True)
    fd = double_pendulum(general=True, analytic=False)
    assert fd.fd_second_derivatives and not exact.fd_second_derivatives
    q = RNG.normal(size=(*batch, 2))
    v = RNG.normal(size=(*batch, 2))
    for name in ("D22L", "D21L", "D11L", "D12L"):
        a = getattr(exact, name)(q, v)
        b = getattr(fd, name)(q, v)
        assert a.shape == (*batch, 2, 2)
        np.testing.assert_allclose(b, a, atol=1e-8, err_msg=name)


def test_mechanical_q_dependent_mass_matches_general_lagrangian():
    mech = double_pendulum()
    gen = double_pendulum(general=True)
    q = RNG.normal(size=(5, 2))
    v = RNG.normal(size=(5, 2))
    for name in ("lagrangian", "D1L", "D2L", "D22L", "D21L", "D11L", "energy"):
        np.testing.assert_allclose(getattr(mech, name)(q, v), getattr(gen, name)(q, v),
                                   atol=1e-8, err_msg=name)
    p = mech.legendre(q, v)
    # measured: 2.8e-16 (OPENBLAS_NUM_THREADS=1): margin 360; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(mech.legendre_inv(q, p), v, rtol=0, atol=1e-13)
    # measured: 2.8e-16 (OPENBLAS_NUM_THREADS=1): margin 3603; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(gen.legendre_inv(q, p), v, rtol=0, atol=1e-12)


def test_mass_grad_by_finite_differences():
    exact = double_pendulum()
    M, V, dV, d2V = exact.mass, exact._potential, exact._potential_grad, exact._potential_hess
    fd = MechanicalSystem(M, V, dV, d2V, n=2)
    assert fd.fd_second_derivatives
    q = RNG.normal(size=(4, 2))
    # measured: 1.9e-11 (OPENBLAS_NUM_THREADS=1): margin 52; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(fd.dM(q), exact.dM(q), rtol=0, atol=1e-9)


def test_constant_mass_legendre_energy_exact():
    sysm = henon_heiles()
    q = RNG.normal(size=(7, 2))
    v = RNG.normal(size=(7, 2))
    assert sysm.is_mechanical and sysm.constant_mass
    np.testing.assert_array_equal(sysm.legendre_inv(q, sysm.legendre(q, v)), v)
    T, V = 0.5 * np.sum(v * v, -1), sysm.V(q)
    E = T + V
    # E = T + V cancels where V < 0 (Hénon–Heiles), so an rtol on E is no bound: each side is
    # a few rounded operations (≤ 8) on terms of size T + |V|, hence 8 eps (T + |V|).
    tol = 8 * np.finfo(float).eps * (T + np.abs(V))
    assert np.all(np.abs(sysm.energy(q, v) - E) <= tol)
    # mixin energy formula agrees: v·∂L/∂v − L = 2T − (T − V), terms of size 3T + |V|
    mixin = np.einsum("...i,...i", v, sysm.D2L(q, v)) - sysm.lagrangian(q, v)
    assert np.all(np.abs(mixin - E) <= 8 * np.finfo(float).eps * (3 * T + np.abs(V)))


def test_singular_mass_rejected():
    with pytest.raises(SingularMatrixError, match="positive definite"):
        MechanicalSystem(np.diag([1.0, 0.0]), lambda q: 0.0, lambda q: 0 * q)


def test_nonsymmetric_mass_rejected():
    with pytest.raises(InputError, match="symmetric"):
        MechanicalSystem(np.array([[1.0, 0.5], [0.0, 1.0]]), lambda q: 0.0, lambda q: 0 * q)


def test_callable_mass_without_n_takes_the_dimension_from_the_data():
    # issue 14 item 5: the pinned MechanicalSystem(mass, potential, potential_grad) works
    sys_ = MechanicalSystem(lambda q: np.broadcast_to(np.eye(2), (*np.shape(q), 2)),
                            lambda q: 0.0 * q[..., 0], lambda q: 0 * q)
    assert sys_.n is None
    assert sys_.M(np.zeros(2)).shape == (2, 2)
    assert sys_.n == 2


def test_non_vectorized_callables_are_looped():
    calls = []

    def V(q):
        assert q.shape == (2,)
        calls.append(1)
        return float(q @ q)

    def dV(q):
        assert q.shape == (2,)
        return 2 * q

    s = MechanicalSystem(np.eye(2), V, dV, vectorized=False)
    q = RNG.normal(size=(3, 2))
    np.testing.assert_allclose(s.V(q), np.sum(q * q, -1))
    # measured: 2.4e-11 (OPENBLAS_NUM_THREADS=1): margin 422; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(s.hessV(q), np.broadcast_to(2 * np.eye(2), (3, 2, 2)), rtol=0,
                               atol=1e-8)


def test_pendulum_multiplier_closed_form():
    sysm = cartesian_pendulum()
    th = RNG.uniform(-2, 2, size=6)
    om = RNG.normal(size=6)
    q = np.stack([np.sin(th), -np.cos(th)], -1)
    v = om[:, None] * np.stack([np.cos(th), np.sin(th)], -1)
    lam = sysm.multiplier(q, v)
    # radial balance: λ = g q_2 − |v|² for Φ = (|q|² − 1)/2, g = 1
    # measured: 4.4e-16 (OPENBLAS_NUM_THREADS=1): margin 23; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(lam[..., 0], q[:, 1] - np.sum(v * v, -1), rtol=0, atol=1e-14)


def _knife_edge(kind):
    """Particle in a potential with a nonholonomic (knife-edge type) constraint on R³."""
    def V(q):
        return 0.5 * np.sum(q * q, -1) + 0.1 * q[..., 0] ** 3

    def dV(q):
        g = q.copy()
        g[..., 0] += 0.3 * q[..., 0] ** 2
        return g

    sysm = MechanicalSystem(np.diag([1.0, 2.0, 0.5]), V, dV)

    def A(q):  # v3 - q2 v1 = 0 (plus affine term sin q1)
        z = np.zeros_like(q[..., 0])
        return np.stack([-q[..., 1], z, np.ones_like(z)], -1)[..., None, :]

    def a(q):
        return np.sin(q[..., 0])[..., None]

    if kind == "linear":
        c = LinearVelocityConstraint(A)
    elif kind == "affine":
        c = LinearVelocityConstraint(A, a)
    else:
        def phi(q, v):
            return np.einsum("...ai,...i->...a", A(q), v) + a(q) + 0.1 * v[..., :1] ** 2

        def dq(q, v):
            z = np.zeros_like(q[..., 0])
            return np.stack([np.cos(q[..., 0]), -v[..., 0], z], -1)[..., None, :]

        def dv(q, v):
            z = 0 * v[..., 0]
            return A(q) + np.stack([0.2 * v[..., 0], z, z], -1)[..., None, :]

        c = VelocityConstraint(phi, dq, dv)
    return ConstrainedSystem(sysm, c)


@pytest.mark.parametrize("kind", ["linear", "affine", "general"])
def test_multiplier_keeps_constraint_derivative_zero(kind):
    """d/dt Φ(q, v) = Φ_q v + Φ_v v̇ = 0 along the constrained acceleration (paper §3)."""
    sysm = _knife_edge(kind)
    q = RNG.normal(size=(5, 3))
    v = RNG.normal(size=(5, 3))
    acc = sysm.acceleration(q, v)
    # directional derivative by central differences in time
    eps = 1e-6
    d = (sysm.residual(q + eps * v, v + eps * acc) - sysm.residual(q - eps * v, v - eps * acc)) / (
        2 * eps)
    # measured: 2.2e-10 (OPENBLAS_NUM_THREADS=1): margin 45; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(d, 0.0, rtol=0, atol=1e-8)
    # and the equations of motion hold with the sign convention (∂Φ/∂v)ᵀλ
    lam = sysm.multiplier(q, v)
    lhs = acc @ sysm.system.mass.T - sysm.D1L(q, v)
    rhs = np.einsum("...ai,...a->...i", sysm.constraint.dphi_dv(q, v), lam)
    # measured: 1.1e-16 (OPENBLAS_NUM_THREADS=1): margin 9007; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=1e-12)


def test_holonomic_fd_hessian_matches():
    a = cartesian_pendulum(3, analytic_hessian=True)
    b = cartesian_pendulum(3, analytic_hessian=False)
    q = RNG.normal(size=(4, 3))
    # measured: 1.3e-11 (OPENBLAS_NUM_THREADS=1): margin 79; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(b.constraint.hessian(q), a.constraint.hessian(q), rtol=0, atol=1e-9)


def test_check_initial_messages():
    sysm = cartesian_pendulum()
    sysm.check_initial(np.array([0.0, -1.0]), np.array([0.3, 0.0]))
    with pytest.raises(ConstraintViolationError, match=r"Project q0 onto the constraint set"):
        sysm.check_initial(np.array([0.0, -1.1]), np.array([0.3, 0.0]))
    with pytest.raises(ConstraintViolationError, match=r"not tangent.*Project v0"):
        sysm.check_initial(np.array([0.0, -1.0]), np.array([0.3, 0.1]))
    nh = _knife_edge("linear")
    with pytest.raises(ConstraintViolationError, match=r"Choose v0 with"):
        nh.check_initial(np.zeros(3), np.array([0.0, 0.0, 1.0]))


def test_redundant_constraints_are_singular():
    sysm = MechanicalSystem(np.eye(2), lambda q: 0 * q[..., 0], lambda q: 0 * q)
    c = LinearVelocityConstraint(np.array([[1.0, 0.0], [2.0, 0.0]]))
    cs = ConstrainedSystem(sysm, c)
    with pytest.raises(SingularMatrixError, match="not independent"):
        cs.multiplier(np.zeros(2), np.zeros(2))


def test_constrained_system_rejects_non_systems():
    with pytest.raises(InputError, match="Lagrangian system"):
        ConstrainedSystem(object(), HolonomicConstraint(lambda q: q, lambda q: q))


def test_lagrangian_system_requires_callables():
    with pytest.raises(InputError, match="callable"):
        LagrangianSystem(2, 1.0, lambda q, v: q, lambda q, v: v)


def test_velocity_constraint_second_derivatives_by_fd():
    """VelocityConstraint's FD blocks agree with the analytic ones of the same linear
    constraint written as a LinearVelocityConstraint (dA given in closed form)."""
    def A(q):
        z = np.zeros_like(q[..., 0])
        return np.stack([np.sin(q[..., 1]), q[..., 0] * q[..., 2], np.ones_like(z)], -1)[
            ..., None, :]

    def dA(q):
        z = np.zeros_like(q[..., 0])
        row0 = np.stack([z, np.cos(q[..., 1]), z], -1)
        row1 = np.stack([q[..., 2], z, q[..., 0]], -1)
        row2 = np.stack([z, z, z], -1)
        return np.stack([row0, row1, row2], -2)[..., None, :, :]

    lin = LinearVelocityConstraint(A, dA=dA)
    gen = VelocityConstraint(
        lambda q, v: np.einsum("...ai,...i->...a", A(q), v),
        lambda q, v: np.einsum("...aij,...i->...aj", dA(q), v),
        lambda q, v: A(q) + 0 * v[..., None, :],
    )
    q = RNG.normal(size=(4, 3))
    v = RNG.normal(size=(4, 3))
    # measured: 1.1e-11 (OPENBLAS_NUM_THREADS=1): margin 90; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(gen.d2phi_dvdq(q, v), lin.d2phi_dvdq(q, v), rtol=0, atol=1e-9)
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1): margin inf; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(gen.d2phi_dv2(q, v), 0.0, rtol=0, atol=1e-9)
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1): margin inf; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(lin.dphi_dq(q, v), gen.dphi_dq(q, v), rtol=0, atol=1e-14)
    fd = LinearVelocityConstraint(A)  # dA by finite differences
    # measured: 1.1e-11 (OPENBLAS_NUM_THREADS=1): margin 90; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(fd.matrix_grad(q), lin.matrix_grad(q), rtol=0, atol=1e-9)
