"""The report's layout (issue 19): summary table and contents at the top, each paper's full
reference at the head of its section, the paper's statements apart from the project's
criteria, and a self-contained HTML copy with the figures embedded."""

from __future__ import annotations

import base64
import re

import pytest
from chetaev.examples import PAPERS, Check, Experiment, Outcome, registry
from chetaev.examples._registry import PAPER_REFERENCES, paper_citation
from chetaev.examples._report import PAPER_STATEMENTS, _save_figure, paper_statement, write_report


def _toy(quick: bool = False) -> Outcome:
    def plot(fig) -> None:
        fig.add_subplot().plot([0, 1], [0, 1])

    return Outcome([Check("order of q", 2.01, "2 ± 0.25", True),
                    Check("max |Φ|", 1.0, "≤ 1e-12", False)], {}, plot)


@pytest.fixture()
def report(tmp_path):
    pytest.importorskip("matplotlib")
    ok = Experiment("toy-ok", "high-order-nonholonomic", "Fig. 3: toy", "order 2", _toy)
    bad = Experiment("toy-bad", "dsocs-second-order-constraints", "Toy two", "bounded", _toy)
    results = []
    for exp in (ok, bad):
        r = exp.run()
        figure = _save_figure(r, tmp_path)
        results.append(type(r)(r.experiment, r.outcome, r.seconds, figure))
    return write_report(results, tmp_path, quick=True), tmp_path


def test_summary_then_contents_come_first(report):
    paths, _ = report
    page = paths["html"].read_text()
    summary, contents = page.index("id='summary'"), page.index("id='toc'")
    first_section = page.index("<section")
    assert summary < contents < first_section
    # one summary row per experiment, linking to its section, with the failing check shown
    rows = re.findall(r"<tr><td><a href='#(toy-[a-z]+)'>", page)
    assert rows == ["toy-ok", "toy-bad"]
    assert "max |Φ|: 1 (1/2 checks)" in page
    assert "Martín de Diego &amp; Sato 2018, Fig. 3" in page
    md = paths["md"].read_text()
    assert md.index("## Summary") < md.index("## Contents") < md.index("### Fig. 3: toy")


def test_each_paper_section_opens_with_its_full_reference(report):
    paths, _ = report
    page = paths["html"].read_text()
    for paper in ("high-order-nonholonomic", "dsocs-second-order-constraints"):
        head = page.index(f"id='paper-{paper}'")
        ref = page.index("arXiv:" + PAPER_REFERENCES[paper]["arxiv"], head)
        assert ref < page.index("<section", head)
    assert "N. Borda, J. Fernández, S. Grillo" in page


def test_every_paper_has_a_full_reference():
    for paper in PAPERS:
        ref = PAPER_REFERENCES[paper]
        assert ref["authors"] and ref["title"] == PAPERS[paper] and re.fullmatch(r"\d{4}",
                                                                                 ref["year"])
        assert ref["year"] in paper_citation(paper)


def test_standalone_html_embeds_every_figure(report):
    paths, out = report
    page = paths["standalone"].read_text()
    images = re.findall(r"<img src='([^']+)'", page)
    assert len(images) == 2
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == (out / "toy-ok.png").read_bytes()
    assert "src='toy" not in page  # nothing refers to a file beside it


def test_paper_column_holds_only_paper_statements():
    check = Check("s=3: order of λ", 2.0, "2 ± 0.25", True)
    assert paper_statement("high-order-fig3-particle-orders", check).startswith("order s")
    assert paper_statement("no-such-experiment", check) == "—"
    for name, rules in PAPER_STATEMENTS.items():
        assert name in registry, f"PAPER_STATEMENTS names an unknown experiment {name!r}"
        for pattern, statement in rules:
            re.compile(pattern)
            assert "spec" not in statement.lower() and "±" not in statement


@pytest.mark.parametrize(("text", "public"), [
    ("0 (symmetric, spec 3.7/3.11)", "0 (symmetric)"),
    ("RATTLE (spec A6).", "RATTLE."),
    ("4.011e-2 (spec [V], rel. diff ≤ 0.01)", "4.011e-2 (the project's independent check, "
                                              "rel. diff ≤ 0.01)"),
    ("order 2 (spec row 3.10, not claimed by the paper)", "order 2 (not claimed by the paper)"),
    ("the multiplier drifts (spec F6, Addendum)", "the multiplier drifts (the project's "
                                                  "long-run check)"),
])
def test_report_text_cites_no_internal_notes(text, public):
    from chetaev.examples._report import _public

    assert _public(text) == public


def test_rendered_report_has_no_internal_references(tmp_path):
    def noted(quick: bool = False) -> Outcome:
        return Outcome([Check("slope (spec \u00a74.3, not in the paper)", 2.0,
                              "2.04 (spec [CHECKED], rel. diff ≤ 1e-3)", True)], {},
                       notes="T: spec proposals.")

    exp = Experiment("toy", "high-order-nonholonomic", "Toy (spec A2)", "claim", noted)
    paths = write_report([exp.run()], tmp_path, quick=True)
    for key in ("html", "standalone", "md"):
        assert not re.search(r"\bspec\b", paths[key].read_text()), key
