"""Family × s: which simplifying assumptions hold AND which fail, orders, stage orders, R(∞),
structure flags (RungeKutta.jl test_order_conditions habit; high-order paper App. B)."""

import numpy as np
import pytest
from chetaev.rktableaux import (
    FAMILIES,
    TableauError,
    gauss,
    lobatto_iiia,
    lobatto_iiia_iiib,
    lobatto_iiib,
    lobatto_iiic,
    lobatto_iiic_star,
    radau_ia,
    radau_iia,
)

STRICT = 1e-14

# family: (B, C, D, order, stage order, R(∞), symplectic, symmetric, stiffly accurate) as
# functions of s — the published facts (Hairer–Wanner II, §IV.3 and §IV.5)
EXPECTED = {
    gauss: lambda s: (2 * s, s, s, 2 * s, s, (-1.0) ** s, True, True, False),
    radau_ia: lambda s: (2 * s - 1, s - 1, s, 2 * s - 1, s - 1, 0.0, False, False, False),
    radau_iia: lambda s: (2 * s - 1, s, s - 1, 2 * s - 1, s, 0.0, False, False, True),
    lobatto_iiia: lambda s: (2 * s - 2, s, s - 2, 2 * s - 2, s, (-1.0) ** (s - 1), False, True,
                             True),
    lobatto_iiib: lambda s: (2 * s - 2, s - 2, s, 2 * s - 2, s - 2, (-1.0) ** (s - 1), False,
                             True, False),
    lobatto_iiic: lambda s: (2 * s - 2, s - 1, s - 1, 2 * s - 2, s - 1, 0.0, False, False, True),
    lobatto_iiic_star: lambda s: (2 * s - 2, s - 1, s - 1, 2 * s - 2, s - 1, np.inf, False,
                                  False, False),
}
CASES = [(f, s) for f in EXPECTED for s in (2, 3, 4, 5)]
IDS = [f"{f.__name__}-{s}" for f, s in CASES]


@pytest.mark.parametrize(("family", "s"), CASES, ids=IDS)
def test_simplifying_assumptions_hold_and_fail(family, s):
    t = family(s)
    B, C, D = EXPECTED[family](s)[:3]
    assert t.satisfies_B(B, tol=STRICT)
    assert not t.satisfies_B(B + 1)
    assert t.satisfies_C(C, tol=STRICT)
    assert not t.satisfies_C(C + 1)
    assert t.satisfies_D(D, tol=STRICT)
    assert not t.satisfies_D(D + 1)
    assert tuple(t.simplifying_orders()) == (B, C, D)
    # a failing assumption fails by a visible margin, not by rounding (Legendre form)
    # measured: the failing residuals are >= 0.26, 0.031, 0.0089 over all families: >= 8.9x the 1e-3
    assert np.max(np.abs(t.B_residual(B + 1))) > 1e-3
    assert np.max(np.abs(t.C_residual(C + 1))) > 1e-3
    assert np.max(np.abs(t.D_residual(D + 1))) > 1e-3
    # the paper's monomial form (eqs. 43–45) agrees on what holds
    # measured: worst 1.1e-16 (round-off of unit-scale sums): margin 900; failing one >= 1.2e-4
    assert np.max(np.abs(t.B_residual(B, basis="monomial"))) < 1e-13
    assert np.max(np.abs(t.C_residual(C, basis="monomial")), initial=0) < 1e-13
    assert np.max(np.abs(t.D_residual(D, basis="monomial")), initial=0) < 1e-13
    assert np.max(np.abs(t.C_residual(C + 1, basis="monomial"))) > 1e-6


@pytest.mark.parametrize(("family", "s"), CASES, ids=IDS)
def test_order_stage_order_and_R_inf(family, s):
    t = family(s)
    _, _, _, p, q, rinf = EXPECTED[family](s)[:6]
    assert t.order() == p
    assert t.stage_order() == q
    if np.isinf(rinf):
        assert np.isinf(t.R_inf)
    else:
        # measured: |R_inf − (±1)| <= 2.2e-16: margin 4500
        assert t.R_inf == pytest.approx(rinf, abs=1e-12)


@pytest.mark.parametrize(("family", "s"), CASES, ids=IDS)
def test_structure_flags(family, s):
    t = family(s)
    symp, sym, stiff = EXPECTED[family](s)[6:]
    assert t.is_symplectic() is symp
    assert t.is_symmetric() is sym
    assert t.is_stiffly_accurate() is stiff
    if symp:
        assert np.max(np.abs(t.symplecticity_residual())) < STRICT
    else:
        assert np.max(np.abs(t.symplecticity_residual())) > 1e-3


