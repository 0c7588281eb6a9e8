"""``Retraction.dL_tensor`` and ``Retraction.dL_deriv_T_deriv`` (the full derivative tensor of
dL and the Jacobian of dL_deriv(xi, eta)^T mu, used by Newton Jacobians of Lie-group PRK steps)
against central finite differences of ``dL`` / ``dL_deriv``, batched, for every group and both
retractions; ``kernels`` give the same numbers as the checked methods."""

import numpy as np
import pytest
from chetaev.liegroups import SE2, SE3, SO2, SO3, Product, Rn, retraction
from chetaev.liegroups.testing import central_differences

GROUPS = {"SO2": SO2, "SO3": SO3, "SE2": SE2, "SE3": SE3, "R2": Rn(2),
          "SO3xR2": Product(SO3, Rn(2))}


@pytest.mark.parametrize("gname", list(GROUPS))
@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_dl_tensor_and_its_derivative_match_finite_differences(gname, kind):
    G = GROUPS[gname]
    R = retraction(G, kind)
    rng = np.random.default_rng(11)
    d = G.dim
    xi = 0.7 * rng.normal(size=(4, 2, d))  # two batch axes
    eta, mu = rng.normal(size=(4, 2, d)), rng.normal(size=(4, 2, d))
    T = R.dL_tensor(xi)
    assert T.shape == (4, 2, d, d, d)
    # Central differences (step 1e-6) of smooth maps with entries O(1): truncation O(step²)
    # ≈ 1e-12 and cancellation ≈ eps·|f|/step ≈ 2e-10; measured max 1.6e-10 (T) and 4.3e-10
    # (S) over these cases, bound 1e-8 (margin > 20x).
    assert np.max(np.abs(T - central_differences(lambda x: R.dL(x), xi))) < 1e-8
    J = R.dL_deriv(xi, eta)
    assert np.max(np.abs(np.einsum("...bac,...a->...bc", T, eta) - J)) < 1e-13
    S = R.dL_deriv_T_deriv(xi, eta, mu)
    assert S.shape == (4, 2, d, d)
    S_fd = central_differences(lambda x: R.dL_deriv(x, eta, mu), xi)
    assert np.max(np.abs(S - S_fd)) < 1e-8
    # broadcasting a single xi against a batch of (eta, mu)
    Sb = R.dL_deriv_T_deriv(xi[0, 0], eta, mu)
    assert np.max(np.abs(Sb[0, 0] - S[0, 0])) < 1e-13
    # the unchecked kernels are the same maps
    k = R.kernels
    assert np.array_equal(k.dL_tensor(xi), T) and np.array_equal(k.dL_deriv_T_deriv(xi, eta, mu), S)
    assert np.array_equal(k.tau(xi), R(xi)) and np.array_equal(k.dL(xi), R.dL(xi))
    g = R(xi)
    assert np.array_equal(k.Ad(g), G.Ad(g)) and np.array_equal(k.inverse(g), G.inverse(g))
    assert np.array_equal(k.compose(g, g), G.compose(g, g))


def test_dl_tensor_validates_input():
    R = retraction(SO3, "cayley")
    with pytest.raises(ValueError, match="xi"):
        R.dL_tensor(np.array([np.nan, 0.0, 0.0]))
    with pytest.raises(ValueError, match="mu"):
        R.dL_deriv_T_deriv(np.zeros(3), np.zeros(3), np.zeros(2))


AD_GROUPS = {**GROUPS, "R2xSO3": Product(Rn(2), SO3), "SO3xR1xSE2": Product(SO3, Rn(1), SE2),
             "R3xR1": Product(Rn(3), Rn(1))}


@pytest.mark.parametrize("gname", list(AD_GROUPS))
def test_ad_pair_is_ad_and_coadjoint_of_inverse(gname):
    """``Ad_pair(g) = (Ad(g), Ad_star(g⁻¹))`` (closed forms for SO(3), R^n and products with
    R^n factors written directly); the kernel gives the same numbers."""
    G = AD_GROUPS[gname]
    g = G.random(np.random.default_rng(5), (4, 2))
    A, B = G.Ad_pair(g)
    assert A.shape == B.shape == (4, 2, G.dim, G.dim)
    # the same floating-point operations as the separate calls (SO(3): Ad(Rᵀ)ᵀ = R exactly)
    assert np.array_equal(A, G.Ad(g))
    assert np.array_equal(B, G.Ad_star(G.inverse(g)))
    KA, KB = retraction(G, "cayley").kernels.Ad_pair(g)
    assert np.array_equal(KA, A) and np.array_equal(KB, B)
    # Ad(g⁻¹) = Ad(g)⁻¹: entries O(1) (SE(3) up to |p|), sums of dim products; measured max
    # 1.4e-15 over these groups and seeds 0-19, bound 1e-13 (margin > 70x)
    assert np.max(np.abs(np.swapaxes(B, -1, -2) @ A - np.eye(G.dim))) < 1e-13
    A[...] = 0.0  # the public results are fresh arrays
    assert not np.array_equal(G.Ad(g), A)
