"""The Chaplygin-type ball on a rotating table (GNI paper §7.4)."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.examples.models import chaplygin_ball


@pytest.mark.parametrize("exp", [1, 2])
def test_initial_data_satisfy_the_rolling_constraints(exp):
    x0, v0 = chaplygin_ball.initial(exp)
    assert x0.shape == (2,) and v0.shape == (5,)
    # measured (2 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(chaplygin_ball.constraint_residual(x0, v0, exp)).max() < 1e-15


def test_exact_homogeneous_solution_solves_the_equations():
    t = np.linspace(0.0, 10.0, 11)
    xe, ve = chaplygin_ball.exact_homogeneous(t)
    # measured (1 run(s), threads 1 & unset): worst 8.88e-16 vs 1e-13, margin 113
    assert abs(chaplygin_ball.constraint_residual(xe, ve)).max() < 1e-13
    xr, vr = chaplygin_ball.system(1).reference(*chaplygin_ball.initial(1), t)
    # measured (1 run(s), threads 1 & unset): worst |diff| 2.8e-13 vs allowed 1.8e-07,
    # margin 6.35e+05 (loose)
    np.testing.assert_allclose(xe, xr, atol=1e-10)
    # measured (1 run(s), threads 1 & unset): worst |diff| 4.7e-15 vs allowed 1e-10,
    # margin 2.12e+04 (loose)
    np.testing.assert_allclose(ve, vr, atol=1e-10)
    # the docs' theory page: at t = 10, E = 9.0879464470 and the centre of the circle is (−1.5, 3.5)
    assert chaplygin_ball.energy(xe[-1], ve[-1]) == pytest.approx(9.0879464470, abs=1e-9)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.3e-15 vs allowed 3.5e-07,
    # margin 2.65e+08 (loose)
    np.testing.assert_allclose(np.linalg.norm(xe - [-1.5, 3.5], axis=1), np.sqrt(2) / 0.4,
                               atol=1e-12)


def test_experiment_2_reference_values():
    x, v = chaplygin_ball.reference([0.0, 15.0], 2)
    # measured (1 run(s), threads 1 & unset): worst |diff| 2.6e-11 vs allowed 8.2e-08,
    # margin 3.11e+03 (loose)
    np.testing.assert_allclose(np.concatenate([x[-1], v[-1, 2:]]),
                               [-2.0117114767, 5.5920780321, -0.7207081866, 0.6885241324,
                                0.6115886017], atol=1e-8)
    assert chaplygin_ball.energy(x[-1], v[-1], 2) == pytest.approx(1.1741158105, abs=1e-8)


def test_fixed_table_energy_is_conserved():
    sysb = chaplygin_ball.system(2, table_rate=0.0)
    x0 = np.array([1.0, 0.0])
    v0 = np.array([0.3, -0.2, 0.2, 0.3, 0.4])  # ẋ = r ω2, ẏ = −r ω1
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(sysb.residual(x0, v0)).max() < 1e-15
    x, v = sysb.reference(x0, v0, np.linspace(0, 5, 6))
    E = sysb.energy(x, v)
    # measured (1 run(s), threads 1 & unset): worst 2.16e-15 vs 1e-11, margin 4.62e+03 (loose)
    assert np.ptp(E) < 1e-11


def test_bad_experiment_number():
    with pytest.raises(ValueError, match="experiment must be 1 or 2"):
        chaplygin_ball.system(3)
