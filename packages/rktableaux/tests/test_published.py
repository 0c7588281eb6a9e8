"""Generated coefficients against published closed forms (Hairer–Wanner II, §IV.5; Butcher's
closed form of Gauss s = 4; Lobatto IIIA s = 5 with √21; high-order paper App. A).

Where no closed form of a whole matrix is in print (Gauss s = 5, Radau s = 4, 5, Lobatto IIIC
and IIIC* s = 5) the nodes/weights are closed forms or independent numpy roots and the matrix
comes from an independent float construction of the defining condition (Lagrange basis
integrated with numpy.polynomial), not from the package's mpmath path.
"""

from fractions import Fraction as F
from math import sqrt

import numpy as np
import pytest
from chetaev.rktableaux import (
    gauss,
    lobatto_iiia,
    lobatto_iiib,
    lobatto_iiic,
    lobatto_iiic_star,
    radau_ia,
    radau_iia,
)
from numpy.polynomial import Polynomial
from numpy.polynomial import legendre as L

TOL = 1e-15  # generated values are rounded once from 60 digits


def fr(x):
    return float(F(x)) if isinstance(x, str) else float(x)


def check(t, a, b, c, tol=TOL):
    # measured: worst |err|/tol = 0.18 over every call of check (deterministic, same for
    # BLAS threads 1 and unset);
    # the tol of each call leaves margin >= 5.5.
    np.testing.assert_allclose(t.c, np.asarray(c, float), rtol=0, atol=tol)
    np.testing.assert_allclose(t.b, np.asarray(b, float), rtol=0, atol=tol)
    np.testing.assert_allclose(t.a, np.asarray(a, float), rtol=0, atol=tol)


# ---------------------------------------------------------------------- Gauss
def test_gauss_1_2_3():
    check(gauss(1), [[0.5]], [1], [0.5])
    r3 = sqrt(3)
    check(
        gauss(2),
        [[1 / 4, 1 / 4 - r3 / 6], [1 / 4 + r3 / 6, 1 / 4]],
        [1 / 2, 1 / 2],
        [1 / 2 - r3 / 6, 1 / 2 + r3 / 6],
    )
    r = sqrt(15)
    check(
        gauss(3),
        [
            [5 / 36, 2 / 9 - r / 15, 5 / 36 - r / 30],
            [5 / 36 + r / 24, 2 / 9, 5 / 36 - r / 24],
            [5 / 36 + r / 30, 2 / 9 + r / 15, 5 / 36],
        ],
        [5 / 18, 4 / 9, 5 / 18],
        [1 / 2 - r / 10, 1 / 2, 1 / 2 + r / 10],
    )


def test_gauss_4_butcher_closed_form():
    r30 = sqrt(30)
    w1, w1p = 1 / 8 - r30 / 144, 1 / 8 + r30 / 144
    w2, w2p = 0.5 * sqrt((15 + 2 * r30) / 35), 0.5 * sqrt((15 - 2 * r30) / 35)
    w3, w3p = w2 * (1 / 6 + r30 / 24), w2p * (1 / 6 - r30 / 24)
    w4, w4p = w2 * (1 / 21 + 5 * r30 / 168), w2p * (1 / 21 - 5 * r30 / 168)
    w5, w5p = w2 - 2 * w3, w2p - 2 * w3p
    a = [
        [w1, w1p - w3 + w4p, w1p - w3 - w4p, w1 - w5],
        [w1 - w3p + w4, w1p, w1p - w5p, w1 - w3p - w4],
        [w1 + w3p + w4, w1p + w5p, w1p, w1 + w3p - w4],
        [w1 + w5, w1p + w3 + w4p, w1p + w3 - w4p, w1],
    ]
    check(gauss(4), a, [2 * w1, 2 * w1p, 2 * w1p, 2 * w1], [0.5 - w2, 0.5 - w2p, 0.5 + w2p,
                                                           0.5 + w2], tol=2e-15)


def _lagrange_integrals(c, upper):
    """a_ij = ∫_0^{upper_i} ℓ_j (numpy.polynomial, float64): the collocation condition C(s)."""
    s = len(c)
    out = np.empty((len(upper), s))
    for j in range(s):
        others = [c[m] for m in range(s) if m != j]
        ell = Polynomial.fromroots(others) / np.prod([c[j] - x for x in others])
        integ = ell.integ()
        out[:, j] = integ(np.asarray(upper)) - integ(0.0)
    return out


