"""gni's discrete Lagrangians are chetaev.discrete_lagrangian.DiscreteLagrangian (issue 15).

The midpoint rule is dl's own code (exact equality); the endpoint family at α = ½ is dl's
trapezoidal rule written with other weights (equal to rounding: a sum of three terms in
another order, :func:`rounding_bound` with the terms' magnitude as scale).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from chetaev.discrete_lagrangian import DiscreteLagrangian, interface_of
from chetaev.discrete_lagrangian import testing as dlt
from chetaev.gni import VARIANTS, AlphaDiscreteLagrangian, MidpointDiscreteLagrangian

H = 0.1


@pytest.fixture(scope="module")
def points():
    rng = np.random.default_rng(20261126)
    q0 = rng.standard_normal((5, 2))
    return dlt.double_pendulum(general=True), q0, q0 + H * rng.standard_normal((5, 2))


def test_every_variant_is_a_discrete_lagrangian():
    assert all(isinstance(dl, DiscreteLagrangian) for dl in VARIANTS.values())
    assert VARIANTS["midpoint"] == MidpointDiscreteLagrangian()
    assert [VARIANTS[k].order for k in ("euler_a", "euler_b", "rattle", "midpoint")] == [1, 1, 2, 2]


def test_midpoint_is_dl_midpoint(points):
    sys_, q0, q1 = points
    ours, theirs = MidpointDiscreteLagrangian(), DiscreteLagrangian("midpoint")
    for name in ("__call__", "D1", "D2", "D12"):
        np.testing.assert_array_equal(getattr(ours, name)(sys_, q0, q1, H),
                                      getattr(theirs, name)(sys_, q0, q1, H))
    np.testing.assert_array_equal(ours.D1_dq1(sys_, q0, q1, H), theirs.D12(sys_, q0, q1, H))


def test_endpoint_half_is_dl_trapezoidal(points):
    sys_, q0, q1 = points
    ours, theirs = AlphaDiscreteLagrangian(0.5), DiscreteLagrangian("trapezoidal")
    v = (q1 - q0) / H
    first = max(np.abs(sys_.D2L(q0, v)).max(), np.abs(sys_.D2L(q1, v)).max(),
                H * np.abs(sys_.D1L(q0, v)).max(), H * np.abs(sys_.D1L(q1, v)).max())
    second = max(np.abs(sys_.D22L(q, v)).max() / H + np.abs(sys_.D12L(q, v)).max()
                 for q in (q0, q1))
    for name, scale in (("D1", first), ("D2", first), ("D12", second)):
        dlt.assert_rounding_close(getattr(ours, name)(sys_, q0, q1, H),
                                  getattr(theirs, name)(sys_, q0, q1, H),
                                  n_terms=3, scale=scale, what=name)


@pytest.mark.parametrize("dl", list(VARIANTS.values()), ids=list(VARIANTS))
def test_no_second_derivatives_gives_no_jacobian(dl):
    sys_ = SimpleNamespace(n=2, D1L=lambda q, v: -q, D2L=lambda q, v: v)  # no D11L, ...
    assert not interface_of(sys_).has_second_derivatives
    q = np.zeros((1, 2))
    assert dl.D1_dq1(sys_, q, q + H, H) is None
