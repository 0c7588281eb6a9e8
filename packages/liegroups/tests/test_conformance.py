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
    testing.check_batched_equals_looped(tau, np.random.default_rng(seed), (3, 1, 2), mode)
