"""Run experiments and write the report: ``index.html``, ``report.md``, ``results.json``, PNGs."""

from __future__ import annotations

import html
import json
import platform
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ._registry import PAPERS, Experiment, Result, registry

__all__ = ["run_experiments", "write_report"]


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


def _md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell (norms |x| would split the cell)."""
    return text.replace("|", "\\|")


def write_report(results: list[Result], out: Path, quick: bool) -> dict[str, Path]:
    """Write ``index.html``, ``report.md`` and ``results.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n_ok = sum(r.ok for r in results)
    summary = (f"{n_ok} of {len(results)} experiments match the papers' claims "
               f"({'quick' if quick else 'full'} run, {stamp}, Python "
               f"{platform.python_version()}, numpy {np.__version__}).")

    by_paper: dict[str, list[Result]] = {}
    for r in results:
        by_paper.setdefault(r.experiment.paper, []).append(r)

    md = ["# chetaev: reproduction of the papers", "", summary, ""]
    body = [f"<h1>chetaev: reproduction of the papers</h1><p>{html.escape(summary)}</p>"]
    for paper, rs in by_paper.items():
        md += [f"## {PAPERS[paper]}", ""]
        body.append(f"<h2>{html.escape(PAPERS[paper])}</h2>")
        for r in rs:
            e = r.experiment
            mark = "pass" if r.ok else "FAIL"
            md += [f"### {e.title} — {mark}", "", f"*Claim:* {e.claim}", "",
                   "| check | measured | paper | mark |", "|---|---|---|---|"]
            rows = []
            for c in r.outcome.checks:
                note = f" ({c.deficiency})" if c.deficiency else ""
                md.append(f"| {_md_cell(c.name)} | {_fmt(c.measured)} | {_md_cell(c.claim)} | "
                          f"{c.mark}{_md_cell(note)} |")
                rows.append(
                    f"<tr class='{c.mark.lower()}'><td>{html.escape(c.name)}</td>"
                    f"<td>{_fmt(c.measured)}</td><td>{html.escape(c.claim)}</td>"
                    f"<td>{c.mark}{html.escape(note)}</td></tr>")
            if r.outcome.notes:
                md += ["", r.outcome.notes]
            if r.figure:
                md += ["", f"![{e.title}]({r.figure})"]
            md += ["", f"`chetaev-examples run {e.name}` — {r.seconds:.1f} s", ""]
            body.append(
                f"<section id='{e.name}'><h3>{html.escape(e.title)} "
                f"<span class='{mark.lower()}'>{mark}</span></h3>"
                f"<p><em>Claim:</em> {html.escape(e.claim)}</p>"
                "<table><tr><th>check</th><th>measured</th><th>paper</th><th>mark</th></tr>"
                + "".join(rows) + "</table>"
                + (f"<p>{html.escape(r.outcome.notes)}</p>" if r.outcome.notes else "")
                + (f"<img src='{r.figure}' alt='{html.escape(e.title)}'>" if r.figure else "")
                + f"<p class='cmd'><code>chetaev-examples run {e.name}</code> — "
                f"{r.seconds:.1f} s</p></section>")

    style = ("body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2em .6em}"
             ".pass{color:#1a7f37}.fail{color:#c00;font-weight:bold}.xfail{color:#8a6d00}"
             "img{max-width:100%;display:block;margin:.5em 0}.cmd{color:#666}")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>chetaev report</title>"
            f"<style>{style}</style></head><body>" + "".join(body) + "</body></html>")
    paths = {"html": out / "index.html", "md": out / "report.md", "json": out / "results.json"}
    paths["html"].write_text(page, encoding="utf-8")
    paths["md"].write_text("\n".join(md) + "\n", encoding="utf-8")
    paths["json"].write_text(json.dumps({"quick": quick, "generated": stamp,
                                         "experiments": [r.to_json() for r in results]},
                                        indent=2), encoding="utf-8")
    return paths
