"""The experiment registry, the checks and the report writer, on a toy experiment."""

from __future__ import annotations

import json

import numpy as np
import pytest
from chetaev.examples import Check, Experiment, Outcome, check_bound, check_order, fit_order
from chetaev.examples._report import run_experiments, write_report


def test_fit_order_uses_points_above_the_floor() -> None:
    hs = np.array([0.1, 0.05, 0.025, 0.0125, 0.00625])
    errs = 3.0 * hs**4
    errs[-1] = 1e-16  # below the round-off floor: ignored
    assert fit_order(hs, errs) == pytest.approx(4.0, abs=1e-12)


def test_fit_order_refuses_too_few_points() -> None:
    with pytest.raises(ValueError, match="a fit needs at least 3"):
        fit_order([0.1, 0.05, 0.025], [1e-3, 1e-15, 1e-16])


def test_checks_compute_their_marks() -> None:
    hs = np.array([0.1, 0.05, 0.025, 0.0125])
    assert check_order("q", hs, hs**2, 2).mark == "pass"
    assert check_order("q", hs, hs**2, 4).mark == "FAIL"
    assert check_order("q", hs, hs**2, 4, deficiency="order reduction").mark == "xfail"
    assert check_order("q", hs, hs**2, 2, deficiency="order reduction").mark == "XPASS"
    assert check_bound("drift", 1e-14, 1e-12).passed
    assert not check_bound("drift", float("nan"), 1e-12).passed


def _toy(quick: bool = False, h: float = 0.1) -> Outcome:
    def plot(fig) -> None:
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, h])

    checks = [Check("value", h, "≤ 1", h <= 1), Check("max |x|", 0.25, "|x| ≤ 1", True)]
    return Outcome(checks=checks, data={"h": h}, plot=plot)


def test_report_files(tmp_path) -> None:
    exp = Experiment("toy", "high-order-nonholonomic", "Toy", "h is small", _toy)
    results = [exp.run(quick=True, h=0.5)]
    # run_experiments saves figures; exercise it through a registry-free path
    from chetaev.examples._report import _save_figure

    pytest.importorskip("matplotlib")
    name = _save_figure(results[0], tmp_path)
    assert name == "toy.png" and (tmp_path / name).stat().st_size > 1000
    paths = write_report(results, tmp_path, quick=True)
    data = json.loads(paths["json"].read_text())
    (entry,) = data["experiments"]
    assert entry["name"] == "toy" and entry["mark"] == "pass"
    assert entry["checks"][0]["measured"] == 0.5
    # columns: check | measured | the paper states | pass criterion (project) | mark
    assert "| max \\|x\\| | 0.25 | — | \\|x\\| ≤ 1 | pass |" in paths["md"].read_text()
    assert "Toy" in paths["html"].read_text() and "| value | 0.5 | — | ≤ 1 | pass |" in (
        paths["md"].read_text())


def test_every_registered_experiment_names_a_known_paper() -> None:
    from chetaev.examples import PAPERS, registry

    assert registry, "no experiment is registered"
    for e in registry.values():
        assert e.paper in PAPERS and e.claim and e.title


def test_run_experiments_rejects_unknown_names() -> None:
    with pytest.raises(KeyError):
        run_experiments(["no-such-experiment"])


def test_cli_list_and_bad_option(capsys) -> None:
    from chetaev.examples import registry
    from chetaev.examples._cli import main

    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in registry)
    assert main(["run", "no-such-experiment"]) == 2
    assert "chetaev-examples list" in capsys.readouterr().err
    dsocs = next(n for n, e in registry.items() if e.paper == "dsocs-second-order-constraints")
    assert main(["run", dsocs, "--quick", "--method", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"chetaev-examples run {dsocs}: ") and len(err) > 40
