"""Shared fixtures for the cross-package tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """Run ``chetaev-examples report --quick`` once per test session; return (dir, results)."""
    if importlib.util.find_spec("chetaev.examples") is None:
        pytest.skip("chetaev-examples is not installed in this environment")
    from chetaev.examples import run_experiments, write_report

    out = tmp_path_factory.mktemp("report")
    results = run_experiments(quick=True, out=out)
    write_report(results, out, quick=True)
    return out, results
