"""Property-based checks on random tableaux (hypothesis)."""

import numpy as np
from chetaev.rktableaux import PartitionedTableau, Tableau, symplectic_conjugate
from chetaev.rktableaux.testing import rk_solve
from hypothesis import given, settings
from hypothesis import strategies as st

coef = st.floats(-1.0, 1.0, allow_nan=False)


@st.composite
def tableaux(draw, explicit=False):
    s = draw(st.integers(1, 4))
    a = np.array(draw(st.lists(coef, min_size=s * s, max_size=s * s))).reshape(s, s)
    if explicit:
        a = np.tril(a, -1)
    b = np.array(draw(st.lists(st.floats(0.1, 1.0), min_size=s, max_size=s)))
    sign = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=s, max_size=s)))
    return Tableau(a, b * sign)


@settings(max_examples=40, deadline=None, database=None)
@given(tableaux())
def test_conjugate_is_an_involution_and_pairs_are_symplectic(t):
    conj = symplectic_conjugate(t)
    # measured: worst 3.3e-16 over the hypothesis examples (tableaux of unit scale): margin 3000
    assert symplectic_conjugate(conj).isclose(t, atol=1e-12)
    pair = PartitionedTableau(t, conj)
    assert pair.is_symplectic(tol=1e-12)
    # conjugation preserves the quadrature; C(q) ∧ B(q) ⇒ D̂(q) and D(r) ∧ B(r) ⇒ Ĉ(r)
    # (paper App. A.3.1 states it for consistent methods, where B(q) is implied)
    # (strict tolerance on t, looser on the conjugate: its residuals are combinations of
    # t's residuals with factors ≤ 10 here)
    B, C, D = t.simplifying_orders(tol=1e-12)
    Bh, Ch, Dh = conj.simplifying_orders(tol=1e-8)
    assert Dh >= min(C, B) and Ch >= min(D, B)
    assert conj.simplifying_orders(tol=1e-12).B == B and Bh >= B  # b̂ = b, ĉ = c


@settings(max_examples=40, deadline=None, database=None)
@given(tableaux(), st.floats(-0.2, 0.2))
def test_stability_function_is_one_step_on_the_linear_problem(t, z):
    def linear(y):
        return z * y, np.full((*y.shape, 1), z)

    # |z| ρ(A) ≤ 0.2 · 4 < 1: I − zA is invertible, no pole nearby
    y1 = rk_solve(t, linear, [1.0], 1.0, 1)[0]
    R = t.stability_function(z)
    # measured: worst 4.4e-16 over the CI examples (relative): margin 2250
    assert abs(y1 - R) < 1e-12 * max(1.0, abs(R))


@settings(max_examples=30, deadline=None, database=None)
@given(st.floats(0.05, 2.0))
def test_two_stage_explicit_family_has_order_exactly_two(alpha):
    t = Tableau([[0, 0], [alpha, 0]], [1 - 1 / (2 * alpha), 1 / (2 * alpha)])
    assert t.order() == 2
    assert PartitionedTableau(t, t).order() == 2


@settings(max_examples=30, deadline=None, database=None)
@given(tableaux(explicit=True))
def test_order_agrees_with_its_own_conditions(t):
    p = t.order()
    assert np.all(np.abs(t.order_condition_residuals(p)) <= 1e-12)
    assert np.any(np.abs(t.order_condition_residuals(p + 1)) > 1e-12)
    assert p <= t.simplifying_orders().B
