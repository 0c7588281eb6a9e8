"""The ``chetaev-examples`` console script: ``list``, ``run NAME``, ``report``."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from . import experiments as _experiments  # noqa: F401  (registers every experiment)
from ._registry import PAPERS, registry
from ._report import _fmt, run_experiments, write_report
from ._version import __version__

__all__ = ["main"]

#: The values ``--method`` accepts, by experiment (shown by ``chetaev-examples run --help``).
METHOD_CHOICES: dict[str, str] = {
    "dm-orders-spherical-pendulum": "euler_a, euler_b, midpoint, rattle, euler_ba, "
                                    "triple_jump_rattle",
    "dm-constraints-energy": "euler_a, euler_b, midpoint, rattle, euler_ba, triple_jump_rattle",
    "dm-symplecticity": "euler_a, euler_b, midpoint, rattle, euler_ba, triple_jump_rattle",
    "dm-lie-heavy-top": "euler_a, euler_b, lobatto2, rattle",
    "dsocs-*": "none (each experiment has one scheme: omit --method)",
    "gni-particle-orders": "euler_a, euler_b, rattle, composition, affine_rattle",
    "gni-ball-*, gni-adjoint-reversibility": "cayley, exp (the retraction of the reduced GNI)",
    "high-order-fig3-particle-orders": "lagrangian (default), hamiltonian (eq. 15)",
    "high-order-fig4-5-cvt-energies, high-order-fig6-chaotic-mse, "
    "high-order-fig8-ball-integrals": "the Lobatto stage count s, an integer 2..8",
    "high-order-fig7-disc-orders": "cayley, exp",
    "homogeneous-*": "cayley, exp (the retraction)",
}


def _positive(name: str):
    """An argparse ``type`` accepting only a finite number > 0 for the option ``name``."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a number, got {text!r}; e.g. {name} 0.01") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(
                f"{name} must be a finite number > 0, got {text}; omit {name} for the "
                "experiment's default") from None
        return value

    return convert


def _method_epilog() -> str:
    width = max(len(n) for k in METHOD_CHOICES for n in k.split(", "))
    lines = ["valid --method values, by experiment:"]
    for names, values in METHOD_CHOICES.items():
        for i, name in enumerate(names.split(", ")):
            lines.append(f"  {name:{width}s}  {values if i == 0 else '(same)'}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chetaev-examples",
                                description="Models and experiments of the chetaev papers.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the experiments")
    run = sub.add_parser("run", help="run one experiment and print its checks",
                         epilog=_method_epilog(),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("name", help="experiment name (see `chetaev-examples list`)")
    run.add_argument("--method", help="method variant, where the experiment offers several "
                     "(the values are listed below)")
    run.add_argument("--h", type=_positive("--h"), help="step size (> 0)")
    run.add_argument("--t-final", type=_positive("--t-final"), dest="t_final",
                     help="final time (> 0; a multiple of the step size)")
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
    print(f"Report: {paths['html'].resolve()}\n"
          f"        {paths['standalone'].resolve()} (self-contained, to mail)\n"
          f"        {paths['md'].resolve()}\n        {paths['json'].resolve()}")
    return 0 if n_ok == len(results) else 1
