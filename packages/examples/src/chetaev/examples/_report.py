"""Run experiments and write the report: ``index.html`` (with PNGs), ``report.html`` (one
self-contained file, images embedded), ``report.md`` and ``results.json``."""

from __future__ import annotations

import base64
import html
import json
import platform
import re
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ._registry import PAPERS, Check, Experiment, Result, paper_citation, registry

__all__ = ["PAPER_STATEMENTS", "run_experiments", "write_report"]


def _progress(items: list[Experiment], enabled: bool) -> Iterator[Experiment]:
    if enabled:
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is an optional extra
            pass
        else:
            yield from tqdm(items, desc="experiments", unit="exp", file=sys.stderr)
            return
    yield from items


def _save_figure(result: Result, out: Path) -> str | None:
    plot = result.outcome.plot
    if plot is None:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig = plt.figure(figsize=(7.0, 4.2))
    try:
        plot(fig)
        name = f"{result.experiment.name}.png"
        fig.savefig(out / name, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return name


def run_experiments(names: Iterable[str] | None = None, *, quick: bool = False,
                    out: Path | None = None, progress: bool = False,
                    **overrides: Any) -> list[Result]:
    """Run the named experiments (all by default) and, with ``out``, save their figures."""
    chosen = [registry[n] for n in names] if names is not None else list(registry.values())
    results = []
    for exp in _progress(chosen, progress):
        result = exp.run(quick=quick, **overrides)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            figure = _save_figure(result, out)
            result = Result(result.experiment, result.outcome, result.seconds, figure)
        results.append(result)
    return results


def _fmt(x: float) -> str:
    x = float(x)
    if not np.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e4):
        return f"{x:.2e}"
    return f"{x:.4g}"


#: Where each experiment sits in its paper, for those whose title does not start with it.
_LOCATION = {
    "dm-orders-spherical-pendulum": "§5.1–5.2",
    "dm-constraints-energy": "Thm. 4.5, §1",
    "dm-symplecticity": "Thm. 4.5",
    "dm-lie-heavy-top": "§6, Ex. 5.3",
    "gni-particle-orders": "Thm 5.2, Rem. 5.1, 5.5",
    "gni-ball-conservation": "§7.4",
    "gni-adjoint-reversibility": "Thm 5.4",
}

