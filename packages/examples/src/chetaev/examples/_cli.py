"""The ``chetaev-examples`` console script: ``list``, ``run NAME``, ``report``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import experiments as _experiments  # noqa: F401  (registers every experiment)
from ._registry import PAPERS, registry
from ._report import _fmt, run_experiments, write_report

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chetaev-examples",
                                description="Models and experiments of the chetaev papers.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the experiments")
    run = sub.add_parser("run", help="run one experiment and print its checks")
    run.add_argument("name", help="experiment name (see `chetaev-examples list`)")
    run.add_argument("--method", help="method variant, where the experiment offers several")
    run.add_argument("--h", type=float, help="step size")
    run.add_argument("--t-final", type=float, dest="t_final", help="final time")
    run.add_argument("--quick", action="store_true", help="the quick (smaller) version")
    run.add_argument("--out", type=Path, help="directory for the figure (PNG)")
    rep = sub.add_parser("report", help="run every experiment and write the report")
    rep.add_argument("--out", type=Path, default=Path("build/report"))
    rep.add_argument("--quick", action="store_true", help="a few minutes on 2 cores")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":
        for e in registry.values():
            print(f"{e.name:40s} [{e.paper}] {e.title}")
        return 0
    if args.command == "run":
        if args.name not in registry:
            print(f"unknown experiment {args.name!r}; `chetaev-examples list` shows the names",
                  file=sys.stderr)
            return 2
        try:
            (result,) = run_experiments([args.name], quick=args.quick, out=args.out,
                                        method=args.method, h=args.h, t_final=args.t_final)
        except ValueError as err:  # bad --method / --h / --t-final: say why, no traceback
            print(f"chetaev-examples run {args.name}: {err}", file=sys.stderr)
            return 2
        e = result.experiment
        print(f"{e.title}  [{PAPERS[e.paper]}]\nclaim: {e.claim}")
        for c in result.outcome.checks:
            print(f"  {c.mark:5s}  {c.name}: {_fmt(c.measured)}  (paper: {c.claim})")
        if result.figure:
            print(f"figure: {args.out / result.figure}")
        return 0 if result.ok else 1
    results = run_experiments(quick=args.quick, out=args.out, progress=True)
    paths = write_report(results, args.out, args.quick)
    n_ok = sum(r.ok for r in results)
    print(f"{n_ok}/{len(results)} experiments match the papers' claims.")
    print(f"Report: {paths['html'].resolve()}\n        {paths['md'].resolve()}\n"
          f"        {paths['json'].resolve()}")
    return 0 if n_ok == len(results) else 1