def test_gauss_5_nodes_weights_closed_form_matrix_from_collocation():
    x1 = sqrt(5 - 2 * sqrt(10 / 7)) / 3
    x2 = sqrt(5 + 2 * sqrt(10 / 7)) / 3
    c = [(1 - x2) / 2, (1 - x1) / 2, 0.5, (1 + x1) / 2, (1 + x2) / 2]
    w1, w2 = (322 + 13 * sqrt(70)) / 900, (322 - 13 * sqrt(70)) / 900
    b = [w2 / 2, w1 / 2, 64 / 225, w1 / 2, w2 / 2]
    t = gauss(5)
    # measured: c, b to 1.1e-16, a to 8.5e-15 (deterministic): margins 9, 9, 12
    np.testing.assert_allclose(t.c, c, rtol=0, atol=1e-15)
    np.testing.assert_allclose(t.b, b, rtol=0, atol=1e-15)
    np.testing.assert_allclose(t.a, _lagrange_integrals(c, c), rtol=0, atol=1e-13)


# ---------------------------------------------------------------------- Radau
def test_radau_iia_1_2_3():
    check(radau_iia(1), [[1]], [1], [1])
    check(radau_iia(2), [[5 / 12, -1 / 12], [3 / 4, 1 / 4]], [3 / 4, 1 / 4], [1 / 3, 1])
    r = sqrt(6)
    a = [
        [(88 - 7 * r) / 360, (296 - 169 * r) / 1800, (-2 + 3 * r) / 225],
        [(296 + 169 * r) / 1800, (88 + 7 * r) / 360, (-2 - 3 * r) / 225],
        [(16 - r) / 36, (16 + r) / 36, 1 / 9],
    ]
    check(radau_iia(3), a, a[2], [(4 - r) / 10, (4 + r) / 10, 1])


def test_radau_ia_1_2_3():
    check(radau_ia(1), [[1]], [1], [0])
    check(radau_ia(2), [[1 / 4, -1 / 4], [1 / 4, 5 / 12]], [1 / 4, 3 / 4], [0, 2 / 3])
    r = sqrt(6)
    a = [
        [1 / 9, (-1 - r) / 18, (-1 + r) / 18],
        [1 / 9, (88 + 7 * r) / 360, (88 - 43 * r) / 360],
        [1 / 9, (88 + 43 * r) / 360, (88 - 7 * r) / 360],
    ]
    check(radau_ia(3), a, [1 / 9, (16 + r) / 36, (16 - r) / 36], [0, (6 - r) / 10, (6 + r) / 10])


def _shifted_roots(coef_legendre):
    return np.sort((L.legroots(coef_legendre) + 1) / 2)


@pytest.mark.parametrize("s", [4, 5])
def test_radau_iia_4_5_independent(s):
    coef = np.zeros(s + 1)
    coef[s], coef[s - 1] = 1, -1  # P_s − P_{s−1} on [-1, 1] → right Radau points
    c = _shifted_roots(coef)
    # measured: <= 2.2e-16 (root of unit scale): margin 45
    assert abs(c[-1] - 1) < 1e-14
    c[-1] = 1.0
    t = radau_iia(s)
    # measured: c to 3.3e-16, a and b to 3.1e-15 (deterministic): margins 30, 32, 32
    np.testing.assert_allclose(t.c, c, rtol=0, atol=1e-14)
    a = _lagrange_integrals(c, c)
    np.testing.assert_allclose(t.a, a, rtol=0, atol=1e-13)
    np.testing.assert_allclose(t.b, a[-1], rtol=0, atol=1e-13)


