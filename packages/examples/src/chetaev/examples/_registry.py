"""The experiment registry: one entry per figure or claim of the five papers.

An experiment is a plain function decorated with :func:`experiment`. It receives the run
options (``quick`` and optional overrides ``method``, ``h``, ``t_final``) and returns an
:class:`Outcome`: its data, the checks computed from the numbers (each with the paper's claim
next to the measured figure and a pass/fail mark), and optionally a function that draws the
figure on a matplotlib ``Figure``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian.testing import fit_order  # the one order fit (re-export)

__all__ = [
    "PAPERS",
    "PAPER_REFERENCES",
    "Check",
    "Experiment",
    "Outcome",
    "Result",
    "check_bound",
    "check_order",
    "experiment",
    "fit_order",
    "paper_citation",
    "registry",
]

#: The titles of the five papers, by the key the experiments use.
PAPERS: Mapping[str, str] = {
    "high-order-nonholonomic": "High-order geometric methods for nonholonomic mechanical systems",
    "homogeneous-spaces-rkmk": (
        "High-order integrators for Lagrangian systems on homogeneous spaces via nonholonomic "
        "mechanics"
    ),
    "geometric-nonholonomic-integrator": (
        "New developments on the Geometric Nonholonomic Integrator"
    ),
    "discretization-maps-holonomic": (
        "A new perspective on symplectic integration of constrained mechanical systems via "
        "discretization maps"
    ),
    "dsocs-second-order-constraints": (
        "Discrete second order constrained Lagrangian systems: first results"
    ),
}


#: The full reference of each paper (authors, title, year, where it appeared, arXiv id where
#: the project's copy gives one), by the same keys as :data:`PAPERS`.
PAPER_REFERENCES: Mapping[str, Mapping[str, str]] = {
    "high-order-nonholonomic": {
        "authors": "D. Martín de Diego, R. T. Sato Martín de Almagro",
        "title": PAPERS["high-order-nonholonomic"],
        "year": "2018",
        "venue": "preprint of 26 October 2018",
        "arxiv": "1810.10926",
    },
    "homogeneous-spaces-rkmk": {
        "authors": "R. T. Sato Martín de Almagro",
        "title": PAPERS["homogeneous-spaces-rkmk"],
        "year": "2022",
        "venue": "preprint of 31 January 2022",
        "arxiv": "2201.12022",
    },
    "geometric-nonholonomic-integrator": {
        "authors": "S. Ferraro, F. Jiménez, D. Martín de Diego",
        "title": PAPERS["geometric-nonholonomic-integrator"],
        "year": "2015",
        "venue": "Nonlinearity 28 (2015) 871–900",
        "arxiv": "1312.1587",
    },
    "discretization-maps-holonomic": {
        "authors": "M. Barbero Liñán, D. Martín de Diego, R. T. Sato Martín de Almagro",
        "title": PAPERS["discretization-maps-holonomic"],
        "year": "2024",
        "venue": "preprint of 10 December 2024",
        "arxiv": "2306.06786",
    },
    "dsocs-second-order-constraints": {
        "authors": "N. Borda, J. Fernández, S. Grillo",
        "title": PAPERS["dsocs-second-order-constraints"],
        "year": "2013",
        "venue": "J. Geom. Mech. 5 (2013) 381–397",
        "arxiv": "1312.1941",
    },
}


def paper_citation(paper: str) -> str:
    """One line: authors, "title", venue, year and arXiv id of ``paper`` (a :data:`PAPERS` key)."""
    ref = PAPER_REFERENCES[paper]
    venue = ref["venue"] if ref["year"] in ref["venue"] else f"{ref['venue']}, {ref['year']}"
    arxiv = f", arXiv:{ref['arxiv']}" if ref["arxiv"] else ""
    return f"{ref['authors']}, “{ref['title']}”, {venue}{arxiv}."


@attrs.frozen
class Check:
    """One measured figure next to what the paper claims.

    Attributes
    ----------
    name : str
        What is measured ("order of q", "max |Φ|", ...).
    measured : float
        The number the experiment computed.
    claim : str
        The paper's claim, in words or as a target ("6 ± 0.25", "< 1e-12").
    passed : bool
        Whether ``measured`` satisfies ``claim``; computed, never typed in.
    deficiency : str or None
        For a documented, known deficiency (a strict xfail in the test suite): the reason.
        A check with a deficiency is expected to fail; if it passes, the report says so.
    """

    name: str
    measured: float
    claim: str
    passed: bool
    deficiency: str | None = None

    @property
    def mark(self) -> str:
        if self.deficiency is None:
            return "pass" if self.passed else "FAIL"
        return "xfail" if not self.passed else "XPASS"

    @property
    def ok(self) -> bool:
        """True when the mark is what the project expects ("pass", or "xfail")."""
        return self.mark in ("pass", "xfail")


@attrs.frozen
class Outcome:
    """What an experiment function returns."""

    checks: tuple[Check, ...] = attrs.field(converter=tuple)
    data: dict[str, Any] = attrs.field(factory=dict)
    plot: Callable[[Any], None] | None = None
    notes: str = ""


@attrs.frozen
class Result:
    """An experiment's outcome with its metadata and run time."""

    experiment: Experiment
    outcome: Outcome
    seconds: float
    figure: str | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.outcome.checks)

    def to_json(self) -> dict[str, Any]:
        e = self.experiment
        return {
            "name": e.name,
            "paper": e.paper,
            "title": e.title,
            "claim": e.claim,
            "mark": "pass" if self.ok else "fail",
            "seconds": round(self.seconds, 3),
            "figure": self.figure,
            "notes": self.outcome.notes,
            "checks": [
                {
                    "name": c.name,
                    "measured": _jsonable(c.measured),
                    "claim": c.claim,
                    "mark": c.mark,
                    "deficiency": c.deficiency,
                }
                for c in self.outcome.checks
            ],
        }