#: What the paper itself states for each check, by experiment: (regular expression on the check
#: name, statement). A check that matches nothing gets "—": the paper gives no number for it, and
#: the pass criterion is the project's own (its own column).
PAPER_STATEMENTS: dict[str, list[tuple[str, str]]] = {
    "dm-orders-spherical-pendulum": [
        (r"order of Euler [AB]", "order 1 (§5.1)"),
        (r"order of (midpoint|RATTLE)", "order 2 (§5.1.3, §5.2)"),
        (r"order of B\(h/2\)", "order 2 (Ex. 5.1)"),
        (r"order of triple jump", "higher order by composition (§5.2)"),
        (r"φ\(q_k\)", "q_k ∈ N (Thm. 4.5)"),
        (r"Ex\. 5\.1", "RATTLE is this composition (Ex. 5.1)"),
    ],
    "dm-constraints-energy": [
        (r"^baseline", "the stage-constrained scheme (1.2) leaves N (§1)"),
        (r"φ\(q_k\)", "q_k ∈ N exactly (Thm. 4.5)"),
        (r"M⁻¹p_k", "p_k ∈ Leg(TN) exactly (Thm. 4.5)"),
    ],
    "dm-symplecticity": [(r"^(?!control)", "symplectic on T*N (Thm. 4.5)")],
    "dm-lie-heavy-top": [
        (r"Euler [AB].*order", "order 1 (§6.2)"),
        (r"(lobatto|Lobatto).*order", "order 2 ((6.4)–(6.7))"),
        (r"RATTLE.*order", "order 2 ((6.8)–(6.10), Ex. 5.3)"),
        (r"max \|", "constraints hold exactly"),
    ],
    "dsocs-particle-figure-2": [
        (r"spread", "amplitude and frequency kept (Fig. 2)"),
        (r"reversib", "symmetric method (§4.1)"),
    ],
    "dsocs-particle-figure-3": [(r"^paper start: LS slope", "slope ≈ 1.6, 'convergent of "
                                                            "order 1' (Fig. 3)")],
    "dsocs-wheel-figure-5": [
        (r"dV/dt", "the Lyapunov constraint dV/dt = −F holds (eq. (8))"),
        (r"V_d", "V ≈ 0 at t ≈ 500 (Fig. 5)"),
        (r"θ_k", "upright at t ≈ 1000 (Fig. 5)"),
    ],
    "dsocs-wheel-figure-6": [(r"^paper start: LS slope", "slope ≈ 1.3, 'order 1' (Fig. 6)")],
    "dsocs-theorem-5-3": [
        (r"dξ", "F*Ω = Ω + dξ (Thm 5.3)"),
        (r"not symplectic", "not symplectic in general (Thm 5.3)"),
        (r"D_V", "ξ vanishes on D_V (Rem. 5.4)"),
    ],
    "gni-particle-orders": [
        (r"GNI Euler [AB]", "order 1 (Thm 5.2)"),
        (r"nonholonomic RATTLE", "order 2 (Rem. 5.1, cited)"),
        (r"F_A", "'still generates a second order method' (Rem. 5.5)"),
        (r"Φ", "constraints hold at the nodes (Def 4.1)"),
    ],
    "gni-ball-figure-1": [(r"^paper start: order of the position", "'order-one consistent' "
                                                                  "(§7.4)")],
    "gni-ball-figure-2": [(r"centre|radius|drift", "circle of centre (−1.5, 3.5), radius √2/0.4, "
                                                   "no drift (Fig. 2)")],
    "gni-ball-figure-3": [
        (r"^paper start: (position|ω) error slope", "∝ h (Fig. 3 guide line)"),
        (r"^paper start: centred energy", "∝ h² (Fig. 3 guide line)"),
    ],
    "gni-ball-conservation": [
        (r"E_d", "energy preserved (bi-invariant metric, V = 0; cited from [23])"),
        (r"J3 − J3", "nonholonomic momentum preserved (I1 = I2)"),
    ],
    "gni-adjoint-reversibility": [
        (r"^max \|F_A", "F_A^h∘F_B^{−h} = Id (Thm 5.4)"),
        (r"RATTLE|ball scheme", "time-reversible"),
    ],
    "high-order-fig3-particle-orders": [
        (r"order of [qp]$", "order 2s − 2 (Fig. 3)"),
        (r"order of λ", "order s (even s), s − 1 (odd s) (Fig. 3)"),
    ],
    "high-order-fig4-5-cvt-energies": [
        (r"h = 0\.1\)?$|2nd half", "bounded, no drift at h = 0.1 (Figs. 4–5)"),
        (r"π/10", "erratic at h = π/10 (Fig. 5)"),
    ],
    "high-order-fig6-chaotic-mse": [(r"μ/h", "μ/h⁴ (s = 2) and μ/h¹⁰ (s = 3) collapse "
                                             "(Fig. 6)")],
    "high-order-fig7-disc-orders": [
        (r"order of (g|η)$", "order 2s − 2 (Fig. 7)"),
        (r"order of λ", "order s (even s), s − 1 (odd s) (Fig. 7)"),
        (r"v₂", "the constraint holds at the nodes"),
    ],
    "high-order-fig8-ball-integrals": [
        (r"ΔI", "preserved (Fig. 8)"),
        (r"E_mov", "bounded, no drift (Fig. 8)"),
    ],
    "homogeneous-fig5-sphere-orders": [
        (r"order of (x|ẋ)$", "slope 2s − 2: 2, 4, 6 (Fig. 5)"),
        (r"s=2: max \|Λ\|", "better than predicted for s = 2 (Fig. 5)"),
        (r"order of Λ", "2 for s = 3, 4 for s = 4 (Fig. 5)"),
        (r"\|x\| − 1", "x stays on S²"),
    ],
    "homogeneous-fig1-4-pendulum-energy": [
        (r"s=[24].*(E − E0|energy error)", "bounded (Figs. 1–2)"),
        (r"s=[24].*Λ", "bounded (Figs. 1–2)"),
        (r"s=3 carry", "the multiplier drifts (Fig. 3)"),
        (r"s=3 (?!carry)", "another closure works well (Fig. 4)"),
        (r"\|x\| − 1", "x stays on S²"),
    ],
    "homogeneous-fig4-weighted-sum-closure": [(r"C3", "'works rather well' (Fig. 4)")],
    "homogeneous-fig6-kepler-orbits": [
        (r"s=\d over s=\d", "the lower the order, the more precession (Fig. 6)"),
        (r"\|x\| − 1", "the orbit stays on S²"),
    ],
}


