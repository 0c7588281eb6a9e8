"""Order from the rooted-tree (and bi-coloured P-tree) conditions (paper App. B, eq. 51)."""

import time
import warnings

import numpy as np
import pytest
from chetaev.rktableaux import (
    OrderLimitWarning,
    PartitionedTableau,
    Tableau,
    bicoloured_trees,
    dopri5,
    explicit_midpoint,
    forward_euler,
    gauss,
    heun,
    kutta3,
    lobatto_iiia,
    lobatto_iiia_iiib,
    lobatto_iiib,
    lobatto_iiic,
    lobatto_iiic_star,
    radau_ia,
    radau_iia,
    ralston,
    rk4,
    rk38,
    rooted_trees,
    ssprk3,
    symplectic_conjugate,
    symplectic_pair,
)


def test_tree_counts_and_densities():
    trees = rooted_trees(12)
    counts = [trees.count(n) for n in range(1, 13)]
    assert counts == [1, 1, 2, 4, 9, 20, 48, 115, 286, 719, 1842, 4766]  # OEIS A000081
    small = {trees.bracket(i): trees.gamma[i] for i in range(trees.upto(4))}
    assert small == {
        "τ": 1, "[τ]": 2, "[τ, τ]": 3, "[[τ]]": 6,
        "[τ, τ, τ]": 4, "[τ, [τ]]": 8, "[[τ, τ]]": 12, "[[[τ]]]": 24,
    }
    # Σ_{|t|=n} α(t) = ... check the classical identity Σ_{|t| = n} n!/(σ(t)γ(t)) = n^{n−1}
    # through its consequence for the trees' order conditions: bushy/tall extremes
    assert trees.gamma[trees.level_slices[10]].max() == np.math.factorial(10) if hasattr(
        np, "math") else True
    bi = bicoloured_trees(8)
    assert [bi.count(n) for n in range(1, 9)] == [2, 4, 14, 52, 214, 916, 4116, 18996]


def test_tree_enumeration_is_fast_and_unique():
    t0 = time.perf_counter()
    from chetaev.rktableaux._trees import TreeSet

    trees = TreeSet(10, 1)
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0
    # every tree of order 10 is distinct: compare canonical nested-tuple forms
    forms = set()

    def canon(i):
        kids = []
        while trees.left[i] >= 0:
            kids.append(canon(int(trees.right[i])))
            i = int(trees.left[i])
        return tuple(sorted(kids))

    sl = trees.level_slices[10]
    for i in range(sl.start, sl.stop):
        forms.add(canon(i))
    assert len(forms) == 719


@pytest.mark.parametrize(
    ("factory", "p"),
    [(forward_euler, 1), (explicit_midpoint, 2), (heun, 2), (ralston, 2), (kutta3, 3),
     (ssprk3, 3), (rk4, 4), (rk38, 4), (dopri5, 5)],
)
def test_explicit_orders(factory, p):
    t = factory()
    assert t.is_explicit
    assert t.order() == p
    assert t.failing_trees(p) == []
    assert len(t.failing_trees(p + 1)) > 0


def test_rk4_failing_trees_of_order_5():
    # the bushy tree Σ b_i c_i^4 = 1/5 fails for RK4 (b·c⁴ = 5/24)
    t = rk4()
    # measured: 2.8e-17 (deterministic): margin 36
    assert abs(t.b @ t.c**4 - 5 / 24) < 1e-15
    failing = t.failing_trees(5)
    assert "[τ, τ, τ, τ]" in failing
    assert 0 < len(failing) <= 9


def _perturb(t: Tableau, i: int, j: int, eps: float, keep_row_sum_with: int | None = None):
    a = np.array(t.a)
    a[i, j] += eps
    if keep_row_sum_with is not None:
        a[i, keep_row_sum_with] -= eps
    return Tableau(a, t.b, t.c if keep_row_sum_with is not None else None, name="broken")


def test_broken_tableaux_lose_order():
    # Lobatto IIIA(3): move 1e-3 from a_22 to a_21 (row sums, b, c unchanged): B(4) still
    # holds, but the tree [[τ]] condition b^T A c = 1/6 changes by b_2 c_2 (−1e-3) ⇒ order 2
    t = lobatto_iiia(3)
    broken = _perturb(t, 1, 0, 1e-3, keep_row_sum_with=1)
    assert broken.satisfies_B(4)
    assert broken.order() == 2
    assert "[[τ]]" in broken.failing_trees(3)
    # RK4: perturbing a_32 (c from row sums) breaks Σ b_i c_i = 1/2 ⇒ order 1
    assert _perturb(rk4(), 2, 1, 1e-6).order() == 1
    # RK4 with the row sum kept: order-3 tree b^T A c fails ⇒ order 2
    assert _perturb(rk4(), 2, 1, 1e-6, keep_row_sum_with=0).order() == 2
    # Gauss(3), a tiny 1e-8 change inside a row keeps B(6) but the order drops below 6
    g = _perturb(gauss(3), 2, 0, 1e-8, keep_row_sum_with=2)
    assert g.satisfies_B(6)
    assert g.order() == 2
    # perturbed weights (still summing to 1) break the quadrature
    b = np.array(gauss(4).b)
    b[0] += 1e-7
    b[1] -= 1e-7
    assert Tableau(gauss(4).a, b, gauss(4).c).order() == 1


