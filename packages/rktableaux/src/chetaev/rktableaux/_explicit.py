"""Classical tableaux with rational coefficients (exact fractions, rounded once)."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np

from ._tableau import Tableau

__all__ = [
    "EXPLICIT",
    "backward_euler",
    "dopri5",
    "explicit_midpoint",
    "forward_euler",
    "heun",
    "implicit_midpoint",
    "kutta3",
    "ralston",
    "rk4",
    "rk38",
    "ssprk3",
    "trapezoidal",
]


def _from_fractions(a, b, name: str) -> Tableau:
    s = len(b)
    A = np.zeros((s, s))
    for i, row in enumerate(a):
        for j, x in enumerate(row):
            A[i, j] = float(x)
    c = [float(sum(row, F(0))) for row in a] + [0.0] * (s - len(a))
    return Tableau(A, [float(x) for x in b], c, name=name)


def forward_euler() -> Tableau:
    """Explicit Euler: order 1."""
    return _from_fractions([[0]], [1], "forward Euler")


def backward_euler() -> Tableau:
    """Implicit Euler (= Radau IIA(1)): order 1, L-stable."""
    return _from_fractions([[1]], [1], "backward Euler")


def implicit_midpoint() -> Tableau:
    """Implicit midpoint rule (= Gauss(1)): order 2, symplectic, symmetric."""
    return _from_fractions([[F(1, 2)]], [1], "implicit midpoint")


def trapezoidal() -> Tableau:
    """Implicit trapezoidal rule (= Lobatto IIIA(2)): order 2, symmetric."""
    return _from_fractions([[0, 0], [F(1, 2), F(1, 2)]], [F(1, 2), F(1, 2)], "trapezoidal")


def explicit_midpoint() -> Tableau:
    """Explicit midpoint (Runge's 2-stage method): order 2."""
    return _from_fractions([[0, 0], [F(1, 2), 0]], [0, 1], "explicit midpoint")


def heun() -> Tableau:
    """Heun's method (explicit trapezoidal): order 2."""
    return _from_fractions([[0, 0], [1, 0]], [F(1, 2), F(1, 2)], "Heun")


def ralston() -> Tableau:
    """Ralston's 2-stage method (minimum error bound): order 2."""
    return _from_fractions([[0, 0], [F(2, 3), 0]], [F(1, 4), F(3, 4)], "Ralston")


def kutta3() -> Tableau:
    """Kutta's third-order method."""
    return _from_fractions(
        [[0, 0, 0], [F(1, 2), 0, 0], [-1, 2, 0]], [F(1, 6), F(2, 3), F(1, 6)], "Kutta3"
    )


def ssprk3() -> Tableau:
    """Strong-stability-preserving RK3 of Shu and Osher: order 3."""
    return _from_fractions(
        [[0, 0, 0], [1, 0, 0], [F(1, 4), F(1, 4), 0]], [F(1, 6), F(1, 6), F(2, 3)], "SSPRK3"
    )


def rk4() -> Tableau:
    """The classical Runge–Kutta method: order 4."""
    h = F(1, 2)
    return _from_fractions(
        [[0, 0, 0, 0], [h, 0, 0, 0], [0, h, 0, 0], [0, 0, 1, 0]],
        [F(1, 6), F(1, 3), F(1, 3), F(1, 6)],
        "RK4",
    )


def rk38() -> Tableau:
    """Kutta's 3/8 rule: order 4."""
    t = F(1, 3)
    return _from_fractions(
        [[0, 0, 0, 0], [t, 0, 0, 0], [-t, 1, 0, 0], [1, -1, 1, 0]],
        [F(1, 8), F(3, 8), F(3, 8), F(1, 8)],
        "RK 3/8",
    )


def dopri5() -> Tableau:
    """Dormand–Prince 5(4), the fifth-order weights (FSAL, 7 stages): order 5."""
    a = [
        [0] * 7,
        [F(1, 5), 0, 0, 0, 0, 0, 0],
        [F(3, 40), F(9, 40), 0, 0, 0, 0, 0],
        [F(44, 45), F(-56, 15), F(32, 9), 0, 0, 0, 0],
        [F(19372, 6561), F(-25360, 2187), F(64448, 6561), F(-212, 729), 0, 0, 0],
        [F(9017, 3168), F(-355, 33), F(46732, 5247), F(49, 176), F(-5103, 18656), 0, 0],
        [F(35, 384), 0, F(500, 1113), F(125, 192), F(-2187, 6784), F(11, 84), 0],
    ]
    return _from_fractions(a, [*a[6][:6], 0], "Dormand–Prince 5")


#: fixed classical tableaux
EXPLICIT = (
    forward_euler,
    backward_euler,
    implicit_midpoint,
    trapezoidal,
    explicit_midpoint,
    heun,
    ralston,
    kutta3,
    ssprk3,
    rk4,
    rk38,
    dopri5,
)
