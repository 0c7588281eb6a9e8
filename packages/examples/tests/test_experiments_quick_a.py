"""Quick versions of the discretization-maps, GNI and DSOCS experiments: every check is
"pass" or a documented "xfail", the data is filled in and the plot draws."""

from __future__ import annotations

import time

import pytest
from chetaev.examples import registry

PAPERS = ("discretization-maps-holonomic", "geometric-nonholonomic-integrator",
          "dsocs-second-order-constraints")
NAMES = [n for n, e in registry.items() if e.paper in PAPERS]


def test_every_paper_has_experiments():
    for paper in PAPERS:
        assert any(registry[n].paper == paper for n in NAMES), paper
    assert len(NAMES) >= 12


@pytest.mark.parametrize("name", NAMES)
def test_quick_experiment(name):
    start = time.process_time()
    result = registry[name].run(quick=True)
    elapsed = time.process_time() - start
    checks = result.outcome.checks
    assert checks, "an experiment must compute at least one check"
    bad = [(c.name, c.measured, c.claim, c.mark) for c in checks if not c.ok]
    assert not bad, bad
    for c in checks:
        if c.deficiency is not None:
            assert c.mark == "xfail"
    assert result.outcome.data
    assert elapsed < 30.0
    if result.outcome.plot is not None:
        mpl = pytest.importorskip("matplotlib")
        mpl.use("Agg")
        import matplotlib.pyplot as plt

        fig = plt.figure()
        try:
            result.outcome.plot(fig)
            assert fig.axes
        finally:
            plt.close(fig)


def test_overrides_are_used():
    """``h`` and ``t_final`` overrides reach the computation (they change the numbers)."""
    exp = registry["dm-orders-spherical-pendulum"]
    a = exp.run(quick=True, method="midpoint").outcome.data["midpoint"]
    b = exp.run(quick=True, method="midpoint", h=0.025, t_final=0.5).outcome.data["midpoint"]
    assert a["h"][0] == 0.05 and b["h"][0] == 0.025
    assert a["error"] != b["error"]


def test_unknown_method_is_rejected():
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        registry["dm-orders-spherical-pendulum"].run(quick=True, method="nope")
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        registry["gni-particle-orders"].run(quick=True, method="nope")


def test_method_choices_are_validated():
    with pytest.raises(ValueError, match="has no method choice"):
        registry["dsocs-wheel-figure-5"].run(quick=True, method="rattle")
    with pytest.raises(ValueError, match="expected the retraction"):
        registry["gni-ball-figure-2"].run(quick=True, method="polar")
    with pytest.raises(ValueError, match="unknown method 'midpoint'"):
        registry["dm-lie-heavy-top"].run(quick=True, method="midpoint")


def test_ball_figure_2_with_the_exp_retraction():
    res = registry["gni-ball-figure-2"].run(quick=True, method="exp", t_final=30.0)
    assert res.outcome.data["n_steps"] == 300
    assert all(c.ok for c in res.outcome.checks)
