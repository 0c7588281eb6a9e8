"""The shared test helpers of ``chetaev.discrete_lagrangian.testing``."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import testing as dlt
from chetaev.rktableaux import testing as rkt


def test_fit_order_is_the_one_of_rktableaux() -> None:
    """One order fit in the project: the re-export is the same object."""
    assert dlt.fit_order is rkt.fit_order


def test_rounding_bound_scales() -> None:
    """c · n_terms · n_ops · eps · scale, exactly."""
    eps = np.finfo(float).eps
    assert dlt.rounding_bound(2.0, n_terms=3, n_ops=5) == dlt.ROUNDING_C * 3 * 5 * eps * 2.0
    assert dlt.rounding_bound(0.0) == 0.0


def test_assert_rounding_close_catches_a_difference_above_the_bound() -> None:
    """An ulp-level difference passes; a difference above the bound fails, naming it."""
    x = np.array([1.0, -2.0, 3.0])
    dlt.assert_rounding_close(x, x * (1.0 + 4.0 * np.finfo(float).eps), n_terms=3)
    with pytest.raises(AssertionError, match="rounding bound"):
        dlt.assert_rounding_close(x, x + 1e-12, n_terms=3, what="x")


def test_newton_residual_bound_formula() -> None:
    """max(tol, 64 eps)·S² plus the rounding of an n-term product, S = max(1, |q0|, |v0|)."""
    q0, v0 = np.array([0.5, -3.0]), np.array([2.0, 0.1])
    S2 = 9.0
    assert dlt.newton_residual_bound(1e-12, q0, v0) == pytest.approx(
        1e-12 * S2 + dlt.rounding_bound(S2, n_terms=2), rel=1e-15)
    eps = np.finfo(float).eps
    assert dlt.newton_residual_bound(0.0, q0, v0) >= 64 * eps * S2
