"""Conformance suite (chetaev.liegroups.testing) over every group, retraction, batch shape and
sampling mode; hypothesis draws the seeds."""

import numpy as np
import pytest
from chetaev.liegroups import testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

GROUPS = testing.all_groups()
RETRACTIONS = testing.all_retractions()
BATCHES = testing.BATCHES
MODES = testing.MODES

SETTINGS = settings(
    max_examples=3,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("G", GROUPS, ids=repr)
@pytest.mark.parametrize("check", testing.CHECKS_GROUP, ids=lambda c: c.__name__[6:])
@SETTINGS
@given(seed=seeds)
def test_group(check, G, batch, mode, seed):
    check(G, np.random.default_rng(seed), batch, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("tau", RETRACTIONS, ids=repr)
@pytest.mark.parametrize(
    "check",
    [c for c in testing.CHECKS_RETRACTION if c is not testing.check_second_derivatives],
    ids=lambda c: c.__name__[6:],
)
@SETTINGS
@given(seed=seeds)
def test_retraction(check, tau, batch, mode, seed):
    check(tau, np.random.default_rng(seed), batch, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("tau", RETRACTIONS, ids=repr)
@settings(max_examples=1, deadline=None, database=None)
@given(seed=seeds)
def test_second_derivatives(tau, batch, mode, seed):
    testing.check_second_derivatives(tau, np.random.default_rng(seed), batch, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tau", RETRACTIONS, ids=repr)
@settings(max_examples=2, deadline=None, database=None)
@given(seed=seeds)
def test_batched_equals_looped(tau, mode, seed):
    """Every map on a batch (3, 1, 2) equals the map applied element by element, to rounding
    (the norm-wise bound of :func:`testing.assert_batch_close`, derived and measured there)."""
    G, batch, rng = tau.group, (3, 1, 2), np.random.default_rng(seed)
    xi = testing.sample_algebra(G, rng, batch, mode)
    if tau.kind == "cayley" and mode == "random":
        xi = 0.6 * xi  # as the conformance checks: away from rotations by pi (cay^-1 singular)
    eta = rng.normal(size=xi.shape)
    g = G.exp(xi)
    maps = {
        "tau": (lambda i: G.as_matrix(tau(xi[i]))),
        "dL": (lambda i: tau.dL(xi[i])),
        "dR_inv": (lambda i: tau.dR_inv(xi[i])),
        "dL_inv_deriv": (lambda i: tau.dL_inv_deriv(xi[i], eta[i])),
        "dL_deriv": (lambda i: tau.dL_deriv(xi[i], eta[i])),
        "exp": (lambda i: G.as_matrix(G.exp(xi[i]))),
        "ad": (lambda i: G.ad(xi[i])),
        "log": (lambda i: G.log(g[i])),
        "Ad": (lambda i: G.Ad(g[i])),
    }
    every = (slice(None),) * len(batch)
    for name, f in maps.items():
        full = f(every)
        for idx in np.ndindex(*batch):
            testing.assert_batch_close(full[idx], f(idx), G.dim, f"{tau}: {name} at {idx}")