def _jsonable(x: float) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


@attrs.frozen
class Experiment:
    """A registered experiment: metadata plus the function that runs it."""

    name: str
    paper: str
    title: str
    claim: str
    func: Callable[..., Outcome] = attrs.field(repr=False)

    def run(self, quick: bool = False, **overrides: Any) -> Result:
        """Run the experiment; ``overrides`` are ``method``, ``h`` and ``t_final``.

        Raises
        ------
        ValueError
            If ``h`` or ``t_final`` is given and is not a finite number > 0.
        """
        for key in ("h", "t_final"):
            value = overrides.get(key)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise ValueError(f"{key} must be a finite number > 0, got {value!r}; pass "
                                 f"{key}=None for the experiment's default")
        start = time.perf_counter()
        outcome = self.func(quick=quick, **{k: v for k, v in overrides.items() if v is not None})
        if not isinstance(outcome, Outcome):
            raise TypeError(f"experiment {self.name!r} returned {type(outcome).__name__}, "
                            "expected chetaev.examples.Outcome")
        return Result(self, outcome, time.perf_counter() - start)


#: name -> Experiment, in registration order.
registry: dict[str, Experiment] = {}


def experiment(name: str, *, paper: str, title: str, claim: str
               ) -> Callable[[Callable[..., Outcome]], Callable[..., Outcome]]:
    """Register an experiment function under ``name``.

    The function must accept ``quick: bool`` and may accept ``method``, ``h`` and ``t_final``
    overrides (the CLI's ``run`` options).
    """
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; expected one of {sorted(PAPERS)}")

    def register(func: Callable[..., Outcome]) -> Callable[..., Outcome]:
        if name in registry:
            raise ValueError(f"experiment {name!r} is registered twice")
        registry[name] = Experiment(name, paper, title, claim, func)
        return func

    return register


def check_order(name: str, hs: Any, errors: Any, expected: float, tol: float = 0.25,
                floor: float = 1e-13, deficiency: str | None = None) -> Check:
    """A :class:`Check` that the fitted order is ``expected ± tol``."""
    slope = fit_order(hs, errors, floor)
    return Check(name, slope, f"{expected:g} ± {tol:g}", abs(slope - expected) <= tol, deficiency)


def check_bound(name: str, value: float, bound: float, claim: str | None = None,
                deficiency: str | None = None) -> Check:
    """A :class:`Check` that ``value <= bound`` (and is finite)."""
    value = float(value)
    passed = bool(np.isfinite(value) and value <= bound)
    return Check(name, value, claim or f"≤ {bound:.1e}", passed, deficiency)
