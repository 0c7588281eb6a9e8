"""The reference integrator against exact solutions and an independent formulation."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import InputError
from chetaev.discrete_lagrangian.reference import reference_solution
from chetaev.discrete_lagrangian.testing import (
    cartesian_pendulum,
    pendulum_angle,
    pendulum_cartesian_from_angle,
)
from scipy.special import ellipj, ellipk


def _exact_pendulum(theta0, t):
    """Pendulum released from rest: sin(θ/2) = k sn(K − t, k), k = sin(θ₀/2) (g = ℓ = 1)."""
    k = np.sin(theta0 / 2)
    K = ellipk(k * k)
    sn, _cn, _dn, _ = ellipj(K - t, k * k)
    return 2 * np.arcsin(k * sn)


def test_pendulum_angle_against_elliptic_solution():
    t = np.linspace(0, 5, 11)
    ref = reference_solution(pendulum_angle(), np.array([2.0]), np.array([0.0]), t)
    # measured: 6.1e-13 (OPENBLAS_NUM_THREADS=1): margin 3; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(ref.q[:, 0], _exact_pendulum(2.0, t), rtol=0, atol=2e-12)
    assert ref.lam is None


def test_cartesian_pendulum_against_angle_formulation():
    t = np.linspace(0, 3, 7)
    th0, om0 = 1.3, 0.4
    ang = reference_solution(pendulum_angle(), np.array([th0]), np.array([om0]), t)
    q0, v0 = pendulum_cartesian_from_angle(th0, om0)
    car = reference_solution(cartesian_pendulum(), q0, v0, t)
    qa, va = pendulum_cartesian_from_angle(ang.q[:, 0], ang.v[:, 0])
    # measured: 5.7e-13 (OPENBLAS_NUM_THREADS=1): margin 18; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(car.q, qa, rtol=0, atol=1e-11)
    # measured: 3.8e-13 (OPENBLAS_NUM_THREADS=1): margin 26; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(car.v, va, rtol=0, atol=1e-11)
    # multiplier = g q2 − |v|² (radial balance)
    # measured: 8.1e-13 (OPENBLAS_NUM_THREADS=1): margin 123; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(car.lam[:, 0], qa[:, 1] - np.sum(va**2, -1), rtol=0, atol=1e-10)


def test_batched_reference():
    t = np.linspace(0, 1, 3)
    q0 = np.array([[0.5], [1.0]])
    ref = reference_solution(pendulum_angle(), q0, np.zeros((2, 1)), t)
    assert ref.q.shape == (3, 2, 1)
    one = reference_solution(pendulum_angle(), q0[1], np.zeros(1), t)
    np.testing.assert_array_equal(ref.q[:, 1], one.q)


def test_reference_rejects_bad_times_and_data():
    with pytest.raises(InputError, match="strictly increasing"):
        reference_solution(pendulum_angle(), [0.1], [0.0], [0.0, 1.0, 0.5])
    with pytest.raises(InputError, match=r"shape \(\.\.\., 1\)"):
        reference_solution(pendulum_angle(), [0.1, 0.2], [0.0], [0.0, 1.0])
    with pytest.raises(InputError, match="finite"):
        reference_solution(pendulum_angle(), [np.nan], [0.0], [0.0, 1.0])
