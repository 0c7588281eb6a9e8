"""Systems and constraints on a Lie group (left-trivialized derivatives, multipliers),
and the discrete Lagrangians / discrete Legendre transforms of the DEL method."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    DiscreteEulerLagrange,
    DiscreteLagrangian,
    HolonomicConstraint,
    LieVPRK,
    LinearVelocityConstraint,
    TrivializedLagrangianSystem,
    integrate,
)
from chetaev.discrete_lagrangian.testing import double_pendulum, heavy_top, rounding_bound
from chetaev.liegroups import SO3
from chetaev.rktableaux import lobatto_iiia_iiib

RNG = np.random.default_rng(7)
E3 = np.array([0.0, 0.0, 1.0])


def _general_top(analytic: bool):
    top = heavy_top()
    I = top.inertia

    def ell(R, eta):
        return 0.5 * np.einsum("...i,ij,...j->...", eta, I, eta) - top.V(R)

    def dl_dg(R, eta):
        batch = np.broadcast_shapes(np.shape(R)[:-2], np.shape(eta)[:-1])
        return np.broadcast_to(-top.gradV(R), (*batch, 3))

    def dl_deta(R, eta):
        return eta @ I.T

    if not analytic:
        return TrivializedLagrangianSystem(SO3, ell, dl_dg, dl_deta)
    return top


def test_trivialized_lagrangian_fd_blocks_match_mechanical():
    gen, mech = _general_top(False), _general_top(True)
    assert gen.fd_second_derivatives and not mech.fd_second_derivatives
    R = SO3.random(RNG, 4)
    eta = RNG.normal(size=(4, 3))
    for name in ("D1L", "D2L", "D22L", "D21L", "D11L", "D12L", "energy", "lagrangian"):
        np.testing.assert_allclose(getattr(gen, name)(R, eta), getattr(mech, name)(R, eta),
                                   atol=1e-8, err_msg=name)
    # measured: 5.6e-17 (OPENBLAS_NUM_THREADS=1): margin 18014; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(gen.legendre_inv(R, gen.legendre(R, eta)), eta, rtol=0, atol=1e-12)


def test_potential_hessian_by_fd_matches_closed_form():
    top = heavy_top()
    from chetaev.discrete_lagrangian import TrivializedMechanicalSystem

    fd = TrivializedMechanicalSystem(SO3, top.inertia, top.V, top.gradV)
    R = SO3.random(RNG, 3)
    # measured: 1.5e-11 (OPENBLAS_NUM_THREADS=1): margin 667; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(fd.hessV(R), top.hessV(R), rtol=0, atol=1e-8)


def test_general_trivialized_system_integrates_like_mechanical():
    R0 = SO3.exp(np.array([0.3, -0.2, 0.5]))
    eta0 = np.array([0.5, 1.0, -0.7])
    m = LieVPRK(lobatto_iiia_iiib(2), "cayley")
    a = integrate(_general_top(False), m, R0, eta0, h=0.1, n_steps=10)
    b = integrate(_general_top(True), m, R0, eta0, h=0.1, n_steps=10)
    # measured: 2.2e-16 (OPENBLAS_NUM_THREADS=1): margin 4504; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-12)
    assert a.stats["fd_second_derivatives"] and not b.stats["fd_second_derivatives"]


def _gamma(R):
    return np.einsum("...ji,j->...i", R, E3)


def test_group_holonomic_fd_hessian_matches_closed_form():
    e1 = np.array([1.0, 0.0, 0.0])

    def phi(R):
        return (_gamma(R) @ e1)[..., None]

    def jac(R):
        return np.cross(e1, _gamma(R))[..., None, :]

    def hess(R):
        return (SO3.hat(e1) @ SO3.hat(_gamma(R)))[..., None, :, :]

    a = ConstrainedSystem(heavy_top(), HolonomicConstraint(phi, jac, hess))
    b = ConstrainedSystem(heavy_top(), HolonomicConstraint(phi, jac))
    R = SO3.random(RNG, 5)
    # measured: 8.8e-12 (OPENBLAS_NUM_THREADS=1): margin 1138; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(b.constraint.hessian(R), a.constraint.hessian(R), rtol=0, atol=1e-8)
    # the Jacobian is the left-trivialized derivative of phi
    xi = 1e-6 * np.eye(3)
    fd = (phi(R[:, None] @ SO3.exp(xi)) - phi(R[:, None] @ SO3.exp(-xi)))[..., 0] / 2e-6
    # measured: 5.3e-11 (OPENBLAS_NUM_THREADS=1): margin 19; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(fd, jac(R)[:, 0], rtol=0, atol=1e-9)


def _affine_group_constraint():
    """Spatial vertical angular velocity prescribed: e₃·(R η) = 0.3 sin(θ(R)) (affine)."""
    def A(R):
        return _gamma(R)[..., None, :]  # e₃ᵀ R = Γᵀ

    def a(R):
        return 0.3 * np.sin(R[..., 0, 0])[..., None]

    return LinearVelocityConstraint(A, a)


def test_group_velocity_constraint_multiplier():
    """d/dt φ(g, η) = 0 along the constrained Euler–Poincaré acceleration (paper §6)."""
    sysm = ConstrainedSystem(heavy_top(), _affine_group_constraint())
    R = SO3.random(RNG, 4)
    eta = RNG.normal(size=(4, 3))
    acc = sysm.acceleration(R, eta)
    eps = 1e-6
    plus = sysm.residual(R @ SO3.exp(eps * eta), eta + eps * acc)
    minus = sysm.residual(R @ SO3.exp(-eps * eta), eta - eps * acc)
    # measured: 5.6e-11 (OPENBLAS_NUM_THREADS=1): margin 180; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose((plus - minus) / (2 * eps), 0.0, rtol=0, atol=1e-8)
    # dA by finite differences is the left-trivialized derivative of A
    dA = sysm.constraint.matrix_grad(R)
    xi = 1e-6 * np.eye(3)
    A = sysm.constraint.matrix
    fd = np.moveaxis((A(R[:, None] @ SO3.exp(xi)) - A(R[:, None] @ SO3.exp(-xi))) / 2e-6, 1, -1)
    # measured: 4.8e-11 (OPENBLAS_NUM_THREADS=1): margin 207; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(dA, fd, rtol=0, atol=1e-8)


@pytest.mark.parametrize("kind", ["midpoint", "trapezoidal", "alpha"])
def test_discrete_lagrangian_derivatives_and_legendre_transforms(kind):
    """D1L_d, D2L_d against finite differences of L_d; the DEL equation (6)
    D2L_d(q_{k-1}, q_k) + D1L_d(q_k, q_{k+1}) = 0 along a computed trajectory, i.e. the two
    discrete Legendre transforms agree at every interior node."""
    system = double_pendulum()
    alpha = 0.3 if kind == "alpha" else 0.5
    ld = DiscreteLagrangian(kind, alpha)
    h = 0.1
    q0, q1 = np.array([0.4, -0.3]), np.array([0.45, -0.2])
    eps = 1e-6
    E = np.eye(2)
    d1 = [(ld(system, q0 + eps * e, q1, h) - ld(system, q0 - eps * e, q1, h)) / (2 * eps)
          for e in E]
    d2 = [(ld(system, q0, q1 + eps * e, h) - ld(system, q0, q1 - eps * e, h)) / (2 * eps)
          for e in E]
    # measured: 7.9e-11 (OPENBLAS_NUM_THREADS=1): margin 126; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(ld.D1(system, q0, q1, h), d1, rtol=0, atol=1e-8)
    # measured: 5.2e-11 (OPENBLAS_NUM_THREADS=1): margin 192; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(ld.D2(system, q0, q1, h), d2, rtol=0, atol=1e-8)
    cols = [(ld.D1(system, q0, q1 + eps * e, h) - ld.D1(system, q0, q1 - eps * e, h)) / (2 * eps)
            for e in E]
    # measured: 6.2e-10 (OPENBLAS_NUM_THREADS=1): margin 161; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(ld.D12(system, q0, q1, h), np.stack(cols, -1), rtol=0, atol=1e-7)
    tr = integrate(system, DiscreteEulerLagrange(kind, alpha), q0, [0.2, 0.5], h=h, n_steps=6)
    q = tr.q
    for k in range(1, 6):
        plus = ld.legendre_plus(system, q[k - 1], q[k], h)
        minus = ld.legendre_minus(system, q[k], q[k + 1], h)
        # derived: plus − minus = p_k + D1L_d(q_k, q_{k+1}) (plus is bitwise tr.p[k], below) is
        # the residual DiscreteEulerLagrange.step solves to max(tol, 64 eps)·(1 + max|p_k|)
        # (_del.py, _solver.py), plus the rounding of the 2-term difference. Measured 8.8e-13
        # = 0.51 of this bound (1.7e-12): a solver guarantee, not a sampled spread.
        tol = max(DiscreteEulerLagrange(kind, alpha).newton.tol, 64 * np.finfo(float).eps)
        bound = (tol * (1.0 + np.max(np.abs(tr.p[k])))
                 + rounding_bound(max(np.max(np.abs(plus)), np.max(np.abs(minus))), n_terms=2))
        assert np.max(np.abs(plus - minus)) <= bound, (np.max(np.abs(plus - minus)), bound)
        # measured: exactly 0 (OPENBLAS_NUM_THREADS=1): margin inf; rtol=0 (was the default 1e-7)
        np.testing.assert_allclose(plus, tr.p[k], rtol=0, atol=1e-12)


def test_looped_constraint_given_its_group_by_constrained_system():
    """A ``vectorized=False`` constraint built without ``group=`` and given the group by
    :class:`ConstrainedSystem` (``attrs.evolve``) loops over the batch of group elements
    once: its callables see one ``K × K`` element, not the rows of one (the wrapping was
    applied twice)."""
    from chetaev.discrete_lagrangian import ConstrainedSystem, LinearVelocityConstraint
    from chetaev.discrete_lagrangian.testing import heavy_top
    from chetaev.liegroups import SO3

    seen = []

    def A(R):
        seen.append(np.shape(R))
        return R[2, :].copy()  # Φ = Γ·η, Γ = Rᵀe₃ (one constraint, without its axis)

    con = LinearVelocityConstraint(A, dA=lambda R: SO3.hat(R[2, :]), vectorized=False)
    cs = ConstrainedSystem(heavy_top(), con)
    g = np.stack([SO3.exp(np.array([0.3, 0.2, 0.1])), SO3.exp(np.array([-0.1, 0.4, 0.2]))])
    np.testing.assert_array_equal(cs.constraint.matrix(g), g[:, 2, None, :])
    assert set(seen) == {(3, 3)}