def paper_statement(experiment: str, check: Check) -> str:
    """What the paper states for ``check`` of ``experiment``; "—" where it gives nothing."""
    for pattern, statement in PAPER_STATEMENTS.get(experiment, []):
        if re.search(pattern, check.name):
            return statement
    return "—"


def _location(e: Experiment) -> str:
    m = re.match(r"((?:Figs?|Table|Theorem|Thm)\.?\s[^:]+):", e.title)
    return m.group(1) if m else _LOCATION.get(e.name, "text")


def _headline(r: Result) -> tuple[str, str]:
    """The measured figure shown in the summary: the first check that fails, else the first."""
    checks = r.outcome.checks
    decisive = next((c for c in checks if not c.ok), checks[0]) if checks else None
    n_ok = sum(c.ok for c in checks)
    if decisive is None:
        return "no check", "0/0"
    return f"{decisive.name}: {_fmt(decisive.measured)}", f"{n_ok}/{len(checks)} checks"


#: Rewrites of references to the project's internal notes (not part of the repository) in the
#: texts the experiments give, so the report cites only the papers and the project itself.
_PUBLIC = [
    (re.compile(r"spec \[(?:V|CHECKED)\]"), "the project's independent check"),
    (re.compile(r"spec (?:[A-Z]\d+, )?Addendum"), "the project's long-run check"),
    (re.compile(r"\ba spec proposal\b"), "the project's choice"),
    (re.compile(r"\bspec proposals?\b"), "the project's choice"),
    (re.compile(r"\s*\(spec \u00a7?[A-Z]?[\d.]+(?:/[\d.]+)*\)"), ""),
    (re.compile(r"spec \u00a7[\d.]+(?:[–-][\d.]+)?,\s*"), ""),
    (re.compile(r"(?:,\s*|\s*)\bspec (?:row |item )?[A-Z]?\d+(?:\.\d+)*(?:/[A-Z]?[\d.]+)*"
                r"(?=[),;])"), ""),
    (re.compile(r"\bspec (?:row |item )?[A-Z]?\d+(?:\.\d+)*(?:/[A-Z]?[\d.]+)*[:,]?\s*"), ""),
    (re.compile(r"\b(?:the )?spec's\b"), "the project's"),
    (re.compile(r"\bspec\b"), "the project's reference"),
    (re.compile(r"\(\s*,\s*"), "("),
    (re.compile(r"\b([Tt])he the project's"), r"\1he project's"),
]


def _public(text: str) -> str:
    """``text`` without references to the project's internal notes."""
    for pattern, repl in _PUBLIC:
        text = pattern.sub(repl, text)
    return text


