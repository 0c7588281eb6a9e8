"""Closed-form identities of the papers' Lie-group machinery, in their notation."""

import numpy as np
import pytest
from chetaev.liegroups import SE2, SO3, Product, Rn, SO3Group, retraction


@pytest.mark.parametrize("G", [SO3, SE2, Product(SO3, Rn(2))], ids=repr)
@pytest.mark.parametrize("kind", ["exp", "cayley"])
def test_spec_identities(G, kind):
    rng = np.random.default_rng(11)
    tau = retraction(G, kind)
    xi = 0.8 * rng.normal(size=(4, G.dim))
    Ad = G.Ad(tau(xi))
    Ad_minus = G.Ad(tau(-xi))
    # discretization-maps-holonomic §3.2: Ad*_{tau(-xi)} = (dR_inv(xi))^T dL(xi)^T
    T = np.swapaxes
    # Round-off comparisons of unit-scale matrices (|xi| ~ 0.8, fixed seed). rtol = 0: the
    # default rtol = 1e-7 of assert_allclose was the real check before. measured: worst 4.4e-16
    # (of the four) with OPENBLAS_NUM_THREADS=1 and unset: margins >= 225.
    np.testing.assert_allclose(T(Ad_minus, -1, -2),
                               T(tau.dR_inv(xi), -1, -2) @ T(tau.dL(xi), -1, -2), rtol=0,
                               atol=1e-13)
    # GNI paper (Ferraro, Jiménez, Martín de Diego), Appendix, Lemma 9.5 (52), (53), in
    # right-trivialized form
    eta = rng.normal(size=(4, G.dim))
    np.testing.assert_allclose(np.einsum("...ij,...j", tau.dR(xi), eta),
                               np.einsum("...ij,...j", Ad @ tau.dR(-xi), eta), rtol=0,
                               atol=1e-13)
    np.testing.assert_allclose(tau.dR_inv(xi), tau.dR_inv(-xi) @ Ad_minus, rtol=0, atol=1e-13)
    # high-order-nonholonomic §2.8: dL_inv(-Xi) = dL_inv(Xi) Ad^{-1}_{tau(Xi)}
    np.testing.assert_allclose(tau.dL_inv(-xi), tau.dL_inv(xi) @ np.linalg.inv(Ad), rtol=0,
                               atol=1e-12)


def test_gni_momentum_map_identity():
    """GNI paper §7.4 (the ball scheme): S(-h w) = cay(h w)^T S(h w) with S(s) =
    (dcay_s^{-1})^T = I + s^/2 + s s^T/4
    (the paper's dcay is right-trivialized)."""
    cay = retraction(SO3, "cayley")
    s = np.array([0.3, -0.7, 0.2])

    def S(x):
        return cay.dR_inv(x).T

    # measured: 0 and 1.1e-16 (rtol = 0 now explicit): margin >= 9
    np.testing.assert_allclose(S(s), np.eye(3) + SO3.hat(s) / 2 + np.outer(s, s) / 4, rtol=0,
                               atol=1e-15)
    np.testing.assert_allclose(S(-s), cay(s).T @ S(s), rtol=0, atol=1e-15)


def test_group_equality_and_hash():
    assert SO3 == SO3Group() and hash(SO3) == hash(SO3Group())
    assert SO3 != SE2
    assert Rn(2) is Rn(2)
    assert Product(SO3, Rn(2)) == Product(SO3, Rn(2))
    assert retraction(SO3, "cay") == retraction(SO3Group(), "cayley")
    assert len({retraction(SO3, "exp"), retraction(SO3, "exp"), retraction(SO3, "cayley")}) == 2
