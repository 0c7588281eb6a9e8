"""A batched ``integrate`` holds BLAS at one thread for its duration (issue 17)."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import VPRK, integrate
from chetaev.discrete_lagrangian.driver._blas import BlasOneThread
from chetaev.discrete_lagrangian.testing import double_pendulum
from chetaev.rktableaux import gauss

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> int:
    return max([i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas"], default=0)


@pytest.fixture
def two_threads():
    """BLAS at two threads around the test (so that a limit to one is visible)."""
    if _blas_threads() == 0:
        pytest.skip("no BLAS library seen by threadpoolctl")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        yield


def _run(q0, v0):
    seen = []

    def callback(state):
        seen.append(_blas_threads())
        return False

    integrate(double_pendulum(), VPRK(gauss(2)), q0, v0, h=0.05, n_steps=2, callback=callback)
    return seen


def test_batched_run_uses_one_blas_thread_and_restores(two_threads):
    q0 = np.array([[0.3, -0.2], [0.1, 0.4]])
    v0 = np.zeros((2, 2))
    assert _run(q0, v0) == [1, 1]
    assert _blas_threads() == 2


def test_single_trajectory_leaves_blas_alone(two_threads):
    assert _run(np.array([0.3, -0.2]), np.zeros(2)) == [2, 2]


def test_nested_entries_restore_once(two_threads):
    with BlasOneThread():
        with BlasOneThread():
            assert _blas_threads() == 1
        assert _blas_threads() == 1  # the inner exit does not restore
    assert _blas_threads() == 2
