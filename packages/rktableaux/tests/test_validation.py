"""Bad input raises TableauError (a ValueError) with a message saying what was wrong."""

import numpy as np
import pytest
from chetaev.rktableaux import (
    PartitionedTableau,
    Tableau,
    TableauError,
    explicit_midpoint,
    gauss,
    lobatto_iiia,
    lobatto_iiia_iiib,
    properties_table,
    symplectic_conjugate,
)
from chetaev.rktableaux.testing import fit_order, pendulum, rk_solve


def test_tableau_error_is_value_error():
    assert issubclass(TableauError, ValueError)


@pytest.mark.parametrize(
    ("a", "b", "c", "match"),
    [
        ([[0, 0, 0], [1, 0, 0]], [0.5, 0.5], None, r"a must be a square \(s, s\) matrix"),
        ([1.0, 2.0], [1.0], None, r"got shape \(2,\)"),
        (np.zeros((0, 0)), [], None, "s >= 1"),
        ([[0, 0], [1, 0]], [0.5, 0.5, 0.0], None, r"b must be a vector of length s = 2"),
        ([[0, 0], [1, 0]], [[0.5, 0.5]], None, r"got shape \(1, 2\)"),
        ([[0, 0], [1, 0]], [0.5, 0.5], [0.0], r"c must be a vector of length s = 2"),
        ([[0, np.nan], [1, 0]], [0.5, 0.5], None, r"a must contain finite values only; a\[0, 1\]"),
        ([[0, 0], [1, 0]], [0.5, np.inf], None, r"b must contain finite values only"),
        ([[0, 0], [1, 0]], [0.5, 0.5], [0, np.inf], r"c must contain finite values only"),
        ([["x", 0], [1, 0]], [0.5, 0.5], None, "a must be an array of real numbers"),
    ],
)
def test_bad_tableau_input(a, b, c, match):
    with pytest.raises(TableauError, match=match):
        Tableau(a, b, c)


def test_nodes_need_not_be_row_sums_but_the_residual_says_so():
    # Lobatto IIIB(2): c = (0, 1), row sums (1/2, 1/2) — accepted, and C(1) reports it
    t = Tableau([[0.5, 0.0], [0.5, 0.0]], [0.5, 0.5], [0.0, 1.0])
    # exact: row sums of a hand-written tableau with binary fractions (rtol default, err 0)
    np.testing.assert_allclose(t.row_sum_residual(), [0.5, -0.5])
    assert not t.satisfies_C(1)
    assert Tableau([[0.5, 0.0], [0.5, 0.0]], [0.5, 0.5]).satisfies_C(1)


def test_bad_arguments_of_methods():
    t = gauss(2)
    with pytest.raises(TableauError, match="p must be a non-negative integer; got -1"):
        t.satisfies_B(-1)
    with pytest.raises(TableauError, match="q must be a non-negative integer"):
        t.satisfies_C(1.5)
    with pytest.raises(TableauError, match="tol must be a positive finite number; got -1"):
        t.satisfies_D(1, tol=-1)
    with pytest.raises(TableauError, match="tol must be a positive number; got 'x'"):
        t.is_symplectic(tol="x")
    with pytest.raises(TableauError, match="basis must be 'legendre' or 'monomial'"):
        t.B_residual(2, basis="chebyshev")
    with pytest.raises(TableauError, match="max_order must be a non-negative integer"):
        t.order(max_order=None)
    assert t.satisfies_B(0) and t.satisfies_C(0) and t.satisfies_D(0)


def test_symplectic_conjugate_needs_nonzero_weights():
    with pytest.raises(TableauError, match=r"needs every weight b_i != 0 .*b\[0\] = 0"):
        symplectic_conjugate(explicit_midpoint())
    with pytest.raises(TableauError, match="expects a Tableau; got ndarray"):
        symplectic_conjugate(np.eye(2))


def test_partitioned_tableau_input():
    with pytest.raises(TableauError, match=r"same number of stages; got first.stages = 2 and "
                       r"second.stages = 3"):
        PartitionedTableau(gauss(2), gauss(3))
    with pytest.raises(TableauError, match=r"PartitionedTableau\.second must be a Tableau; got"):
        PartitionedTableau(gauss(2), np.eye(2))
    with pytest.raises(TableauError, match="Q must be a non-negative integer"):
        lobatto_iiia_iiib(3).satisfies_CC_hat(-2)


def test_lobatto_pair_needs_two_stages():
    with pytest.raises(TableauError, match="lobatto_iiia needs s >= 2 stages; got s = 1"):
        lobatto_iiia_iiib(1)
    with pytest.raises(TableauError, match="properties_table needs s >= 2"):
        properties_table(stages=[1])


def test_testing_helpers_input():
    with pytest.raises(TableauError, match="needs split"):
        rk_solve(lobatto_iiia_iiib(2), pendulum, [1.0, 0.0], 0.1, 1)
    with pytest.raises(TableauError, match="must be a Tableau or PartitionedTableau"):
        rk_solve("gauss", pendulum, [1.0, 0.0], 0.1, 1)
    with pytest.raises(ValueError, match="above the round-off floor 1e-13; a fit needs at least 3"):
        fit_order([0.1, 0.05, 0.025], [1e-6, 1e-8, 1e-14], floor=1e-13)  # 2 points are not a fit
    with pytest.raises(RuntimeError, match="did not converge at step 0"):
        rk_solve(lobatto_iiia(3), pendulum, [1.0, 0.0], 1e3, 1, max_iter=2)


def test_equality_semantics():
    t = Tableau([[0.0]], [1.0], name="a")
    u = Tableau([[0.0]], [1.0], name="b")
    assert t == u and hash(t) == hash(u)
    assert t != Tableau([[0.0]], [1.0], [0.5])
    assert (t == 3) is False
    assert not t.isclose("x")


def test_fit_order_is_the_one_fit():
    """The one order fit: exact slope on a power law, points at or below the floor left out,
    bad input named (``discrete_lagrangian.testing.fit_order`` is the same object: checked in
    that package's tests, since this package cannot import it)."""
    hs = np.array([0.2, 0.1, 0.05, 0.025])
    errs = 3.0 * hs**4
    assert abs(fit_order(hs, errs) - 4.0) < 1e-12
    errs[-1] = 1e-11  # at the floor: excluded, the slope of the rest is still exact
    assert abs(fit_order(hs, errs, floor=1e-11) - 4.0) < 1e-12
    for h, e, match in (
        ([0.1, 0.05], [1e-3, 1e-4, 1e-5], "equal length"),
        ([-0.1, 0.05, 0.025], [1e-3, 1e-4, 1e-5], "`hs` must be positive"),
        ([0.1, 0.05, 0.025], [np.nan, 1e-4, 1e-5], "non-negative and finite"),
        ([0.1, 0.05, 0.025], [1e-3, 1e-4, 1e-5], "`min_points`"),
    ):
        with pytest.raises(TableauError, match=match):
            fit_order(h, e, min_points=1 if match == "`min_points`" else 3)