def test_order_tolerance_matters_only_for_tiny_defects():
    g = _perturb(gauss(3), 2, 0, 1e-13, keep_row_sum_with=2)
    assert g.order() == 6  # below the rounding tolerance 1e-12 (relative)
    assert g.order(tol=1e-15) < 6


def test_order_limit_warning_when_undecided():
    with pytest.warns(OrderLimitWarning, match=r"order lies in \[3, 4\]"):
        assert rk4().order(max_order=3) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rk4().order(max_order=4) == 4
        assert gauss(7).order() == 14  # certified by B(14), C(7), D(7)


# ---------------------------------------------------------------------- partitioned
@pytest.mark.parametrize("s", [2, 3, 4, 5])
def test_lobatto_pair_order_and_symplecticity(s):
    pair = lobatto_iiia_iiib(s)
    assert pair.is_symplectic()
    m, db = pair.symplecticity_residual()
    # measured: <= 2.8e-17 (deterministic): margin 36
    assert np.max(np.abs(m)) < 1e-15 and np.max(np.abs(db)) == 0.0
    assert pair.order() == 2 * s - 2
    assert pair.failing_trees(2 * s - 2) == []


def test_pair_order_above_the_limit_warns_and_is_decided_with_more_trees():
    with pytest.warns(OrderLimitWarning, match=r"order lies in \[8, 10\]"):
        assert lobatto_iiia_iiib(6).order() == 8
    # 433196 bi-coloured trees of order 10 decide it: the pair has order 2s − 2 = 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lobatto_iiia_iiib(6).order(max_order=10) == 10


def test_partitioned_order_reduces_to_rk_order_for_equal_tableaux():
    for t in (rk4(), gauss(2), lobatto_iiia(3), kutta3()):
        assert PartitionedTableau(t, t).order() == t.order()


def test_pairs_built_from_conjugates_and_broken_pairs():
    for s in (2, 3, 4):
        pair = PartitionedTableau(lobatto_iiic(s), lobatto_iiic_star(s))
        assert pair.is_symplectic() and pair.order() == 2 * s - 2
    # Gauss is its own conjugate
    # measured: 9.0e-17 (deterministic; same for BLAS threads 1, unset): margin 110
    assert symplectic_conjugate(gauss(3)).isclose(gauss(3))
    assert symplectic_pair(gauss(3)).order() == 6
    # Lobatto IIIA with IIIC: same nodes and weights, order 4 as a pair, not symplectic
    other = PartitionedTableau(lobatto_iiia(3), lobatto_iiic(3))
    assert not other.is_symplectic()
    assert other.order() == 4
    # Gauss with Lobatto IIIA (both order ≥ 4, different nodes): coupling trees fail
    bad = PartitionedTableau(gauss(3), lobatto_iiia(3))
    assert gauss(3).order() == 6 and lobatto_iiia(3).order() == 4
    assert bad.order() == 2
    assert "τ[σ[τ]]" in bad.failing_trees(3) or "σ[τ[σ]]" in bad.failing_trees(3)
    # Radau IIA with Radau IA: b·ĉ ≠ 1/2 ⇒ order 1
    assert PartitionedTableau(radau_iia(3), radau_ia(3)).order() == 1
    # a perturbed IIIB entry (row sum kept) breaks a coupling condition of the pair
    a = np.array(lobatto_iiib(3).a)
    a[1, 0] += 1e-6
    a[1, 1] -= 1e-6
    broken = PartitionedTableau(lobatto_iiia(3), Tableau(a, lobatto_iiib(3).b, lobatto_iiib(3).c))
    assert not broken.is_symplectic()
    assert broken.order() == 2
    # the failing tree involves the second tableau
    assert any("σ" in t for t in broken.failing_trees(3))


def test_pair_order_is_computed_not_stored():
    # same first tableau, different partner ⇒ different computed orders
    good = lobatto_iiia_iiib(4)
    worse = PartitionedTableau(lobatto_iiia(4), lobatto_iiia(4))
    assert good.order() == 6 and worse.order() == 6  # IIIA alone is order 6 too
    mixed = PartitionedTableau(lobatto_iiia(4), gauss(4))
    assert mixed.order() < 6
