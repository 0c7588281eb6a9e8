"""Batched SO(3) maps of chetaev.liegroups on 10^6 elements: ns per element.

Run:  python benchmarks/bench_liegroups.py [N]
(needs chetaev-liegroups installed, or PYTHONPATH=packages/liegroups/src).  Target: < 200 ns per
element for each map, vectorized on one core.  Inputs: algebra vectors with normal entries of
scale 0.5 (log / cay.inv get their images); best of 5 runs.  Then µs per call on 4-element
batches (the regime of single-trajectory integrators).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from chetaev.liegroups import SO3, retraction


def _best(f, repeat: int = 5) -> tuple[float, float]:
    """Best wall-clock and best process-CPU time of ``repeat`` calls (on a shared machine the
    CPU time is the better estimate of the single-core cost)."""
    wall = cpu = np.inf
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def main(n: int = 1_000_000) -> None:
    rng = np.random.default_rng(0)
    xi = 0.5 * rng.normal(size=(n, 3))
    exp, cay = retraction(SO3, "exp"), retraction(SO3, "cayley")
    R = SO3.exp(xi)
    C = cay(xi)
    R_uniform = SO3.random(rng, n)
    cases = [
        ("SO3.exp", lambda: SO3.exp(xi)),
        ("SO3.log", lambda: SO3.log(R)),
        ("SO3.log (check=False)", lambda: SO3.log(R, check=False)),
        ("SO3.log (Haar random R)", lambda: SO3.log(R_uniform)),
        ("exp dL", lambda: exp.dL(xi)),
        ("exp dL_inv", lambda: exp.dL_inv(xi)),
        ("cay", lambda: cay(xi)),
        ("cay.inv", lambda: cay.inv(C)),
        ("cay dL", lambda: cay.dL(xi)),
        ("cay dL_inv", lambda: cay.dL_inv(xi)),
    ]
    print(f"chetaev.liegroups SO(3), N = {n:,} elements, numpy {np.__version__}")
    print(f"{'map':<24} {'wall [ms]':>10} {'ns/element':>11} {'cpu ns/element':>15}")
    print("-" * 63)
    for name, f in cases:
        wall, cpu = _best(f)
        print(f"{name:<24} {1e3 * wall:>10.1f} {1e9 * wall / n:>11.1f} {1e9 * cpu / n:>15.1f}")



def small(k: int = 4, repeat: int = 2000) -> None:
    """µs per call on k-element batches (the single-trajectory integrators' regime, where the
    per-call overhead, not the per-element cost, dominates): public calls, validated once."""
    from chetaev.liegroups import Product, Rn

    rng = np.random.default_rng(1)
    xi = 0.05 * rng.normal(size=(k, 3))
    eta = rng.normal(size=(k, 3))
    G = Product(SO3, Rn(3))
    xi6 = 0.05 * rng.normal(size=(k, 6))
    print(f"\nsmall batches: {k} elements, CPU µs per call (best of 5 x {repeat})")
    for kind in ("cayley", "exp"):
        tau, tau6 = retraction(SO3, kind), retraction(G, kind)
        cases = [
            ("tau", lambda tau=tau: tau(xi)),
            ("dL_inv", lambda tau=tau: tau.dL_inv(xi)),
            ("dL_deriv", lambda tau=tau: tau.dL_deriv(xi, eta)),
            ("dL_hess", lambda tau=tau: tau.dL_hess(xi, eta, eta)),
            ("SO3xR3 tau", lambda tau6=tau6: tau6(xi6)),
            ("SO3xR3 dL_inv", lambda tau6=tau6: tau6.dL_inv(xi6)),
        ]
        for name, f in cases:
            best = np.inf
            for _ in range(5):
                c0 = time.process_time()
                for _ in range(repeat):
                    f()
                best = min(best, time.process_time() - c0)
            print(f"  {kind:<7} {name:<15} {1e6 * best / repeat:8.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
    small()
