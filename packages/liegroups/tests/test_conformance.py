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


#: Batched and looped evaluations of the same map differ only in rounding: numpy sums the
#: n = G.dim products of each matrix entry in a different order (einsum/matmul on stacks vs.
#: single matrices), and the trigonometric coefficients cancel inside an entry. A norm-wise
#: bound, |batched - looped| <= c n eps max(|batched|, |looped|) over the entries of one element
#: (Higham, Accuracy and Stability, §3.1: gamma_n bound on inner products), covers entries that
#: are small by cancellation; an elementwise rtol does not (the old bound 1e-15 + 1e-14|x| failed
#: at 4.7e-15 on an entry of size 0.17 of SE(3)'s dL_inv_deriv).
#: Measured: max of |batched - looped| / (n eps max|.|) over every retraction, map and mode,
#: seeds 0..99 (OPENBLAS_NUM_THREADS unset), 0..29 and 100..159 (= 1): 3.3 (SE(3) exp, dL_inv_deriv,
#: seed 0, the case of issue 14); next largest 2.3 (SE(3) exp, dL_deriv). c = 16 leaves a
#: margin of about 5.
_BATCH_C = 16.0


def _assert_batch_close(full, looped, n, what):
    a, b = np.asarray(full, dtype=float), np.asarray(looped, dtype=float)
    assert a.shape == b.shape and np.all(np.isfinite(a)), what
    bound = _BATCH_C * n * np.finfo(float).eps * max(np.abs(a).max(), np.abs(b).max())
    err = np.abs(a - b).max()
    assert err <= bound, f"{what}: |batched - looped| = {err:.3e} > {bound:.3e}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tau", RETRACTIONS, ids=repr)
@settings(max_examples=2, deadline=None, database=None)
@given(seed=seeds)
def test_batched_equals_looped(tau, mode, seed):
    """Every map on a batch (3, 1, 2) equals the map applied element by element, to rounding."""
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
            _assert_batch_close(full[idx], f(idx), G.dim, f"{tau}: {name} at {idx}")
