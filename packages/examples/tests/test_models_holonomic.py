"""Models of the holonomic papers: planar and spherical pendulum, heavy top."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.examples.models import heavy_top, planar_pendulum, spherical_pendulum
from chetaev.liegroups import SO3


# ------------------------------------------------------------------------------ planar
def test_planar_initial_data_on_the_constraint_and_tangent():
    q0, v0 = planar_pendulum.initial_cartesian()
    sysc = planar_pendulum.cartesian_system()
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(sysc.residual(q0, v0)).max() < 1e-15
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(sysc.velocity_residual(q0, v0)).max() < 1e-15
    th, om = planar_pendulum.angle_from_cartesian(q0, v0)
    assert th == pytest.approx(planar_pendulum.THETA0, abs=1e-15)
    assert om == pytest.approx(planar_pendulum.OMEGA0, abs=1e-15)


def test_planar_energies_agree_and_match_the_systems():
    th = np.linspace(-3.0, 3.0, 7)
    om = np.linspace(-2.0, 1.5, 7)
    q, v = planar_pendulum.cartesian_from_angle(th, om)
    Ea = planar_pendulum.energy_angle(th, om)
    # measured (1 run(s), threads 1 & unset): worst |diff| 8.9e-16 vs allowed 5.1e-07,
    # margin 5.73e+08 (loose)
    np.testing.assert_allclose(planar_pendulum.energy_cartesian(q, v), Ea, atol=1e-13)
    # measured (1 run(s), threads 1 & unset): worst |diff| 8.9e-16 vs allowed 5.1e-07,
    # margin 5.73e+08 (loose)
    np.testing.assert_allclose(planar_pendulum.cartesian_system().energy(q, v), Ea, atol=1e-13)
    # measured (1 run(s), threads 1 & unset): worst |diff| 0 vs allowed 1.2e-06, margin ∞
    np.testing.assert_allclose(planar_pendulum.angle_system().energy(th[:, None], om[:, None]),
                               Ea, atol=1e-13)


def test_planar_reference_solves_the_ode_and_conserves_energy():
    t = np.linspace(0.0, 3.0, 301)
    th, om = planar_pendulum.reference_angle(t)
    # θ̈ = −g sin θ by central differences of θ̇
    acc = (om[2:] - om[:-2]) / (t[2] - t[0])
    # Central-difference error ≤ dt²/6·max|θ⁽⁴⁾| (Taylor, derived), θ⁽⁴⁾ = g sin θ (g cos θ + θ̇²)
    # (ℓ = 1); ×1.1 for the maximum over the nodes instead of the interval (dt = 0.01).
    # Measured 1.294e-3 against the bound: the truncation error itself, DOP853 error/dt ≪.
    dt, g = t[1] - t[0], planar_pendulum.G
    d4 = np.abs(g * np.sin(th) * (g * np.cos(th) + om**2)).max()
    np.testing.assert_allclose(acc, -g * np.sin(th[1:-1]), rtol=0, atol=1.1 * dt**2 / 6 * d4)
    E = planar_pendulum.energy_angle(th, om)
    # DOP853 at rtol = atol = 1e-13 (scalar code, no BLAS: the same on every thread setting):
    # measured 5.26e-12, a deterministic solver-tolerance error; 1e-11 leaves margin 1.9 ≥ 1.5.
    assert np.ptp(E) < 1e-11


@pytest.mark.parametrize(("theta0", "omega0"), [(1.0, 0.5), (1.0, -0.5), (-2.0, 1.3), (0.3, 0.0)])
def test_planar_exact_elliptic_solution_matches_the_reference(theta0, omega0):
    t = np.linspace(0.0, 4.0, 41)
    th, om = planar_pendulum.exact_angle(t, theta0, omega0)
    th_r, om_r = planar_pendulum.reference_angle(t, theta0, omega0)
    # measured (4 run(s), threads 1 & unset): worst |diff| 3.3e-14 vs allowed 1.3e-09,
    # margin 4.03e+04 (loose)
    np.testing.assert_allclose(th, th_r, atol=1e-10)
    # measured (4 run(s), threads 1 & unset): worst |diff| 3.7e-13 vs allowed 8.6e-09,
    # margin 2.33e+04 (loose)
    np.testing.assert_allclose(om, om_r, atol=1e-9)


def test_planar_exact_solution_refuses_rotations():
    with pytest.raises(ValueError, match="librations only"):
        planar_pendulum.exact_angle([0.0, 1.0], 0.0, 10.0)


# ------------------------------------------------------------------------------ spherical
@pytest.mark.parametrize("kind", spherical_pendulum.POTENTIALS)
def test_spherical_potential_derivatives_by_finite_differences(kind):
    V, dV, d2V = spherical_pendulum.potential(kind)
    q = np.array([0.3, -0.7, 0.4])
    eps = 1e-6
    E = np.eye(3)
    g_fd = np.array([(V(q + eps * e) - V(q - eps * e)) / (2 * eps) for e in E])
    H_fd = np.array([(dV(q + eps * e) - dV(q - eps * e)) / (2 * eps) for e in E])
    # measured (2 run(s), threads 1 & unset): worst |diff| 2.1e-10 vs allowed 2.3e-08, margin 107
    np.testing.assert_allclose(dV(q), g_fd, atol=1e-8)
    # measured (2 run(s), threads 1 & unset): worst |diff| 1.3e-11 vs allowed 5.2e-08,
    # margin 4.03e+03 (loose)
    np.testing.assert_allclose(d2V(q), H_fd, atol=1e-8)
    assert dV(np.zeros((4, 2, 3))).shape == (4, 2, 3)


def test_spherical_charts_round_trip_and_initial_data():
    y = np.array([[1.0, 0.3, -0.2, 0.7], [2.2, -1.0, 0.5, -0.4]])
    q, v = spherical_pendulum.cartesian_from_spherical(y)
    # measured (1 run(s), threads 1 & unset): worst |diff| 0 vs allowed 1e-07, margin ∞
    np.testing.assert_allclose(np.sum(q * q, -1), 1.0, atol=1e-15)
    # measured (1 run(s), threads 1 & unset): worst |diff| 4.2e-17 vs allowed 1e-15, margin 24
    np.testing.assert_allclose(np.sum(q * v, -1), 0.0, atol=1e-15)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.1e-16 vs allowed 7e-08,
    # margin 6.31e+08 (loose)
    np.testing.assert_allclose(spherical_pendulum.spherical_from_cartesian(q, v), y, atol=1e-14)
    sysc = spherical_pendulum.cartesian_system()
    Q0, V0 = spherical_pendulum.Q0, spherical_pendulum.V0
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(sysc.residual(Q0, V0)).max() < 1e-15
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(sysc.velocity_residual(Q0, V0)).max() < 1e-15


@pytest.mark.parametrize("kind", spherical_pendulum.POTENTIALS)
def test_spherical_intrinsic_reference_invariants(kind):
    t = np.linspace(0.0, 2.0, 41)
    q, v = spherical_pendulum.reference_spherical(t, kind=kind)
    E = spherical_pendulum.energy(q, v, kind)
    # measured (3 runs of this line, threads 1 & unset): worst 2.84e-12 vs 1e-10, margin 35.2
    assert np.ptp(E) < 1e-10
    Lz = spherical_pendulum.angular_momentum_z(q, v)
    if kind == "linear":
        # measured (1 run(s), threads 1 & unset): worst 7.16e-13 vs 1e-10, margin 140
        assert np.ptp(Lz) < 1e-10
    else:
        # measured (1 run(s), threads 1 & unset): worst 0.57 vs 0.01, margin 57
        assert np.ptp(Lz) > 1e-2  # broken symmetry: the test of L_z can fail


def test_spherical_bad_potential():
    with pytest.raises(ValueError, match="potential must be one of"):
        spherical_pendulum.cartesian_system("cubic")


# ------------------------------------------------------------------------------ heavy top
def test_heavy_top_initial_data_of_all_formulations():
    s6 = heavy_top.constrained_system()
    g0, xi0 = heavy_top.initial_constrained()
    assert g0.shape == (7, 7) and xi0.shape == (6,)
    # measured (1 run(s), threads 1 & unset): worst 6.94e-18 vs 1e-15, margin 144
    assert abs(s6.residual(g0, xi0)).max() < 1e-15
    # measured (1 run(s), threads 1 & unset): worst 5.55e-17 vs 1e-15, margin 18
    assert abs(s6.velocity_residual(g0, xi0)).max() < 1e-15
    s9 = heavy_top.matrix_system()
    q9, v9 = heavy_top.initial_matrix()
    # measured (1 run(s), threads 1 & unset): worst 1.11e-16 vs 1e-15, margin 9.01
    assert abs(s9.residual(q9, v9)).max() < 1e-15
    # measured (1 run(s), threads 1 & unset): worst 5.55e-17 vs 1e-14, margin 180
    assert abs(s9.velocity_residual(q9, v9)).max() < 1e-14
    p9 = np.kron(np.eye(3), heavy_top.J_MATRIX) @ v9
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.7e-16 vs allowed 5e-08,
    # margin 3e+08 (loose)
    np.testing.assert_allclose(heavy_top.omega_from_matrix_state(q9, p9), heavy_top.OMEGA0,
                               atol=1e-14)


def test_heavy_top_energies_of_the_formulations_agree():
    R0, W0 = heavy_top.initial_so3()
    E = heavy_top.energy(R0, W0)
    assert heavy_top.so3_system().energy(R0, W0) == pytest.approx(E, rel=1e-14)
    g0, xi0 = heavy_top.initial_constrained()
    assert heavy_top.constrained_system().energy(g0, xi0) == pytest.approx(E, rel=1e-14)
    q9, v9 = heavy_top.initial_matrix()
    assert heavy_top.matrix_system().energy(q9, v9) == pytest.approx(E, rel=1e-14)


def test_heavy_top_left_trivialized_gradient():
    sys3 = heavy_top.so3_system()
    R = SO3.exp(np.array([0.4, 1.1, -0.3]))
    eps = 1e-6
    fd = [(sys3.V(R @ SO3.exp(eps * e)) - sys3.V(R @ SO3.exp(-eps * e))) / (2 * eps)
          for e in np.eye(3)]
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.4e-10 vs allowed 1.4e-08, margin 102
    np.testing.assert_allclose(sys3.gradV(R), fd, atol=1e-8)
    fd2 = np.array([(sys3.gradV(R @ SO3.exp(eps * e)) - sys3.gradV(R @ SO3.exp(-eps * e)))
                    / (2 * eps) for e in np.eye(3)]).T  # Jacobian: [i, j] = ∂_j (grad V)_i
    # measured (1 run(s), threads 1 & unset): worst |diff| 4.1e-10 vs allowed 3.4e-08, margin 82.2
    np.testing.assert_allclose(sys3.hessV(R), fd2, atol=1e-8)


def test_heavy_top_euler_poisson_invariants_and_agreement_with_reconstruction():
    t = np.linspace(0.0, 2.0, 21)
    gam, om = heavy_top.reference_euler_poisson(t)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.7e-13 vs allowed 1e-07,
    # margin 5.93e+05 (loose)
    np.testing.assert_allclose(np.linalg.norm(gam, axis=1), 1.0, atol=1e-12)
    Ip = heavy_top.I_PIVOT
    E = 0.5 * np.einsum("ti,ij,tj->t", om, Ip, om) + heavy_top.MASS * heavy_top.G * gam @ \
        heavy_top.CHI
    # measured (3 runs of this line, threads 1 & unset): worst 2.84e-12 vs 1e-10, margin 35.2
    assert np.ptp(E) < 1e-10
    # measured (1 run(s), threads 1 & unset): worst 4.81e-13 vs 1e-11, margin 20.8
    assert np.ptp(np.einsum("ti,ti->t", gam, om @ Ip.T)) < 1e-11
    ref = heavy_top.reference(t)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.1e-13 vs allowed 3.2e-09,
    # margin 2.75e+04 (loose)
    np.testing.assert_allclose(ref.q[:, 2, :], gam, atol=1e-10)  # Γ = Rᵀe₃ = third row of R
    # measured (1 run(s), threads 1 & unset): worst |diff| 3.4e-14 vs allowed 7.4e-09,
    # margin 2.19e+05 (loose)
    np.testing.assert_allclose(ref.v, om, atol=1e-10)
    # measured (1 run(s), threads 1 & unset): worst |diff| 4.9e-13 vs allowed 1.6e-06,
    # margin 3.19e+06 (loose)
    np.testing.assert_allclose(heavy_top.energy(ref.q, ref.v), E, atol=1e-9)
    # measured (1 run(s), threads 1 & unset): worst |diff| 4.2e-13 vs allowed 5.4e-07,
    # margin 1.26e+06 (loose)
    np.testing.assert_allclose(heavy_top.vertical_momentum(ref.q, ref.v),
                               np.einsum("ti,ti->t", gam, om @ Ip.T), atol=1e-9)


def test_heavy_top_constraint_jacobians_by_finite_differences():
    from chetaev.liegroups import Product, Rn

    group = Product(SO3, Rn(3))
    s6 = heavy_top.constrained_system()
    g = group.from_parts([SO3.exp(np.array([0.2, -0.5, 0.9])), np.array([0.3, 0.1, -0.4])])
    eps = 1e-6
    cols = [(s6.constraint.phi(g @ group.exp(eps * e)) - s6.constraint.phi(g @ group.exp(-eps * e)))
            / (2 * eps) for e in np.eye(6)]
    # measured (1 run(s), threads 1 & unset): worst |diff| 5.9e-11 vs allowed 2e-08, margin 345
    np.testing.assert_allclose(s6.constraint.jacobian(g), np.stack(cols, -1), atol=1e-8)
    s9 = heavy_top.matrix_system()
    q = (SO3.exp(np.array([0.2, -0.5, 0.9])) + 0.1).ravel()
    cols = [(s9.constraint.phi(q + eps * e) - s9.constraint.phi(q - eps * e)) / (2 * eps)
            for e in np.eye(9)]
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.6e-11 vs allowed 1.6e-08,
    # margin 1.03e+03 (loose)
    np.testing.assert_allclose(s9.constraint.jacobian(q), np.stack(cols, -1), atol=1e-8)
