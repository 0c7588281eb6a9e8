"""Theorems 5.1 and 5.3 and Remark 5.4, checked numerically (paper §5, Thm. 5.1, 5.3)."""

from __future__ import annotations

import numpy as np
from chetaev.dsocs import (
    DSOCS,
    InertiaWheelParameters,
    TwoPointLagrangian,
    VariationalConstraint,
    curvature_particle_dsocs,
    inertia_wheel_dsocs,
    iwp_physical_step,
    iwp_step_coefficients,
)

P = InertiaWheelParameters()


def k_var(q):
    q = np.asarray(q, float)
    return 1.0 + 0.5 * q[..., 0] - 0.3 * q[..., 1]


def _particle(h=0.07, mass=1.3, closed_form=True):
    return curvature_particle_dsocs(k_var, h, mass=mass, closed_form=closed_form)


def test_theorem_5_3_particle_finite_differences(fd_flow_jacobian, fd_dxi):
    """An independent numpy check: m = 1.3,
    h = 0.07, k = 1 + 0.5x − 0.3y, z = (0.1, −0.2, 0.156, −0.123).

    F*Ω − Ω − dξ from central differences (ε = 1e-6 for DF and for dξ) is ~1e-9
    while dξ ≈ 84 (the flow is not symplectic). L_d = L(q0, (q1 − q0)/h) (no factor h).
    """
    ds = _particle()
    z = np.array([0.1, -0.2, 0.156, -0.123])
    q0, q1 = z[:2], z[2:]
    q2, _ = ds.step(q0, q1)
    DF = fd_flow_jacobian(ds, z)
    Om0 = ds.discrete_lagrangian.omega(q0, q1)
    Om1 = ds.discrete_lagrangian.omega(q1, q2)
    dxi = fd_dxi(ds, z)
    defect = DF.T @ Om1 @ DF - Om0 - dxi
    # independent check: 83.9 (3 digits): within half a unit of its last digit (measured 0.027)
    np.testing.assert_allclose(np.abs(dxi).max(), 83.9, rtol=0, atol=0.05)
    assert np.linalg.norm(defect) <= 1e-8 * np.linalg.norm(dxi)
    assert np.linalg.norm(DF.T @ Om1 @ DF - Om0) > 10  # not symplectic
    # the analytic diagnostics agree with the finite differences
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.4e-11 vs allowed 4.1e-07,
    # margin 2.88e+04 (loose)
    np.testing.assert_allclose(ds.flow_jacobian(q0, q1), DF, atol=1e-7 * np.abs(DF).max())
    # measured (1 run(s), threads 1 & unset): worst |diff| 2.1e-09 vs allowed 8.5e-05,
    # margin 4.15e+04 (loose)
    np.testing.assert_allclose(ds.dxi(q0, q1), dxi, atol=1e-6 * np.abs(dxi).max())
    chk = ds.two_form_identity(q0, q1)
    assert np.linalg.norm(chk.defect) <= 1e-10 * np.linalg.norm(chk.dxi)
    # the generic Newton DSOCS gives the same objects
    gen = _particle(closed_form=False)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.4e-11 vs allowed 4.1e-07,
    # margin 2.88e+04 (loose)
    np.testing.assert_allclose(gen.flow_jacobian(q0, q1), DF, atol=1e-7 * np.abs(DF).max())


def test_theorem_5_3_inertia_wheel(fd_flow_jacobian, fd_dxi):
    """An independent numpy check:
    IWP regular branch, h = 0.1, z = (0.3, 1.0, 0.31, 1.2); relative ~1e-9."""
    ds = inertia_wheel_dsocs(0.1, P)
    z = np.array([0.3, 1.0, 0.31, 1.2])
    q0, q1 = z[:2], z[2:]
    q2, _ = ds.step(q0, q1)
    DF = fd_flow_jacobian(ds, z)
    dxi = fd_dxi(ds, z)
    Om0 = ds.discrete_lagrangian.omega(q0, q1)
    Om1 = ds.discrete_lagrangian.omega(q1, q2)
    defect = DF.T @ Om1 @ DF - Om0 - dxi
    # independent check: 2192 (integer): within half a unit (measured 0.29)
    np.testing.assert_allclose(np.abs(dxi).max(), 2192, rtol=0, atol=0.5)
    assert np.linalg.norm(defect) <= 1e-8 * np.linalg.norm(dxi)
    chk = ds.two_form_identity(q0, q1)
    assert np.linalg.norm(chk.defect) <= 1e-10 * np.linalg.norm(chk.dxi)
    # Remark 5.4: ξ vanishes on D_V = span{∂/∂θ}: ξ = −u_d dψ1
    xi = ds.xi(q0, q1)
    # measured (1 run(s), threads 1 & unset): worst 0 vs 7.02e-07, margin ∞
    assert abs(xi[2]) <= 1e-9 * abs(xi[3])


