"""Models and experiments of the chetaev papers, the ``chetaev-examples`` CLI and the report.

Every figure or claim of the five papers is a registered experiment (see
:data:`registry`); ``chetaev-examples report`` runs them all and writes ``index.html``,
``report.md`` and ``results.json`` with the measured figures next to the papers' claims.
"""

from . import control, experiments, models
from ._registry import (
    PAPERS,
    Check,
    Experiment,
    Outcome,
    Result,
    check_bound,
    check_order,
    experiment,
    fit_order,
    registry,
)
from ._report import run_experiments, write_report
from ._version import __version__ as __version__

__all__ = [
    "PAPERS",
    "Check",
    "Experiment",
    "Outcome",
    "Result",
    "check_bound",
    "check_order",
    "control",
    "experiment",
    "experiments",
    "fit_order",
    "models",
    "registry",
    "run_experiments",
    "write_report",
]
