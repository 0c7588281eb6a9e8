"""High-precision (mpmath) construction of collocation-type tableaux, rounded once.

Nodes are roots of shifted Legendre/Jacobi polynomials with exact integer coefficients;
weights and matrices solve the defining simplifying assumptions (B, C, D, high-order
paper App. B) as linear systems at ``DPS`` decimal digits.
"""

from __future__ import annotations

import itertools
from math import comb

import mpmath
import numpy as np

__all__ = [
    "DPS",
    "conjugate_mp",
    "legendre_guesses",
    "legendre_shifted",
    "mp_to_float",
    "poly_roots_01",
    "solve_C",
    "solve_D",
    "weights_B",
]

#: decimal digits used for every construction (rounded to float64 once at the end)
DPS = 60


def legendre_shifted(n: int) -> list[int]:
    """Integer coefficients (ascending powers) of the shifted Legendre polynomial P_n(2x − 1)."""
    return [(-1) ** (n + k) * comb(n, k) * comb(n + k, k) for k in range(n + 1)]


def _horner(coeffs: list[int], x):
    """Value and derivative of Σ_k coeffs[k] x^k (exact integer coefficients, mp x)."""
    p = mpmath.mpf(0)
    dp = mpmath.mpf(0)
    for coef in reversed(coeffs):
        dp = dp * x + p
        p = p * x + coef
    return p, dp


def poly_roots_01(coeffs: list[int], guesses) -> list:
    """Real roots in [0, 1] of Σ_k coeffs[k] x^k, polished by Newton from float ``guesses``.

    The float guesses come from numpy's Legendre-basis root finder (well conditioned); the
    polishing evaluates the exact integer coefficients with enough extra digits to absorb
    their size, so the roots are accurate to about DPS digits.
    """
    guesses = sorted(float(g) for g in guesses)
    if len(guesses) != len(coeffs) - 1:  # pragma: no cover - internal consistency
        raise AssertionError("one guess per root is required")
    extra = 10 + max((len(str(abs(c))) for c in coeffs), default=0)
    out = []
    target = mpmath.mp.dps  # the caller's working precision
    with mpmath.workdps(target + extra):
        tol = mpmath.mpf(10) ** (-(target + 5))
        for g in guesses:
            x = mpmath.mpf(g)
            for _ in range(100):
                p, dp = _horner(coeffs, x)
                dx = p / dp
                x -= dx
                if abs(dx) < tol:
                    break
            else:  # pragma: no cover - Newton from a 1e-15-accurate guess always converges
                raise ArithmeticError("root polishing did not converge")
            out.append(+x)
    for u, v in itertools.pairwise(out):
        if not u < v:  # pragma: no cover - guesses are separated by ≳ 1/s²
            raise ArithmeticError("two guesses converged to the same root")
    return out


def legendre_guesses(leg_coef, drop: float | None = None) -> list[float]:
    """Float roots in x ∈ [0, 1] of Σ_k leg_coef[k] P_k(2x − 1), optionally dropping the root
    closest to ``drop`` (a known endpoint root)."""
    y = np.polynomial.legendre.legroots(np.asarray(leg_coef, dtype=float))
    x = sorted(((np.real(y) + 1.0) / 2.0).tolist())
    if drop is not None:
        x.pop(int(np.argmin([abs(v - drop) for v in x])))
    return x


def mp_to_float(x) -> np.ndarray:
    """Round an mpmath matrix / list to float64 once; values below 10^(−DPS+10) become 0."""
    if isinstance(x, mpmath.matrix):
        arr = np.array([[float(x[i, j]) for j in range(x.cols)] for i in range(x.rows)])
        ref = max((abs(x[i, j]) for i in range(x.rows) for j in range(x.cols)), default=1)
        tiny = [[abs(x[i, j]) <= mpmath.mpf(10) ** (-DPS + 10) * max(ref, 1)
                 for j in range(x.cols)] for i in range(x.rows)]
    else:
        arr = np.array([float(v) for v in x])
        tiny = [abs(v) <= mpmath.mpf(10) ** (-DPS + 10) for v in x]
    arr[np.asarray(tiny, dtype=bool)] = 0.0
    return arr


def weights_B(c: list) -> list:
    """Interpolatory quadrature weights: Σ_i b_i c_i^{k−1} = 1/k, k = 1..s (B(s))."""
    s = len(c)
    V = mpmath.matrix(s, s)
    for k in range(s):
        for i in range(s):
            V[k, i] = c[i] ** k
    rhs = mpmath.matrix([mpmath.mpf(1) / (k + 1) for k in range(s)])
    sol = mpmath.lu_solve(V, rhs)
    return [sol[i] for i in range(s)]


def solve_C(c: list, q: int, fixed: dict[int, list] | None = None) -> mpmath.matrix:
    """Rows a_i with Σ_j a_ij c_j^{k−1} = c_i^k / k for k = 1..q (C(q)).

    ``fixed`` maps a column index j to prescribed values (a_ij for every i); the remaining
    ``q`` unknowns per row must then be determined: ``q + len(fixed) == s``.
    """
    s = len(c)
    fixed = fixed or {}
    free = [j for j in range(s) if j not in fixed]
    assert len(free) == q, "C(q) must determine the free entries of each row"
    A = mpmath.matrix(s, s)
    M = mpmath.matrix(q, q)
    for k in range(q):
        for col, j in enumerate(free):
            M[k, col] = c[j] ** k
    for i in range(s):
        rhs = mpmath.matrix(q, 1)
        for k in range(q):
            val = c[i] ** (k + 1) / (k + 1)
            for j, column in fixed.items():
                val -= column[i] * c[j] ** k
            rhs[k] = val
        row = mpmath.lu_solve(M, rhs)
        for col, j in enumerate(free):
            A[i, j] = row[col]
        for j, column in fixed.items():
            A[i, j] = column[i]
    return A


def solve_D(c: list, b: list) -> mpmath.matrix:
    """Columns a_{·j} with Σ_i b_i c_i^{k−1} a_ij = b_j (1 − c_j^k)/k for k = 1..s (D(s))."""
    s = len(c)
    M = mpmath.matrix(s, s)
    for k in range(s):
        for i in range(s):
            M[k, i] = b[i] * c[i] ** k
    A = mpmath.matrix(s, s)
    for j in range(s):
        rhs = mpmath.matrix([b[j] * (1 - c[j] ** (k + 1)) / (k + 1) for k in range(s)])
        col = mpmath.lu_solve(M, rhs)
        for i in range(s):
            A[i, j] = col[i]
    return A


def conjugate_mp(A: mpmath.matrix, b: list) -> mpmath.matrix:
    """Symplectic conjugate â_ij = b_j (1 − a_ji / b_i) in high precision."""
    s = len(b)
    out = mpmath.matrix(s, s)
    for i in range(s):
        for j in range(s):
            out[i, j] = b[j] * (1 - A[j, i] / b[i])
    return out