def test_theorem_5_1_rank_conditions():
    ds = _particle(closed_form=False)
    z = np.array([0.1, -0.2, 0.156, -0.123])
    cond = ds.check_flow_conditions(z[:2], z[2:])
    assert cond.ok and int(cond.rank) == 2
    # IWP first step of the paper (h = 0.1): regular
    h = 0.1
    w = inertia_wheel_dsocs(h, P)
    q0, q1 = np.array([0.5, 0.0]), np.array([0.5, 0.05])
    cond = w.check_flow_conditions(q0, q1)
    assert cond.ok
    J2 = w.jacobians(q0, q1, w.step(q0, q1)[0])[2]
    # rows (8d), −(9): |det| = 2.08e9 as in an independent numpy check
    # 2.08e9 printed to 3 digits: within half a unit of the last (5e6; measured 4.19e6)
    np.testing.assert_allclose(abs(np.linalg.det(J2)), 2.08e9, rtol=0, atol=5e6)


def test_theorem_5_1_fails_where_the_two_roots_coincide():
    """The paper's "not sufficiently apart" case: G = R = 0 at the root ⇒ D_3 not injective."""
    h = 0.1
    q1 = np.array([0.2, 3.0])
    dth = 0.01
    # choose Δψ so that the G = 0 root solves R = 0 too: G0 = −D c0 / (I/h²)
    c = iwp_step_coefficients(q1 - [dth, 0.0], q1, h, P)
    c1 = iwp_step_coefficients(q1 - [dth, 1.0], q1, h, P)  # G0 is affine in Δψ
    target = -c["D"] * c["c0"] / (P.I / h**2)
    dpsi = (target - c["G0"]) / (c1["G0"] - c["G0"])
    q0 = q1 - np.array([dth, dpsi])
    q2 = iwp_physical_step(q0, q1, h, P)
    w = inertia_wheel_dsocs(h, P)
    cond = w.check_flow_conditions(q0, q1, q2)
    assert not cond.injective_forward
    # measured (1 run(s), threads 1 & unset): worst 4.06e-11 vs 0.00889, margin 2.19e+08 (loose)
    assert cond.sv_forward[-1] <= 1e-8 * cond.sv_forward[0]


def _pendulum_potential(n):
    def U(q):
        return -np.cos(q[..., 0]) + 0.1 * q[..., 1] ** 2 * np.sin(q[..., 0])

    def dU(q):
        return np.stack([np.sin(q[..., 0]) + 0.1 * q[..., 1] ** 2 * np.cos(q[..., 0]),
                         0.2 * q[..., 1] * np.sin(q[..., 0])], -1)

    return U, dU


def test_remark_5_4_unconstrained_dsocs_is_symplectic_and_is_del(fd_flow_jacobian):
    """D_K = Q³, D_V = TQ: the DSOCS step is the DEL step (Störmer–Verlet) and symplectic."""
    h = 0.1
    M = np.array([[2.0, 0.3], [0.3, 1.0]])
    U, dU = _pendulum_potential(2)
    Ld = TwoPointLagrangian.mechanical(M, dU, h, potential=U)
    ds = DSOCS(Ld, None, VariationalConstraint(
        basis=lambda q0, q1, q2: np.broadcast_to(np.eye(2), (*np.shape(q1)[:-1], 2, 2)),
        depends_on=()), h=h)
    q0, q1 = np.array([0.4, -0.3]), np.array([0.45, -0.25])
    q2, _ = ds.step(q0, q1)
    # measured (1 run(s), threads 1 & unset): worst |diff| 2.8e-17 vs allowed 2e-08,
    # margin 7.17e+08 (loose)
    np.testing.assert_allclose(q2, 2 * q1 - q0 - h**2 * np.linalg.solve(M, dU(q1)), atol=1e-13)
    z = np.concatenate([q0, q1])
    DF = fd_flow_jacobian(ds, z)
    Om = Ld.omega(q0, q1)
    # measured (1 run(s), threads 1 & unset): worst 7.8e-09 vs 3.22e-06, margin 413
    assert np.linalg.norm(DF.T @ Ld.omega(q1, q2) @ DF - Om) <= 1e-8 * np.linalg.norm(Om)
    chk = ds.two_form_identity(q0, q1)
    # measured (1 run(s), threads 1 & unset): worst 1.18e-09 vs 3.22e-08, margin 27.3
    assert np.linalg.norm(chk.symplectic_defect) <= 1e-10 * np.linalg.norm(chk.omega)
    # measured (1 run(s), threads 1 & unset): worst 4.63e-14 vs 3.22e-08, margin 6.95e+05 (loose)
    assert np.linalg.norm(chk.dxi) <= 1e-10 * np.linalg.norm(chk.omega)
