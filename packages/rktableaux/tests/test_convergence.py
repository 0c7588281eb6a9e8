"""The computed order shows up empirically: each tableau as a plain RK method (and each pair
as a partitioned RK method) on nonlinear problems, against independent high-precision
references; slope of a log–log fit within ±0.25 of the computed order."""

import mpmath
import numpy as np
import pytest
from chetaev.rktableaux import (
    EXPLICIT,
    FAMILIES,
    PartitionedTableau,
    gauss,
    lobatto_iiia,
    lobatto_iiia_iiib,
    lobatto_iiic,
    lobatto_iiic_star,
)
from chetaev.rktableaux.testing import fit_order, pendulum, pendulum_exact, rk_solve

Q0, T = 1.2, 3.0
FLOOR = 1e-12  # well above round-off (≤ 1e-14 after ≤ 160 steps)
FLOOR_HIGH = 1e-13  # orders ≥ 7 use ≤ 18 steps: round-off ≤ 3e-15, 30× below
EXACT = pendulum_exact(Q0, T)


def step_counts(p: int) -> list[int]:
    """Step counts in the asymptotic regime for order p, errors above the floor."""
    if p <= 2:
        return [40, 56, 80, 113, 160]
    if p <= 4:
        return [12, 16, 24, 32, 48]
    if p <= 6:
        return [6, 8, 11, 16, 22, 32]
    if p <= 8:
        return [8, 10, 12, 14, 16, 18]
    return [6, 7, 8, 9, 10, 11]


def fit(method, fun, y0, exact, t_end, p, split=None):
    ns = step_counts(p)
    hs = [t_end / n for n in ns]
    errs = [np.max(np.abs(rk_solve(method, fun, y0, t_end / n, n, split=split) - exact))
            for n in ns]
    floor = FLOOR if p <= 6 else FLOOR_HIGH
    assert sum(e > floor for e in errs) >= 3, errs
    return fit_order(hs, errs, floor=floor)


SINGLE = [f(s) for f in FAMILIES.values() for s in (2, 3, 4, 5)]


@pytest.mark.parametrize("tab", SINGLE, ids=[t.name for t in SINGLE])
def test_families_as_plain_rk_on_pendulum(tab):
    # (Lobatto IIIB is included: on this non-stiff problem its stages are well posed)
    p = tab.order()
    # measured: worst |slope − p| 0.17 over every tableau here (deterministic): margin 1.5
    assert abs(fit(tab, pendulum, [Q0, 0.0], EXACT, T, p) - p) <= 0.25


EXPL = [f() for f in EXPLICIT if f.__name__ != "dopri5"]


@pytest.mark.parametrize("tab", EXPL, ids=[t.name for t in EXPL])
def test_classical_tableaux_on_pendulum(tab):
    p = tab.order()
    assert abs(fit(tab, pendulum, [Q0, 0.0], EXACT, T, p) - p) <= 0.25


def test_dopri5_on_pendulum():
    # its fifth-order error constant is small: the asymptotic regime starts at h ≈ 0.1
    tab = next(f for f in EXPLICIT if f.__name__ == "dopri5")()
    assert tab.order() == 5
    ns = [32, 45, 64, 90, 128]
    errs = [np.max(np.abs(rk_solve(tab, pendulum, [Q0, 0.0], T / n, n) - EXACT)) for n in ns]
    assert abs(fit_order([T / n for n in ns], errs, floor=FLOOR) - 5) <= 0.25


PAIRS = [lobatto_iiia_iiib(s) for s in (2, 3, 4, 5)] + [
    PartitionedTableau(lobatto_iiic(s), lobatto_iiic_star(s)) for s in (2, 3, 4)
]


@pytest.mark.parametrize("pair", PAIRS, ids=[p.name for p in PAIRS])
def test_pairs_as_partitioned_rk_on_pendulum(pair):
    # q' = p by the first tableau (IIIA), p' = −sin q by the second (IIIB)
    p = pair.order()
    assert abs(fit(pair, pendulum, [Q0, 0.0], EXACT, T, p, split=1) - p) <= 0.25


# a non-separable Hamiltonian, H = p²(1 + q²/4)/2 − cos q: every coupling tree is active
def nonseparable(y):
    q, p = y[..., 0], y[..., 1]
    f = np.stack([p * (1 + 0.25 * q * q), -0.25 * q * p * p - np.sin(q)], axis=-1)
    J = np.empty((*y.shape[:-1], 2, 2))
    J[..., 0, 0] = 0.5 * q * p
    J[..., 0, 1] = 1 + 0.25 * q * q
    J[..., 1, 0] = -0.25 * p * p - np.cos(q)
    J[..., 1, 1] = -0.5 * q * p
    return f, J


def _nonseparable_reference(t_end):
    with mpmath.workdps(30):
        sol = mpmath.odefun(
            lambda t, y: [y[1] * (1 + y[0] ** 2 / 4), -y[0] * y[1] ** 2 / 4 - mpmath.sin(y[0])],
            0, [mpmath.mpf("0.8"), mpmath.mpf("0.3")],
        )
        return np.array([float(v) for v in sol(t_end)])


T_NS = 2.0
EXACT_NS = _nonseparable_reference(T_NS)

NS_PAIRS = [
    lobatto_iiia_iiib(3),
    lobatto_iiia_iiib(4),
    PartitionedTableau(lobatto_iiia(3), lobatto_iiic(3)),
    PartitionedTableau(gauss(3), lobatto_iiia(3)),
]


@pytest.mark.parametrize("pair", NS_PAIRS, ids=[p.name for p in NS_PAIRS])
def test_pairs_on_nonseparable_problem(pair):
    p = pair.order()
    assert p in (2, 4, 6)
    assert abs(fit(pair, nonseparable, [0.8, 0.3], EXACT_NS, T_NS, p, split=1) - p) <= 0.25


def test_reference_solutions_are_consistent():
    # the elliptic-function pendulum solution conserves the energy and matches a Taylor ODE
    # solve; the non-separable reference conserves its Hamiltonian
    q, p = EXACT
    # measured: 5.6e-17 (mpmath reference rounded to double): margin 180
    assert abs(0.5 * p * p - np.cos(q) + np.cos(Q0)) < 1e-14
    with mpmath.workdps(25):
        sol = mpmath.odefun(lambda t, y: [y[1], -mpmath.sin(y[0])], 0, [mpmath.mpf(Q0), 0])
        ref = np.array([float(v) for v in sol(T)])
    # measured: |EXACT - mpmath| = 0 (both are 25-digit references rounded to double): margin inf
    np.testing.assert_allclose(EXACT, ref, rtol=0, atol=1e-14)
    q, p = EXACT_NS

    def H(q, p):
        return 0.5 * p * p * (1 + 0.25 * q * q) - np.cos(q)

    assert abs(H(q, p) - H(0.8, 0.3)) < 1e-14
