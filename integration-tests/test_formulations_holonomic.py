"""The formulations of the holonomic models agree on TRAJECTORIES (issue 10).

Planar pendulum: angle θ vs Cartesian R² with |q| = ℓ; spherical pendulum: Cartesian R³ with
|q| = ℓ vs intrinsic spherical coordinates; heavy top: SO(3) vs SO(3)×R³ with x = Rχ vs
R^{3×3} with RᵀR = I vs the Euler–Poisson equations. Both the continuous references and
discrete runs are compared at the same times, so a time-reversed, mis-scaled or mis-mapped
formulation is caught (the controls below show the comparison can fail).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("chetaev.examples")

from chetaev.discrete_lagrangian import VPRK, ConstrainedPRK, integrate
from chetaev.discrete_lagrangian.discretization_maps import (
    LieDiscretizationMapMethod,
    rattle,
)
from chetaev.examples.models import (
    heavy_top,
    planar_pendulum,
    sphere_pendulum,
    spherical_pendulum,
)
from chetaev.rktableaux import lobatto_iiia_iiib

T = np.linspace(0.0, 3.0, 13)


def test_planar_pendulum_references_agree():
    th, om = planar_pendulum.reference_angle(T)
    q0, v0 = planar_pendulum.initial_cartesian()
    from chetaev.discrete_lagrangian import reference_solution

    ref = reference_solution(planar_pendulum.cartesian_system(), q0, v0, T)
    q, v = planar_pendulum.cartesian_from_angle(th, om)
    # measured (3 runs of this line, threads 1 & unset): worst |diff| 2.9e-13 vs allowed 2.8e-09,
    # margin 9.79e+03 (loose)
    np.testing.assert_allclose(ref.q, q, atol=1e-9)
    # measured (3 runs of this line, threads 1 & unset): worst |diff| 1.1e-12 vs allowed 1.1e-08,
    # margin 1.02e+04 (loose)
    np.testing.assert_allclose(ref.v, v, atol=1e-9)
    th_e, om_e = planar_pendulum.exact_angle(T)  # Jacobi elliptic functions
    # measured (1 run(s), threads 1 & unset): worst |diff| 2.5e-13 vs allowed 4.2e-09,
    # margin 1.65e+04 (loose)
    np.testing.assert_allclose(planar_pendulum.cartesian_from_angle(th_e, om_e)[0], ref.q,
                               atol=1e-9)
    # controls: time reversal and a wrong g are far off
    th_rev, _ = planar_pendulum.reference_angle(T, omega0=-planar_pendulum.OMEGA0)
    # measured (1 run(s), threads 1 & unset): worst 0.358 vs 0.1, margin 3.58
    assert np.max(np.abs(planar_pendulum.cartesian_from_angle(th_rev, om)[0] - ref.q)) > 0.1
    th_g, _ = planar_pendulum.reference_angle(T, g=1.0)
    # measured (1 run(s), threads 1 & unset): worst 1.68 vs 0.1, margin 16.8
    assert np.max(np.abs(planar_pendulum.cartesian_from_angle(th_g, om)[0] - ref.q)) > 0.1


def test_planar_pendulum_discrete_runs_agree():
    """VPRK (Lobatto IIIA–IIIB, s = 3, order 4) on θ and ConstrainedPRK (same pair) on R²."""
    h = 0.025
    th0, om0 = planar_pendulum.initial_angle()
    a = integrate(planar_pendulum.angle_system(), VPRK(lobatto_iiia_iiib(3)), th0, om0, h=h,
                  t_final=3.0)
    q0, v0 = planar_pendulum.initial_cartesian()
    b = integrate(planar_pendulum.cartesian_system(), ConstrainedPRK(lobatto_iiia_iiib(3)), q0,
                  v0, h=h, t_final=3.0)
    assert a.success and b.success
    qa, va = planar_pendulum.cartesian_from_angle(a.q[:, 0], a.v[:, 0])
    # two different order-4 discretizations: they agree to O(h⁴) (observed 2.5e-6 in v)
    # measured (1 run(s), threads 1 & unset): worst |diff| 8.1e-07 vs allowed 1e-05, margin 12.4
    np.testing.assert_allclose(b.q, qa, atol=1e-5)
    # measured (1 run(s), threads 1 & unset): worst |diff| 2.5e-06 vs allowed 1e-05, margin 4.08
    np.testing.assert_allclose(b.v, va, atol=1e-5)
    th_ref, _ = planar_pendulum.reference_angle(a.t)
    # measured (1 run(s), threads 1 & unset): worst 5.3e-08 vs 1e-06, margin 18.9
    assert np.max(np.abs(a.q[:, 0] - th_ref)) < 1e-6


@pytest.mark.parametrize("kind", spherical_pendulum.POTENTIALS)
def test_spherical_pendulum_cartesian_and_intrinsic_agree(kind):
    ref = spherical_pendulum.reference(T, kind=kind)
    q, v = spherical_pendulum.reference_spherical(T, kind=kind)
    # measured (3 runs of this line, threads 1 & unset): worst |diff| 2.9e-13 vs allowed 2.8e-09,
    # margin 9.79e+03 (loose)
    np.testing.assert_allclose(ref.q, q, atol=1e-9)
    # measured (3 runs of this line, threads 1 & unset): worst |diff| 1.1e-12 vs allowed 1.1e-08,
    # margin 1.02e+04 (loose)
    np.testing.assert_allclose(ref.v, v, atol=1e-9)
    # the discrete Cartesian RATTLE follows the intrinsic solution at O(h²)
    h = 0.01
    traj = integrate(spherical_pendulum.cartesian_system(kind), rattle(), spherical_pendulum.Q0,
                     spherical_pendulum.V0, h=h, t_final=1.5)
    assert traj.success
    qi, _ = spherical_pendulum.reference_spherical(traj.t, kind=kind)
    # measured (2 run(s), threads 1 & unset): worst 0.000482 vs 0.005, margin 10.4
    assert np.max(np.abs(traj.q - qi)) < 5e-3
    # control: reversed initial velocity gives a different trajectory
    qr, _ = spherical_pendulum.reference_spherical(T, v0=-spherical_pendulum.V0, kind=kind)
    # measured (2 run(s), threads 1 & unset): worst 1.26 vs 0.1, margin 12.6
    assert np.max(np.abs(qr - ref.q)) > 0.1


def test_heavy_top_continuous_formulations_agree():
    t = np.linspace(0.0, 1.5, 7)
    ref3 = heavy_top.reference(t)
    gam, om = heavy_top.reference_euler_poisson(t)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.1e-13 vs allowed 3.2e-09,
    # margin 2.75e+04 (loose)
    np.testing.assert_allclose(ref3.q[:, 2, :], gam, atol=1e-10)
    # measured (1 run(s), threads 1 & unset): worst |diff| 8.4e-14 vs allowed 2.7e-08,
    # margin 3.25e+05 (loose)
    np.testing.assert_allclose(ref3.v, om, atol=1e-10)
    from chetaev.discrete_lagrangian import reference_solution

    g0, xi0 = heavy_top.initial_constrained()
    ref6 = reference_solution(heavy_top.constrained_system(), g0, xi0, t)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1e-11 vs allowed 3.2e-09, margin 320
    np.testing.assert_allclose(ref6.q[:, :3, :3], ref3.q, atol=1e-9)
    # measured (1 run(s), threads 1 & unset): worst |diff| 3.5e-12 vs allowed 2.8e-08,
    # margin 8.13e+03 (loose)
    np.testing.assert_allclose(ref6.v[:, :3], ref3.v, atol=1e-9)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.9e-11 vs allowed 1.1e-09, margin 57
    np.testing.assert_allclose(ref6.q[:, 3:6, 6], ref3.q @ heavy_top.CHI, atol=1e-9)
    q9, v9 = heavy_top.initial_matrix()
    ref9 = reference_solution(heavy_top.matrix_system(), q9, v9, t)
    # measured (1 run(s), threads 1 & unset): worst |diff| 6.7e-12 vs allowed 1.3e-08,
    # margin 1.86e+03 (loose)
    np.testing.assert_allclose(ref9.q.reshape(-1, 3, 3), ref3.q, atol=1e-8)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.6e-11 vs allowed 1.3e-07,
    # margin 8.28e+03 (loose)
    np.testing.assert_allclose(heavy_top.omega_from_matrix_state(ref9.q, ref9.p), ref3.v,
                               atol=1e-8)
    # control: the top started with −Ω0 is elsewhere
    rev = heavy_top.reference(t, omega=-heavy_top.OMEGA0)
    # measured (1 run(s), threads 1 & unset): worst 1.93 vs 0.05, margin 38.5
    assert np.max(np.abs(rev.q - ref3.q)) > 0.05


def test_heavy_top_discrete_formulations_agree():
    """Same h, three formulations and three method families: differences are O(h²)."""
    h, tf = 0.0125, 1.0
    R0, W0 = heavy_top.initial_so3()
    a = integrate(heavy_top.so3_system(), LieDiscretizationMapMethod("rattle"), R0, W0, h=h,
                  t_final=tf)
    g0, xi0 = heavy_top.initial_constrained()
    b = integrate(heavy_top.constrained_system(), LieDiscretizationMapMethod("rattle"), g0, xi0,
                  h=h, t_final=tf)
    q9, v9 = heavy_top.initial_matrix()
    c = integrate(heavy_top.matrix_system(), rattle(), q9, v9, h=h, t_final=tf)
    assert a.success and b.success and c.success
    ref = heavy_top.reference(a.t)
    for R in (a.q, b.q[:, :3, :3], c.q.reshape(-1, 3, 3)):
        # measured (3 run(s), threads 1 & unset): worst 0.000365 vs 0.002, margin 5.49
        assert np.max(np.abs(R - ref.q)) < 2e-3
    # measured (1 run(s), threads 1 & unset): worst |diff| 0.00011 vs allowed 0.002, margin 18.7
    np.testing.assert_allclose(b.q[:, :3, :3], a.q, atol=2e-3)
    # measured (1 run(s), threads 1 & unset): worst |diff| 0.00059 vs allowed 0.002, margin 3.38
    np.testing.assert_allclose(c.q.reshape(-1, 3, 3), a.q, atol=2e-3)
    # measured (1 run(s), threads 1 & unset): worst |diff| 0.00029 vs allowed 0.005, margin 17.3
    np.testing.assert_allclose(b.v[:, :3], a.v, atol=5e-3)


def test_the_two_spherical_pendulum_modules_describe_the_same_motion():
    """``spherical_pendulum`` (discretization-maps paper, intrinsic (θ, φ) reference) with the
    linear potential V = g q_z, g = α, and ``sphere_pendulum`` (homogeneous-spaces paper,
    ambient reference on TS²) give the same trajectory from the latter's initial data; a
    different g or a reversed velocity is caught."""
    x0, v0 = sphere_pendulum.initial_ambient()
    alpha = sphere_pendulum.ALPHA
    a, va = sphere_pendulum.reference(T, x0, v0)
    b, vb = spherical_pendulum.reference_spherical(T, q0=x0, v0=v0, kind="linear", g=alpha)
    assert np.max(np.abs(a - b)) < 1e-10 and np.max(np.abs(va - vb)) < 1e-10
    wrong_g, _ = spherical_pendulum.reference_spherical(T, q0=x0, v0=v0, kind="linear",
                                                        g=1.1 * alpha)
    reversed_v, _ = spherical_pendulum.reference_spherical(T, q0=x0, v0=-v0, kind="linear",
                                                           g=alpha)
    assert np.max(np.abs(a - wrong_g)) > 1e-2 and np.max(np.abs(a - reversed_v)) > 1e-2
