"""Symplecticity, conjugates, hypotheses H1–H3/H1'–H2', mixed assumptions, stability
function, display (high-order paper §4.2–4.3, App. B)."""

import math

import numpy as np
import pytest
from chetaev.rktableaux import (
    FAMILIES,
    ConstrainedHypotheses,
    PartitionedTableau,
    Tableau,
    gauss,
    lobatto_iiia,
    lobatto_iiia_iiib,
    lobatto_iiib,
    lobatto_iiic,
    lobatto_iiic_star,
    properties_table,
    radau_ia,
    radau_iia,
    rk4,
    symplectic_conjugate,
)


@pytest.mark.parametrize("s", [2, 3, 4, 5, 6])
def test_conjugate_of_iiia_is_iiib_and_involution(s):
    a, b = lobatto_iiia(s), lobatto_iiib(s)
    conj = symplectic_conjugate(a)
    # measured: 1.4e-16, 3.5e-17, 1.1e-16 over s = 2..6 (deterministic): margins 7, 29, 90
    assert conj.isclose(b, atol=1e-15)
    assert symplectic_conjugate(conj).isclose(a, atol=1e-15)
    assert symplectic_conjugate(lobatto_iiic(s)).isclose(lobatto_iiic_star(s), atol=1e-14)
    # b_i â_ij + b_j a_ji = b_i b_j for the pair built from the two families
    m, db = PartitionedTableau(a, b).symplecticity_residual()
    # measured: <= 2.8e-17 over s = 2..6: margin 36
    assert np.max(np.abs(m)) < 1e-15 and np.all(db == 0)


def test_symplectic_tableaux_are_self_conjugate():
    for s in (1, 2, 3, 4):
        # measured: 9.0e-17 for s = 1..4 (deterministic): margin 11
        assert symplectic_conjugate(gauss(s)).isclose(gauss(s), atol=1e-15)
    assert not symplectic_conjugate(radau_iia(3)).isclose(radau_iia(3))
    assert not symplectic_conjugate(rk4()).isclose(rk4())


@pytest.mark.parametrize("s", [2, 3, 4, 5])
def test_lobatto_pair_hypotheses_and_mixed_assumptions(s):
    pair = lobatto_iiia_iiib(s)
    hyp = pair.satisfies_constrained_hypotheses()
    assert isinstance(hyp, ConstrainedHypotheses)
    assert (hyp.H1, hyp.H2, hyp.H3, hyp.H1p, hyp.H2p) == (True,) * 5
    assert hyp.all and bool(hyp)
    assert "satisfies H1, H2, H3, H1' and H2'" in hyp.message
    # CĈ(s), DD̂(s), ĈC(s−2), D̂D(s−2) hold; one more fails (paper App. A, eqs. (43)–(45), App. B,
    # paper App. A.3.1)
    # measured: the CC^/DD^ residuals here <= 5.6e-17 (tol margin 180); the failing s + 1 >= 3.7e-5
    assert pair.satisfies_CC_hat(s, tol=1e-14) and not pair.satisfies_CC_hat(s + 1)
    assert pair.satisfies_DD_hat(s, tol=1e-14) and not pair.satisfies_DD_hat(s + 1)
    sw = pair.swapped()
    assert sw.satisfies_CC_hat(s - 2, tol=1e-14) and sw.satisfies_DD_hat(s - 2, tol=1e-14)
    if s - 1 >= 2:  # ĈC(1), D̂D(1) are vacuous
        assert not sw.satisfies_CC_hat(s - 1) and not sw.satisfies_DD_hat(s - 1)
    mo = pair.mixed_orders()
    assert (mo.CC_hat, mo.DD_hat) == (s, s)
    assert (mo.C_hatC, mo.D_hatD) == (max(s - 2, 1), max(s - 2, 1))
    # the paper's monomial form agrees
    assert np.max(np.abs(pair.CC_hat_residual(s, basis="monomial")), initial=0) < 1e-14
    assert np.max(np.abs(pair.DD_hat_residual(s, basis="monomial")), initial=0) < 1e-14
    assert np.max(np.abs(pair.CC_hat_residual(s + 1, basis="monomial"))) > 1e-5
    # Q = R = p − r and Q̂ = R̂ = p − q for a conjugate pair (paper App. A.3.1)
    p, q, r = pair.first.simplifying_orders()
    assert (mo.CC_hat, mo.DD_hat) == (p - r, p - r)
    if p - q >= 2:
        assert (mo.C_hatC, mo.D_hatD) == (p - q, p - q)