@pytest.mark.parametrize("s", [2, 3, 4, 5])
def test_lobatto_iiia_structure_exact(s):
    t = lobatto_iiia(s)
    assert np.all(t.a[0] == 0.0)  # H1, exactly
    assert np.all(t.a[-1] == t.b)  # H3, exactly
    assert t.c[0] == 0.0 and t.c[-1] == 1.0
    tb = lobatto_iiib(s)
    assert np.all(tb.a[:, -1] == 0.0)  # zero last column (H1')
    # measured: exactly 0 (IIIB column 1 set to b_1 by construction, H2')
    np.testing.assert_allclose(tb.a[:, 0], tb.b[0], rtol=0, atol=1e-16)  # H2'
    # IIIA: R(z) = e_s^T (I − zA)^{-1} 1 under H3 (paper App. A.3); large z tends to R(∞)
    # R(z) = R(∞) + C/z + O(z⁻²): measured |R(1e7) − R(∞)| = 4e-7 … 4e-6 for s = 2 … 5,
    # and it falls by exactly 10 from z = 1e6 to 1e7 (the float path agrees with R_inf)
    dev = [abs(t.stability_function(z) - (-1.0) ** (s - 1)) for z in (1e6, 1e7)]
    assert dev[1] < 5e-6
    assert dev[0] / dev[1] == pytest.approx(10.0, rel=1e-3)


def test_every_assumption_to_1e14_up_to_8_stages():
    for family in FAMILIES.values():
        for s in range(2, 9):
            t = family(s)
            B, C, D = t.simplifying_orders(tol=STRICT)
            assert B >= 2 * s - 2 and C >= s - 2 and D >= s - 2, (t.name, B, C, D)
            assert np.max(np.abs(t.B_residual(B))) <= STRICT
            assert np.max(np.abs(t.C_residual(C)), initial=0) <= STRICT
            assert np.max(np.abs(t.D_residual(D)), initial=0) <= STRICT
            # and in the paper's monomial form (eqs. 43–45)
            assert np.max(np.abs(t.B_residual(B, basis="monomial"))) <= STRICT
            assert np.max(np.abs(t.C_residual(C, basis="monomial")), initial=0) <= STRICT
            assert np.max(np.abs(t.D_residual(D, basis="monomial")), initial=0) <= STRICT
    for s in range(2, 9):
        pair = lobatto_iiia_iiib(s)
        assert pair.is_symplectic(tol=STRICT)
        for basis in ("legendre", "monomial"):
            assert np.max(np.abs(pair.CC_hat_residual(s, basis=basis)), initial=0) <= STRICT
            assert np.max(np.abs(pair.DD_hat_residual(s, basis=basis)), initial=0) <= STRICT
    for s in range(1, 9):
        assert tuple(gauss(s).simplifying_orders(STRICT)) == (2 * s, s, s)
        assert tuple(radau_iia(s).simplifying_orders(STRICT)) == (2 * s - 1, s, s - 1)
        assert tuple(radau_ia(s).simplifying_orders(STRICT)) == (2 * s - 1, s - 1, s)
    for s in range(2, 9):  # exact (B, C, D) of each Lobatto family, not only lower bounds
        assert tuple(lobatto_iiia(s).simplifying_orders(STRICT)) == (2 * s - 2, s, s - 2)
        assert tuple(lobatto_iiib(s).simplifying_orders(STRICT)) == (2 * s - 2, s - 2, s)
        assert tuple(lobatto_iiic(s).simplifying_orders(STRICT)) == (2 * s - 2, s - 1, s - 1)
        assert tuple(lobatto_iiic_star(s).simplifying_orders(STRICT)) == (2 * s - 2, s - 1,
                                                                          s - 1)


@pytest.mark.parametrize("s", [6, 7, 8])
def test_orders_beyond_the_tree_limit_are_certified(s):
    # trees are enumerated to order 12; Butcher's theorem certifies the rest
    assert gauss(s).order() == 2 * s
    assert lobatto_iiia(s).order() == 2 * s - 2
    assert lobatto_iiib(s).order() == 2 * s - 2
    assert radau_iia(s).order() == 2 * s - 1


def test_one_stage_members():
    assert gauss(1).order() == 2 and gauss(1).is_symplectic()
    assert radau_iia(1).order() == 1 and radau_iia(1).R_inf == 0.0
    assert radau_ia(1).order() == 1


@pytest.mark.parametrize(
    ("family", "minimum"),
    [(gauss, 1), (radau_ia, 1), (radau_iia, 1), (lobatto_iiia, 2), (lobatto_iiib, 2),
     (lobatto_iiic, 2), (lobatto_iiic_star, 2)],
)
def test_too_few_stages(family, minimum):
    with pytest.raises(TableauError, match=rf"needs s >= {minimum} stages; got s = {minimum - 1}"):
        family(minimum - 1)
    with pytest.raises(TableauError, match=r"must be an integer; got 2\.5"):
        family(2.5)
    with pytest.raises(TableauError, match="must be an integer"):
        family(True)


def test_names_and_caching_return_equal_values():
    assert lobatto_iiia(3).name == "Lobatto IIIA(3)"
    assert gauss(4) == gauss(4)
    assert hash(gauss(4)) == hash(gauss(4))
    assert gauss(4) != radau_iia(4)


def test_larger_s_builds():
    t = gauss(12)
    assert tuple(t.simplifying_orders(1e-13)) == (24, 12, 12)
    assert lobatto_iiia(12).satisfies_C(12, tol=1e-13)
