"""Shifted Legendre polynomials on [0, 1] and their first two integrals from 0.

The simplifying assumptions B, C, D, CĈ, DD̂ say that some quadrature-like sums integrate
every polynomial of degree < k exactly. Written with monomials (paper eqs. 43–45) the
conditions become ill-conditioned as k grows (the first failing monomial condition of
Gauss(12), B(25), has residual 1e-13); with the shifted Legendre basis, an equivalent
triangular recombination, the first failing residual is O(0.1) for every family.
"""

from __future__ import annotations

import numpy as np

__all__ = ["legendre_tables"]


def legendre_tables(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P_k(2x − 1), I_k(x) = ∫_0^x P_k(2t − 1) dt, J_k(x) = ∫_0^x I_k for k = 0..n−1.

    Returns three arrays of shape (n, *x.shape).
    """
    x = np.asarray(x, dtype=np.float64)
    y = 2.0 * x - 1.0
    m = n + 3  # P up to degree n + 2 is needed by J
    P = np.empty((m, *x.shape))
    P[0] = 1.0
    if m > 1:
        P[1] = y
    for k in range(1, m - 1):
        P[k + 1] = ((2 * k + 1) * y * P[k] - k * P[k - 1]) / (k + 1)

    def integral_of_P(k: int) -> np.ndarray:
        # ∫_0^x P_k(2t − 1) dt
        if k == 0:
            return x.copy()
        return (P[k + 1] - P[k - 1]) / (2.0 * (2 * k + 1))

    IP = [integral_of_P(k) for k in range(m - 1)]
    Iout = np.stack(IP[:n]) if n else np.empty((0, *x.shape))
    J = np.empty((n, *x.shape))
    for k in range(n):
        if k == 0:
            J[k] = 0.5 * x * x
        else:  # I_k = (P_{k+1} − P_{k−1}) / (2(2k+1)) ⇒ J_k = (∫P_{k+1} − ∫P_{k−1}) / (2(2k+1))
            J[k] = (IP[k + 1] - IP[k - 1]) / (2.0 * (2 * k + 1))
    return P[:n], Iout, J
