"""The closed-form homogeneous-ball solution (see the docs' theory page): valid input only, Ω = 0
limit."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import InputError
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.gni import BALL_EXPERIMENT_1, ball_exact_homogeneous, rolling_ball


@pytest.mark.parametrize("table_rate", [1.0, 1e-7, 0.0, -0.3])
def test_exact_solution_matches_the_reference_ode(table_rate):
    e = BALL_EXPERIMENT_1
    I, m, r = e["inertia"], e["mass"], e["radius"]
    x0 = np.array(e["x0"])
    xd = np.array([1.0, 1.0])
    w = np.array([(table_rate * x0[0] - xd[1]) / r, (xd[0] + table_rate * x0[1]) / r, 0.3])
    v0 = np.concatenate([xd, w])
    t = np.array([0.0, 0.5, 3.0, 7.0])
    xe, ve = ball_exact_homogeneous(t, x0, v0, I, m, r, table_rate)
    assert np.all(np.isfinite(xe)) and np.all(np.isfinite(ve))
    xr, vr = rolling_ball(I, m, r, table_rate).reference(x0, v0, t)
    # the reference is DOP853 at rtol 1e-13 (its error, deterministic): measured worst 3.8e-13
    # (x), 6.9e-14 (v) over the four table rates, OPENBLAS_NUM_THREADS=1 and unset; bound 1e-10
    # leaves margin 260
    np.testing.assert_allclose(xe, xr, atol=1e-10, rtol=0)
    np.testing.assert_allclose(ve, vr, atol=1e-10, rtol=0)


def test_fixed_table_is_uniform_motion():
    x0, v0 = np.array([1.0, 2.0]), np.array([0.5, -0.25, 0.25, 0.5, 0.1])
    xe, ve = ball_exact_homogeneous([0.0, 4.0], x0, v0, (0.4, 0.4, 0.4), table_rate=0.0)
    # round-off: one product and one sum of O(1) values (measured: bitwise equal)
    assert_rounding_close(xe[-1], x0 + 4.0 * v0[:2], n_ops=2, what="uniform x")
    assert_rounding_close(ve, np.stack([v0, v0]), what="uniform v")


def test_unequal_inertia_is_refused():
    with pytest.raises(InputError, match=r"needs I1 = I2 = I3.*reference"):
        ball_exact_homogeneous([1.0], (1.0, 0.0), np.zeros(5), (1.0, 1.1, 1.2))
