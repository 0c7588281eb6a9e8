"""The public test models of chetaev.nh_integrators.testing broadcast over leading batch
axes and their data lie on the constraint set."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian.testing import assert_rounding_close, rounding_bound
from chetaev.nh_integrators import testing

VECTOR_MODELS = [
    ("particle_system", "PARTICLE_Q0", "PARTICLE_V0"),
    ("cvt_system", "CVT_Q0", "CVT_V0_LOW"),
    ("cvt_system", "CVT_Q0", "CVT_V0_HIGH"),
    ("sleigh_system", "SLEIGH_Q0", "SLEIGH_V0"),
    ("general_particle_system", "GEN_Q0", "GEN_V0"),
]


@pytest.mark.parametrize(("model", "q0", "v0"), VECTOR_MODELS)
def test_initial_data_on_the_constraint(model, q0, v0):
    system = getattr(testing, model)()
    q0, v0 = getattr(testing, q0), getattr(testing, v0)
    # the data are built on the constraint in closed form: the residual is the rounding of one
    # evaluation of n-term products like y·ẋ (scale max(1, |v|(1 + |q|))). The old bound 1e-15
    # was measured at 4.4e-16 (margin 2.3 on round-off: a flake), hence the derived bound.
    n = np.size(q0)
    scale = max(1.0, np.abs(v0).max() * (1.0 + np.abs(q0).max()))
    assert np.abs(system.residual(q0, v0)).max() <= rounding_bound(scale, n_terms=n)


@pytest.mark.parametrize(
    "model",
    [
        "particle_system",
        "affine_particle_system",
        "cvt_system",
        "chaotic_system",
        "particle_cvt_system",
        "sleigh_system",
        "general_particle_system",
    ],
)
def test_models_broadcast_over_two_batch_axes(model):
    """Residual, multiplier, energy and momentum of a (2, 3) batch equal per-entry values."""
    system = getattr(testing, model)()
    n = int(system.system.n)
    rng = np.random.default_rng(3)
    q, v = 0.5 * rng.normal(size=(2, 3, n)), 0.5 * rng.normal(size=(2, 3, n))
    outs = [system.residual, system.multiplier, system.energy, system.system.D2L]
    batched = [f(q, v) for f in outs]
    assert batched[0].shape[:2] == (2, 3) and batched[1].shape[:2] == (2, 3)
    for i in range(2):
        for j in range(3):
            for f, b in zip(outs, batched, strict=True):
                # batched vs single evaluation of the same formulas: rounding of n-term sums
                assert_rounding_close(b[i, j], f(q[i, j], v[i, j]), n_terms=n, n_ops=2,
                                      what=f"{model} batched")


def test_chaotic_ensemble_matches_the_paper():
    q0, v0 = testing.chaotic_ensemble(9)
    system = testing.chaotic_system()
    assert q0.shape == v0.shape == (10, 7)
    # paper §7.3: the ensemble is scaled to E = 3.06 exactly, so the energy is 3.06 to the
    # rounding of a 7-term quadratic form (scale E); measured 4.4e-16, bound 7.6e-14
    assert_rounding_close(system.energy(q0, v0), np.full(10, 3.06), n_terms=7, what="E = 3.06")
    scale = max(1.0, np.abs(v0).max() * (1.0 + np.abs(q0).max()))  # as above (measured: 0)
    assert np.abs(system.residual(q0, v0)).max() <= rounding_bound(scale, n_terms=7)


def test_fit_order_refuses_fits_through_fewer_than_three_points():
    hs = np.array([0.2, 0.1, 0.05])
    # exact power law: the slope is 4 to the rounding of logs and a 3-point least-squares fit
    # (|log| <= 13, a few tens of operations): measured 3.6e-15, margin 281
    assert abs(testing.fit_order(hs, 3.0 * hs**4) - 4.0) < 1e-12
    with pytest.raises(ValueError, match=r"only 2 of the errors.*use larger steps"):
        testing.fit_order(hs, np.array([1e-8, 1e-10, 1e-13]))


def test_lie_models_are_re_exported():
    from chetaev.nh_integrators import _lie_testing

    for name in _lie_testing.__all__:
        assert getattr(testing, name) is getattr(_lie_testing, name)
        assert name in testing.__all__