def test_conjugate_facts_for_every_family():
    # C(q) ⇒ D̂(q) and D(r) ⇒ Ĉ(r), B̂ = B (paper App. A.3.1)
    for family in FAMILIES.values():
        for s in (2, 3, 4):
            t = family(s)
            B, C, D = t.simplifying_orders()
            Bh, Ch, Dh = symplectic_conjugate(t).simplifying_orders()
            assert Bh == B and Dh >= C and Ch >= D, t.name


def test_hypotheses_fail_for_gauss_and_name_the_failures():
    hyp = PartitionedTableau(gauss(2), gauss(2)).satisfies_constrained_hypotheses()
    assert (hyp.H1, hyp.H2, hyp.H3, hyp.H1p, hyp.H2p) == (False, True, False, False, False)
    assert not hyp.all and not bool(hyp)
    assert "H1 (first row of a must vanish" in hyp.message
    assert "H3 (last row of a must equal b" in hyp.message
    assert "H1' (last column" in hyp.message and "H2' (first column" in hyp.message
    assert "H2 (" not in hyp.message
    assert "lobatto_iiia_iiib" in hyp.message


def test_each_hypothesis_can_fail_alone():
    good = lobatto_iiia_iiib(3)
    # IIIA paired with itself: H1–H3 hold, H1' and H2' fail
    h = PartitionedTableau(lobatto_iiia(3), lobatto_iiia(3)).satisfies_constrained_hypotheses()
    assert (h.H1, h.H2, h.H3, h.H1p, h.H2p) == (True, True, True, False, False)
    # Radau IIA with its conjugate: stiffly accurate but a_1j ≠ 0
    h = PartitionedTableau(radau_iia(3), symplectic_conjugate(radau_iia(3)))
    h = h.satisfies_constrained_hypotheses()
    assert not h.H1 and h.H3
    # singular Ã: H2 alone
    a = np.array(good.first.a)
    a[1, 1:] = a[2, 1:]
    bad = PartitionedTableau(Tableau(a, good.first.b, None), good.second)
    h = bad.satisfies_constrained_hypotheses()
    assert (h.H1, h.H2, h.H3, h.H1p, h.H2p) == (True, False, True, True, True)
    assert "must be invertible" in h.message


def test_stability_function():
    z = np.array([0.1, -0.3 + 0.2j, 0.05j])
    for s in (1, 2, 3):
        g = gauss(s)
        # diagonal Padé approximation: R(z) − e^z = O(z^{2s+1})
        err = abs(g.stability_function(1e-2) - math.exp(1e-2))
        # measured: 8.4e-8, 1.4e-13, 2.2e-16 (s = 1, 2, 3; s = 3 round-off): margins 119, 7e3, 450
        assert err < 10 * 1e-2 ** (2 * s + 1)
        # |R(iy)| = 1 (A-stable, symplectic)
        # measured: 8.9e-16 (|R(iy)| = 1, y up to 50), 2.2e-16 (deterministic): margins 1100, 4.5
        np.testing.assert_allclose(np.abs(g.stability_function(1j * np.linspace(-50, 50, 11))),
                                   1.0, rtol=0, atol=1e-12)
    rz = rk4().stability_function(z)
    # rtol = 0 here and above: the default rtol = 1e-7 of assert_allclose was the real check
    np.testing.assert_allclose(rz, 1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24, rtol=0, atol=1e-15)
    assert rz.shape == (3,)
    assert np.isinf(rk4().R_inf)
    assert radau_iia(3).R_inf == 0.0 and radau_ia(2).R_inf == 0.0
    assert np.isscalar(gauss(2).stability_function(0.5)) or np.ndim(
        gauss(2).stability_function(0.5)) == 0
    # IIIA: R_A(∞) = (−1)^{s−1} (paper App. A, eqs. (43)–(45), App. B)
    for s in range(2, 9):
        # measured: <= 4.4e-16 for s = 2..8: margin 2200
        assert lobatto_iiia(s).R_inf == pytest.approx((-1) ** (s - 1), abs=1e-12)
        assert lobatto_iiia(s).is_A_stable_at_infinity()
    assert not lobatto_iiic_star(3).is_A_stable_at_infinity()