@pytest.mark.parametrize("s", [4, 5])
def test_radau_ia_4_5_independent(s):
    coef = np.zeros(s + 1)
    coef[s], coef[s - 1] = 1, 1  # P_s + P_{s−1} → left Radau points
    c = _shifted_roots(coef)
    c[0] = 0.0
    t = radau_ia(s)
    # measured: c to 2.8e-16, b to 6.8e-15, a to 1.6e-14 (deterministic): margins 36, 15, 61
    np.testing.assert_allclose(t.c, c, rtol=0, atol=1e-14)
    b = _lagrange_integrals(c, [1.0])[0]
    np.testing.assert_allclose(t.b, b, rtol=0, atol=1e-13)
    # defining condition D(s): for every column j, V^T diag(b) a_{·j} = b_j (1 − c_j^k)/k
    k = np.arange(1, s + 1)[:, None]
    M = b[None, :] * c[None, :] ** (k - 1)
    rhs = b[None, :] * (1 - c[None, :] ** k) / k
    np.testing.assert_allclose(t.a, np.linalg.solve(M, rhs), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------- Lobatto
r5 = sqrt(5)
LOB = {
    2: dict(
        c=[0, 1], b=[0.5, 0.5],
        A=[[0, 0], [0.5, 0.5]], B=[[0.5, 0], [0.5, 0]],
        C=[[0.5, -0.5], [0.5, 0.5]], Cs=[[0, 0], [1, 0]],
    ),
    3: dict(
        c=[0, 0.5, 1], b=[fr("1/6"), fr("2/3"), fr("1/6")],
        A=[[0, 0, 0], [fr("5/24"), fr("1/3"), fr("-1/24")], [fr("1/6"), fr("2/3"), fr("1/6")]],
        B=[[fr("1/6"), fr("-1/6"), 0], [fr("1/6"), fr("1/3"), 0], [fr("1/6"), fr("5/6"), 0]],
        C=[[fr("1/6"), fr("-1/3"), fr("1/6")], [fr("1/6"), fr("5/12"), fr("-1/12")],
           [fr("1/6"), fr("2/3"), fr("1/6")]],
        Cs=[[0, 0, 0], [0.25, 0.25, 0], [0, 1, 0]],
    ),
    4: dict(
        c=[0, (5 - r5) / 10, (5 + r5) / 10, 1], b=[1 / 12, 5 / 12, 5 / 12, 1 / 12],
        A=[[0, 0, 0, 0],
           [(11 + r5) / 120, (25 - r5) / 120, (25 - 13 * r5) / 120, (-1 + r5) / 120],
           [(11 - r5) / 120, (25 + 13 * r5) / 120, (25 + r5) / 120, (-1 - r5) / 120],
           [1 / 12, 5 / 12, 5 / 12, 1 / 12]],
        B=[[1 / 12, (-1 - r5) / 24, (-1 + r5) / 24, 0],
           [1 / 12, (25 + r5) / 120, (25 - 13 * r5) / 120, 0],
           [1 / 12, (25 + 13 * r5) / 120, (25 - r5) / 120, 0],
           [1 / 12, (11 - r5) / 24, (11 + r5) / 24, 0]],
        C=[[1 / 12, -r5 / 12, r5 / 12, -1 / 12],
           [1 / 12, 1 / 4, (10 - 7 * r5) / 60, r5 / 60],
           [1 / 12, (10 + 7 * r5) / 60, 1 / 4, -r5 / 60],
           [1 / 12, 5 / 12, 5 / 12, 1 / 12]],
        Cs=[[0, 0, 0, 0],
            [(5 + r5) / 60, 1 / 6, (15 - 7 * r5) / 60, 0],
            [(5 - r5) / 60, (15 + 7 * r5) / 60, 1 / 6, 0],
            [1 / 6, (5 - r5) / 12, (5 + r5) / 12, 0]],
    ),
}


@pytest.mark.parametrize("s", [2, 3, 4])
def test_lobatto_2_3_4(s):
    d = LOB[s]
    check(lobatto_iiia(s), d["A"], d["b"], d["c"])
    check(lobatto_iiib(s), d["B"], d["b"], d["c"])
    check(lobatto_iiic(s), d["C"], d["b"], d["c"])
    check(lobatto_iiic_star(s), d["Cs"], d["b"], d["c"])


r21 = sqrt(21)
C5 = [0, 0.5 - r21 / 14, 0.5, 0.5 + r21 / 14, 1]
B5 = [1 / 20, 49 / 180, 16 / 45, 49 / 180, 1 / 20]
A5 = [
    [0, 0, 0, 0, 0],
    [(119 + 3 * r21) / 1960, (343 - 9 * r21) / 2520, (392 - 96 * r21) / 2205,
     (343 - 69 * r21) / 2520, (-21 + 3 * r21) / 1960],
    [13 / 320, (392 + 105 * r21) / 2880, 8 / 45, (392 - 105 * r21) / 2880, 3 / 320],
    [(119 - 3 * r21) / 1960, (343 + 69 * r21) / 2520, (392 + 96 * r21) / 2205,
     (343 + 9 * r21) / 2520, (-21 - 3 * r21) / 1960],
    B5,
]


def test_lobatto_iiia_5_closed_form():
    check(lobatto_iiia(5), A5, B5, C5, tol=2e-15)


def test_lobatto_iiib_5_from_closed_form_iiia():
    # IIIB is built from D(s) in the package; here from the closed-form IIIA by conjugation
    A, b = np.array(A5), np.array(B5)
    expected = b[None, :] * (1 - A.T / b[:, None])
    check(lobatto_iiib(5), expected, B5, C5, tol=2e-15)


def test_lobatto_iiic_and_star_5_independent():
    c, b = np.array(C5), np.array(B5)
    s = 5
    k = np.arange(1, s)[:, None]  # C(s−1)
    # IIIC: a_i1 = b_1, remaining entries from C(s−1)
    V = c[None, 1:] ** (k - 1)
    rhs = c[None, :] ** k / k - b[0] * (c[0] ** (k - 1))
    iiic = np.column_stack([np.full(s, b[0]), np.linalg.solve(V, rhs).T])
    check(lobatto_iiic(5), iiic, B5, C5, tol=1e-14)
    # IIIC*: a_is = 0, remaining entries from C(s−1)
    V = c[None, :-1] ** (k - 1)
    star = np.column_stack([np.linalg.solve(V, c[None, :] ** k / k).T, np.zeros(s)])
    check(lobatto_iiic_star(5), star, B5, C5, tol=1e-14)
