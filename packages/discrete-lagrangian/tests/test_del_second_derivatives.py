"""DiscreteLagrangian.D11 / D22 / omega (the pieces chetaev.dsocs reads from it).

Every rule's second derivatives are compared with central finite differences of D1, D2 on a
nonlinear Lagrangian (the double pendulum, q-dependent mass matrix) by
``compare_derivative`` (derived tolerance: truncation bound + rounding); the two-form is
checked exactly against its definition from D12.
"""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    DiscreteLagrangian,
    compare_derivative,
    lagrangian_two_form,
)
from chetaev.discrete_lagrangian.testing import double_pendulum

RULES = [DiscreteLagrangian("midpoint"), DiscreteLagrangian("trapezoidal"),
         DiscreteLagrangian("alpha", 0.0), DiscreteLagrangian("alpha", 0.3),
         DiscreteLagrangian("alpha", 1.0)]
H = 0.07
Q0 = np.array([0.4, -0.9])
Q1 = np.array([0.47, -0.83])


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.kind}-{r.alpha}")
@pytest.mark.parametrize("general", [False, True])
def test_second_derivatives_match_finite_differences(rule, general):
    sys = double_pendulum(general=general)
    compare_derivative("D11", lambda x: rule.D1(sys, x, Q1, H),
                       lambda x: rule.D11(sys, x, Q1, H), Q0, of="D1", wrt="q0")
    compare_derivative("D22", lambda x: rule.D2(sys, Q0, x, H),
                       lambda x: rule.D22(sys, Q0, x, H), Q1, of="D2", wrt="q1")
    compare_derivative("D12", lambda x: rule.D1(sys, Q0, x, H),
                       lambda x: rule.D12(sys, Q0, x, H), Q1, of="D1", wrt="q1")


def test_two_form_is_built_from_d12():
    sys = double_pendulum()
    rule = DiscreteLagrangian("midpoint")
    d12 = rule.D12(sys, Q0, Q1, H)
    om = rule.omega(sys, Q0, Q1, H)
    np.testing.assert_array_equal(om[:2, 2:], -d12)  # exact: copies, no arithmetic
    np.testing.assert_array_equal(om[2:, :2], d12.T)
    np.testing.assert_array_equal(om[:2, :2], 0.0)
    np.testing.assert_array_equal(om, -om.T)
    batch = lagrangian_two_form(np.stack([d12, 2 * d12]))
    np.testing.assert_array_equal(batch[1], lagrangian_two_form(2 * d12))