def _md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell (norms |x| would split the cell)."""
    return _public(text).replace("|", "\\|")


def _verdict(r: Result) -> str:
    return "pass" if r.ok else "FAIL"


_STYLE = ("body{font-family:sans-serif;max-width:64em;margin:auto;padding:1em;line-height:1.4}"
          "table{border-collapse:collapse;margin:.5em 0}"
          "td,th{border:1px solid #bbb;padding:.2em .5em;vertical-align:top}"
          "th{background:#f3f3f3}.pass{color:#1a7f37}.fail{color:#c00;font-weight:bold}"
          ".xfail{color:#8a6d00}.xpass{color:#c00}.ref{color:#333;font-style:italic}"
          "img{max-width:100%;display:block;margin:.5em 0}.cmd{color:#666}"
          "nav ul{margin:.2em 0}table.summary td:nth-child(4){max-width:18em}")


def _figure_src(name: str, out: Path, embed: bool) -> str:
    if not embed:
        return name
    data = base64.b64encode((out / name).read_bytes()).decode("ascii")
    return f"data:image/png;base64,{data}"


def _html(results: list[Result], by_paper: dict[str, list[Result]], summary: str, out: Path,
          embed: bool) -> str:
    def esc(text: str) -> str:
        return html.escape(_public(text))

    toc = ["<nav id='toc'><h2>Contents</h2><ul><li><a href='#summary'>Summary</a></li>"]
    for paper, rs in by_paper.items():
        toc.append(f"<li><a href='#paper-{paper}'>{esc(PAPERS[paper])}</a><ul>")
        toc += [f"<li><a href='#{r.experiment.name}'>{esc(r.experiment.title)}</a> "
                f"<span class='{_verdict(r).lower()}'>{_verdict(r)}</span></li>" for r in rs]
        toc.append("</ul></li>")
    toc.append("</ul></nav>")
    rows = []
    for r in results:
        e = r.experiment
        measured, count = _headline(r)
        rows.append(
            f"<tr><td><a href='#{e.name}'>{esc(e.name)}</a></td>"
            f"<td>{esc(PAPER_REFERENCES_SHORT[e.paper])}, {esc(_location(e))}</td>"
            f"<td>{esc(e.claim)}</td><td>{esc(measured)} ({count})</td>"
            f"<td class='{_verdict(r).lower()}'>{_verdict(r)}</td></tr>")
    table = ("<h2 id='summary'>Summary</h2><table class='summary'><tr><th>experiment</th>"
             "<th>paper, figure / table</th><th>the paper's claim</th><th>measured</th>"
             "<th>verdict</th></tr>" + "".join(rows) + "</table>"
             "<p>Columns of every experiment's table: <em>the paper states</em> holds only what "
             "the paper says (— where it gives no number); <em>pass criterion</em> is the "
             "project's own test of it, with its tolerance or the project's reference value; "
             "a mark <span class='xfail'>xfail</span> is a documented deficiency that is "
             "expected to fail.</p>")
    body = [f"<h1>chetaev: reproduction of the papers</h1><p>{esc(summary)}</p>", table, *toc]
    for paper, rs in by_paper.items():
        body.append(f"<h2 id='paper-{paper}'>{esc(PAPERS[paper])}</h2>"
                    f"<p class='ref'>{esc(paper_citation(paper))}</p>")
        for r in rs:
            e = r.experiment
            mark = _verdict(r)
            cells = []
            for c in r.outcome.checks:
                note = f" ({c.deficiency})" if c.deficiency else ""
                cells.append(
                    f"<tr class='{c.mark.lower()}'><td>{esc(c.name)}</td>"
                    f"<td>{_fmt(c.measured)}</td><td>{esc(paper_statement(e.name, c))}</td>"
                    f"<td>{esc(c.claim)}</td><td>{c.mark}{esc(note)}</td></tr>")
            figure = ""
            if r.figure:
                figure = (f"<img src='{_figure_src(r.figure, out, embed)}' "
                          f"alt='{esc(e.title)}'>")
            body.append(
                f"<section id='{e.name}'><h3>{esc(e.title)} "
                f"<span class='{mark.lower()}'>{mark}</span></h3>"
                f"<p><em>The paper's claim ({esc(_location(e))}):</em> {esc(e.claim)}</p>"
                "<table><tr><th>check</th><th>measured</th><th>the paper states</th>"
                "<th>pass criterion (project)</th><th>mark</th></tr>"
                + "".join(cells) + "</table>"
                + (f"<p>{esc(r.outcome.notes)}</p>" if r.outcome.notes else "")
                + figure
                + f"<p class='cmd'><code>chetaev-examples run {e.name}</code> — "
                f"{r.seconds:.1f} s · <a href='#toc'>contents</a></p></section>")
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<title>chetaev report</title>"
            f"<style>{_STYLE}</style></head><body>" + "".join(body) + "</body></html>")


def _markdown(results: list[Result], by_paper: dict[str, list[Result]], summary: str
              ) -> list[str]:
    md = ["# chetaev: reproduction of the papers", "", summary, "", "## Summary", "",
          "| experiment | paper, figure / table | the paper's claim | measured | verdict |",
          "|---|---|---|---|---|"]
    for r in results:
        e = r.experiment
        measured, count = _headline(r)
        md.append(f"| [{e.name}](#{e.name}) | {PAPER_REFERENCES_SHORT[e.paper]}, "
                  f"{_md_cell(_location(e))} | {_md_cell(e.claim)} | {_md_cell(measured)} "
                  f"({count}) | {_verdict(r)} |")
    md += ["", "## Contents", "", "- [Summary](#summary)"]
    for paper, rs in by_paper.items():
        md.append(f"- {PAPERS[paper]}")
        md += [f"  - [{_public(r.experiment.title)}](#{r.experiment.name}) — {_verdict(r)}"
               for r in rs]
    md.append("")
    for paper, rs in by_paper.items():
        md += [f"## {PAPERS[paper]}", "", f"*{paper_citation(paper)}*", ""]
        for r in rs:
            e = r.experiment
            md += [f'<a id="{e.name}"></a>', "",
                   f"### {_public(e.title)} — {_verdict(r)}", "",
                   f"*The paper's claim ({_location(e)}):* {_public(e.claim)}", "",
                   "| check | measured | the paper states | pass criterion (project) | mark |",
                   "|---|---|---|---|---|"]
            for c in r.outcome.checks:
                note = f" ({c.deficiency})" if c.deficiency else ""
                md.append(f"| {_md_cell(c.name)} | {_fmt(c.measured)} | "
                          f"{_md_cell(paper_statement(e.name, c))} | {_md_cell(c.claim)} | "
                          f"{c.mark}{_md_cell(note)} |")
            if r.outcome.notes:
                md += ["", _public(r.outcome.notes)]
            if r.figure:
                md += ["", f"![{e.title}]({r.figure})"]
            md += ["", f"`chetaev-examples run {e.name}` — {r.seconds:.1f} s", ""]
    return md


#: Short labels of the papers for the summary table (first author, year).
PAPER_REFERENCES_SHORT = {
    "high-order-nonholonomic": "Martín de Diego & Sato 2018",
    "homogeneous-spaces-rkmk": "Sato 2022",
    "geometric-nonholonomic-integrator": "Ferraro, Jiménez & Martín de Diego 2015",
    "discretization-maps-holonomic": "Barbero Liñán, Martín de Diego & Sato 2024",
    "dsocs-second-order-constraints": "Borda, Fernández & Grillo 2013",
}


def write_report(results: list[Result], out: Path, quick: bool) -> dict[str, Path]:
    """Write ``index.html`` (PNGs beside it), ``report.html`` (self-contained: the same page
    with the images embedded as data URIs, to mail), ``report.md`` and ``results.json``."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n_ok = sum(r.ok for r in results)
    summary = (f"{n_ok} of {len(results)} experiments match the papers' claims "
               f"({'quick' if quick else 'full'} run, {stamp}, Python "
               f"{platform.python_version()}, numpy {np.__version__}).")
    by_paper: dict[str, list[Result]] = {}
    for r in results:
        by_paper.setdefault(r.experiment.paper, []).append(r)
    paths = {"html": out / "index.html", "standalone": out / "report.html",
             "md": out / "report.md", "json": out / "results.json"}
    paths["html"].write_text(_html(results, by_paper, summary, out, embed=False),
                             encoding="utf-8")
    paths["standalone"].write_text(_html(results, by_paper, summary, out, embed=True),
                                   encoding="utf-8")
    paths["md"].write_text("\n".join(_markdown(results, by_paper, summary)) + "\n",
                           encoding="utf-8")
    paths["json"].write_text(json.dumps({"quick": quick, "generated": stamp,
                                         "experiments": [r.to_json() for r in results]},
                                        indent=2), encoding="utf-8")
    return paths