def test_symmetry_and_stiff_accuracy_residuals():
    ra, rb = lobatto_iiia(4).symmetry_residual()
    # measured: 1.4e-17 and 0 (deterministic): margin 72
    assert np.max(np.abs(ra)) < 1e-15 and np.max(np.abs(rb)) < 1e-15
    ra, _ = radau_iia(3).symmetry_residual()
    assert np.max(np.abs(ra)) > 0.01
    assert np.max(np.abs(lobatto_iiia(5).stiff_accuracy_residual())) == 0.0
    assert lobatto_iiic(3).is_stiffly_accurate() and not gauss(3).is_stiffly_accurate()
    assert np.array_equal(gauss(2).check_symplecticity(), np.ones((2, 2), bool))
    assert not np.all(radau_ia(2).check_symplecticity())


def test_repr_and_latex():
    t = lobatto_iiia(3)
    text = repr(t)
    assert text.startswith("Tableau('Lobatto IIIA(3)', stages=3)")
    assert "0.208333" in text and "-0.0416667" in text
    assert len(text.splitlines()) == 1 + 3 + 2
    tex = t.to_latex(digits=6)
    assert tex.startswith(r"\begin{array}{c|ccc}") and tex.endswith(r"\end{array}")
    assert r"\hline" in tex and "0.208333" in tex
    assert tex.count("&") == 3 * 3 + 3
    full = t.to_latex()
    assert "0.20833333333333334" in full
    pair = repr(lobatto_iiia_iiib(2))
    assert "PartitionedTableau('Lobatto IIIA–IIIB(2)', stages=2)" in pair
    assert "Lobatto IIIB(2)" in pair
    assert r"\qquad" in lobatto_iiia_iiib(2).to_latex()


def test_arrays_are_read_only_and_copied():
    a = np.array([[0.0, 0.0], [0.5, 0.5]])
    t = Tableau(a, [0.5, 0.5])
    a[1, 0] = 99.0
    assert t.a[1, 0] == 0.5
    # bitwise by design: the nodes 0 and 1 are set exactly
    np.testing.assert_array_equal(t.c, [0.0, 1.0])
    for arr in (t.a, t.b, t.c):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1.0
    with pytest.raises(AttributeError):
        t.a = a


def test_properties_table_is_valid_rst():
    text = properties_table(stages=range(2, 4))
    assert text.count(".. list-table::") == 2
    assert "Lobatto IIIA(3)" in text and "Lobatto IIIA–IIIB(3)" in text
    # docutils is a test dependency (pyproject [test]): the table checks below must not skip
    import io

    import docutils.core as docutils_core
    import docutils.nodes

    warnings = io.StringIO()
    doc = docutils_core.publish_doctree(
        text, settings_overrides={"warning_stream": warnings, "report_level": 1}
    )
    assert warnings.getvalue() == ""
    tables = list(doc.findall(docutils.nodes.table))
    assert len(tables) == 2
    def cells(table):
        out = {}
        for r in table.findall(docutils.nodes.row):
            texts = [e.astext() for e in r.findall(docutils.nodes.entry)]
            out[texts[0]] = texts
        return out

    rows = cells(tables[0])
    # name, s, order, stage order, B, C, D, R(∞), symplectic, symmetric, stiffly accurate
    assert rows["Lobatto IIIA(3)"][1:] == ["3", "4", "3", "4", "3", "1", "1", "no", "yes", "yes"]
    assert rows["Gauss(3)"][1:] == ["3", "6", "3", "6", "3", "3", "-1", "yes", "yes", "no"]
    assert rows["RK4"][7] == "∞"
    prow = cells(tables[1])
    assert prow["Lobatto IIIA–IIIB(3)"][1:] == ["3", "4", "yes", "3", "3", "1", "1", "yes"]


def test_pickle_and_copy_keep_values_and_read_only_arrays():
    import copy
    import pickle

    import attrs

    pair = lobatto_iiia_iiib(3)
    _ = pair.first.R_inf
    for clone in (pickle.loads(pickle.dumps(pair)), copy.deepcopy(pair)):
        assert clone == pair
        assert clone.first.R_inf == pair.first.R_inf
        for arr in (clone.first.a, clone.second.b, clone.first.c):
            assert not arr.flags.writeable
    renamed = attrs.evolve(gauss(2), name="g")
    assert renamed.name == "g" and renamed == gauss(2) and not renamed.a.flags.writeable
