"""Node algebra (paper §2–3 "Projectors", §2.1 "Reflection form", §2.6): random batches."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.gni import (
    average_momentum_residual,
    constraint_gram,
    multiplier_from_post_momentum,
    node_from_post_momentum,
    pre_post_from_node,
    projector_P,
    projector_Q,
    reflect,
    reflection_isometry_residual,
)


def _data(seed, batch=(4,), n=5, m=2, affine=True):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((*batch, n, n))
    G = B @ np.swapaxes(B, -1, -2) + n * np.eye(n)
    mu = rng.standard_normal((*batch, m, n))
    p = rng.standard_normal((*batch, n))
    a = rng.standard_normal((*batch, m)) if affine else None
    return G, mu, p, a


@pytest.mark.parametrize("batch", [(), (1,), (3, 2)])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize(("seed", "n"), [(0, 2), (1, 3), (2, 5), (3, 6)])
def test_reflection_properties(seed, n, affine, batch):
    m = max(1, n // 2)
    G, mu, p_plus, a = _data(seed, batch, n, m, affine)
    Q = projector_Q(G, mu)
    P = projector_P(G, mu)
    # All checks below compare two evaluations of the same algebra (round-off times the
    # condition of G and of C = μG⁻¹μᵀ). Measured worst over 24 seeds (the test's 4 and
    # 1000k + (0..3), k = 1..5), n = 2..6, the three batch shapes (OPENBLAS_NUM_THREADS=1
    # and unset on the test's seeds): 1.7e-12 (involution, bound 1e-10: margin 58), 1.1e-11
    # (λ from p⁺, bound 1e-9: margin 92), all others <= 1.2e-13 against bounds 1e-12 (P + Q =
    # I: 1.1e-16) to 1e-9.
    np.testing.assert_allclose(Q @ Q, Q, atol=1e-10)
    np.testing.assert_allclose(P + Q, np.broadcast_to(np.eye(n), Q.shape), atol=1e-12)
    GQ = G @ Q
    np.testing.assert_allclose(GQ, np.swapaxes(GQ, -1, -2), atol=1e-10)
    np.testing.assert_allclose(mu @ P, 0 * mu, atol=1e-10)  # P maps into D = ker mu
    p_minus = reflect(p_plus, G, mu, a)
    # involution, the averaged-momentum constraint (9b)/(27b), isometry (row 3.9)
    np.testing.assert_allclose(reflect(p_minus, G, mu, a), p_plus, atol=1e-10)
    assert np.max(np.abs(average_momentum_residual(p_minus, p_plus, G, mu, a))) < 1e-10
    assert np.max(np.abs(reflection_isometry_residual(p_minus, p_plus, G, mu, a))) < 1e-9
    # linear case: p⁻ = (Pᵀ − Qᵀ) p⁺ (paper (8))
    if a is None:
        PT, QT = np.swapaxes(P, -1, -2), np.swapaxes(Q, -1, -2)
        np.testing.assert_allclose(p_minus, np.einsum("...ij,...j->...i", PT - QT, p_plus),
                                   atol=1e-10)
    # node data round trip and the impulse p⁻ − p⁺ = h muᵀ λ
    h = 0.3
    v, lam, p_bar = node_from_post_momentum(p_plus, G, mu, h, a)
    pm, pp = pre_post_from_node(v, lam, G, mu, h)
    np.testing.assert_allclose(pp, p_plus, atol=1e-10)
    np.testing.assert_allclose(pm, p_minus, atol=1e-10)
    # the multiplier is the impulse of the (independently computed) reflection: p⁻ − p⁺ = h muᵀ λ
    np.testing.assert_allclose(p_minus - p_plus, h * np.einsum("...ai,...a->...i", mu, lam),
                               atol=1e-10)
    # multiplier_from_post_momentum against the definition: the averaged momentum
    # p⁺ + (h/2) muᵀ λ satisfies mu G⁻¹ p + a = 0, solved here with an explicit inverse
    lam_direct = multiplier_from_post_momentum(p_plus, G, mu, h, a)
    Ginv = np.linalg.inv(G)
    C = mu @ Ginv @ np.swapaxes(mu, -1, -2)
    rhs = -np.einsum("...ai,...ij,...j->...a", mu, Ginv, p_plus) - (0 if a is None else a)
    np.testing.assert_allclose(lam_direct, (2.0 / h) * np.einsum("...ab,...b->...a",
                                                                np.linalg.inv(C), rhs),
                               atol=1e-9)
    r = np.einsum("...ij,...j->...i", mu, v) + (0 if a is None else a)
    assert np.max(np.abs(r)) < 1e-10
    np.testing.assert_allclose(p_bar, np.einsum("...ij,...j->...i", G, v), atol=1e-10)


def test_gram_matrix_and_rank_deficiency():
    G, mu, _, _ = _data(1, (), 4, 2, False)
    # the same solve and product (measured: bitwise equal); rounding bound of 4-term sums
    assert_rounding_close(constraint_gram(G, mu), mu @ np.linalg.solve(G, mu.T), n_terms=4,
                          n_ops=2, what="constraint_gram")
    mu_bad = np.vstack([mu[0], mu[0]])
    with pytest.raises(np.linalg.LinAlgError):
        projector_Q(G, mu_bad)
