"""Side-by-side per-step cost of two or more source trees (issue 15's performance gate).

Run::

    python benchmarks/compare_trees.py TREE_A TREE_B [TREE_C ...] [--rounds N] [--quick]
                                       [--json PATH]

Each TREE is a checkout of the project (a directory holding ``packages/*/src``). For every
round and every tree, a fresh subprocess is started with only that tree's ``packages/*/src``
on ``PYTHONPATH``; it times each case once and prints JSON. The trees are interleaved round by
round (the order rotates from one round to the next, so a drift of the machine's load falls on
every tree alike). The table gives, per case and tree, the minimum and the median over the
rounds of CPU µs per step (``time.process_time``; per trajectory-step for the batch) and the
ratio of each to the first tree's. A last column gives the largest difference of the final
state from the first tree's (the trees must compute the same steps; a difference above
round-off means the comparison is not like for like).

Cases (h = 0.1 unless stated; Lobatto IIIA-IIIB s = 3; Cayley retraction):

* ``particle``: ``NonholonomicPRK`` on the particle of the high-order paper §7.1, one step;
* ``chaotic``: ``NonholonomicPRK`` on the chaotic system of §7.3 (member j = 3 of the
  ensemble), one step;
* ``chaotic B=64``: the same on 64 members at once, per trajectory-step;
* ``ball``: ``LieNonholonomicPRK(3)`` on the ball on a turntable, SO(3)×R² (§7.5), one step;
* ``heavy top``: ``LieVPRK`` on the heavy top, SO(3), h = 0.05, one step.

The worker handles the small API differences between trees (the ball's models moved from the
private ``nh_integrators._lie_testing`` to the public ``nh_integrators.testing``).
``OPENBLAS_NUM_THREADS`` (and ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) default to 1 in the
workers unless set in the environment; the header states them. Every method is built with
``backend="numpy"`` where the tree has that keyword (issue 17): the base tree has no compiled
backend, so the gate compares numpy path with numpy path.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["CASES", "main", "run_worker"]

CASES = ("particle", "chaotic", "chaotic B=64", "ball", "heavy top")
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# ---------------------------------------------------------------- worker (one tree)


def _numpy_method(cls, *args):
    """``cls(*args)`` on the numpy path: ``backend="numpy"`` where the tree has the keyword
    (issue 17's compiled backend); older trees (the pre-redesign base) have only numpy."""
    try:
        return cls(*args, backend="numpy")
    except TypeError:  # a tree without the ``backend`` keyword
        return cls(*args)


def _problems():
    """(method, system, q0, v0, h, batch size) per case, built with the worker's tree; every
    method on the numpy path (``backend="numpy"``), the only path the base tree has."""
    from chetaev.discrete_lagrangian import LieVPRK
    from chetaev.discrete_lagrangian import testing as dlt
    from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
    from chetaev.nh_integrators import testing as nht
    from chetaev.rktableaux import lobatto_iiia_iiib

    try:
        from chetaev.nh_integrators.testing import ball_initial, turntable_ball
    except ImportError:  # older trees: private module
        from chetaev.nh_integrators._lie_testing import ball_initial, turntable_ball

    pair = lobatto_iiia_iiib(3)
    chaotic = nht.chaotic_system()
    cq, cv = nht.chaotic_ensemble(63)
    gb, eb = ball_initial()
    return {
        "particle": (_numpy_method(NonholonomicPRK, pair), nht.particle_system(),
                     nht.PARTICLE_Q0.copy(), nht.PARTICLE_V0.copy(), 0.1, 1),
        "chaotic": (_numpy_method(NonholonomicPRK, pair), chaotic, cq[3].copy(), cv[3].copy(),
                    0.1, 1),
        "chaotic B=64": (_numpy_method(NonholonomicPRK, pair), chaotic, cq, cv, 0.1, 64),
        "ball": (_numpy_method(LieNonholonomicPRK, 3), turntable_ball(), gb, eb, 0.1, 1),
        "heavy top": (_numpy_method(LieVPRK, pair), dlt.heavy_top(), np.eye(3),
                      np.array([0.3, 1.0, -0.4]), 0.05, 1),
    }


def _final(state) -> np.ndarray:
    """The configuration and velocity of a method state as one flat array (any tree)."""
    parts = []
    for name in ("q", "g", "v", "eta", "p"):
        x = getattr(state, name, None)
        if x is not None and not callable(x):
            parts.append(np.ravel(np.asarray(x, dtype=float)))
    if not parts and isinstance(state, tuple):
        parts = [np.ravel(np.asarray(x, dtype=float)) for x in state[:2]]
    return np.concatenate(parts) if parts else np.zeros(0)


def run_worker(n_steps: dict[str, int]) -> dict[str, dict]:
    """Time every case once in this process: CPU µs per (trajectory-)step over ``n_steps``
    steps after three warm-up steps, and the final state (for the like-for-like check)."""
    out = {}
    for case, (method, system, q0, v0, h, batch) in _problems().items():
        st = method.initial_state(system, q0, v0)
        for _ in range(3):
            st = method.step(system, st, h)
        n = n_steps[case]
        t0 = time.process_time()
        for _ in range(n):
            st = method.step(system, st, h)
        us = (time.process_time() - t0) / (n * batch) * 1e6
        out[case] = {"us": us, "final": _final(st).tolist()}
    return out


# ---------------------------------------------------------------- driver (all trees)


def _tree_path(tree: Path) -> str:
    srcs = sorted((tree / "packages").glob("*/src"))
    if not srcs:
        raise SystemExit(f"{tree}: no packages/*/src (give the root of a checkout)")
    return os.pathsep.join(str(s) for s in srcs)


def _git_rev(tree: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def _run_one(tree: Path, n_steps: dict[str, int]) -> dict[str, dict]:
    env = dict(os.environ)
    for var in _THREAD_VARS:
        env.setdefault(var, "1")
    env["PYTHONPATH"] = _tree_path(tree)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(n_steps)],
        env=env, capture_output=True, text=True, cwd=str(tree),
    )
    if proc.returncode != 0:
        raise SystemExit(f"worker failed on {tree}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 7; 3 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer steps and rounds (a smoke run)")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    if rounds < 1:
        ap.error("--rounds must be >= 1")
    scale = 1 if args.quick else 4
    n_steps = {"particle": 50 * scale, "chaotic": 50 * scale, "chaotic B=64": 10 * scale,
               "ball": 10 * scale, "heavy top": 10 * scale}
    trees = [t.resolve() for t in args.trees]
    labels = [f"{t.name}@{_git_rev(t)}" for t in trees]
    threads = ", ".join(f"{v}={os.environ.get(v, '1 (set by this script)')}"
                        for v in _THREAD_VARS)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}; python {platform.python_version()}, "
          f"numpy {np.__version__}; {threads}")
    print(f"# {rounds} rounds, steps per case {n_steps}; CPU µs per step "
          f"(per trajectory-step for the batch)")
    times = {lab: {c: [] for c in CASES} for lab in labels}
    finals = {lab: {} for lab in labels}
    for r in range(rounds):
        order = list(range(len(trees)))
        order = order[r % len(order):] + order[: r % len(order)]
        for i in order:
            res = _run_one(trees[i], n_steps)
            for c in CASES:
                times[labels[i]][c].append(res[c]["us"])
                finals[labels[i]][c] = np.array(res[c]["final"])
        print(f"# round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    ref = labels[0]
    head = f"{'case':14s} {'tree':28s} {'min':>9s} {'median':>9s} {'min/A':>7s} {'med/A':>7s} " \
           f"{'max|Δ final|':>13s}"
    print(head)
    print("-" * len(head))
    summary = {}
    for c in CASES:
        a_min, a_med = min(times[ref][c]), statistics.median(times[ref][c])
        for lab in labels:
            mn, md = min(times[lab][c]), statistics.median(times[lab][c])
            fa, fb = finals[ref][c], finals[lab][c]
            diff = float(np.max(np.abs(fa - fb))) if fa.shape == fb.shape else float("nan")
            summary.setdefault(c, {})[lab] = {"min": mn, "median": md, "min_ratio": mn / a_min,
                                              "median_ratio": md / a_med, "final_diff": diff,
                                              "all": times[lab][c]}
            print(f"{c:14s} {lab:28s} {mn:9.2f} {md:9.2f} {mn / a_min:7.3f} {md / a_med:7.3f} "
                  f"{diff:13.1e}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"trees": labels, "rounds": rounds, "n_steps": n_steps,
                                         "cases": summary}, indent=1))
    return summary


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(run_worker(json.loads(sys.argv[2]))))
    else:
        main()
