"""Node-level algebra of the GNI: projectors, the reflection, multipliers.

Everything here is a pure function of arrays with leading batch axes:
vectors ``(..., n)``, metric ``G`` ``(..., n, n)``, constraint matrix ``mu``
``(..., m, n)``. Covectors (momenta) are arrays paired by the dot product.

Conventions (GNI paper Def. 4.1 and Def. 6.1):

* ``C = mu G⁻¹ muᵀ`` (m × m), ``Q = G⁻¹ muᵀ C⁻¹ mu`` acts on vectors, ``P = I − Q``;
  on covectors the transposes ``Qᵀ = muᵀ C⁻¹ mu G⁻¹`` and ``Pᵀ`` act.
* The affine constraint ``mu (v − Y) = 0`` is stored as ``Φ(q, v) = mu v + a`` with
  ``a = −mu Y``; then ``Qᵀ Π = −muᵀ C⁻¹ a`` for ``Π = G Y``, so ``Y`` itself is never needed.
* Multiplier sign (chetaev convention): ``d/dt ∂L/∂v − ∂L/∂q = muᵀ λ``. At a node the
  leaving (pre-) momentum and the arriving (post-) momentum differ by the impulse
  ``p⁻_k − p⁺_k = h muᵀ λ_k``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "average_momentum_residual",
    "constraint_gram",
    "multiplier_from_post_momentum",
    "node_from_post_momentum",
    "pre_post_from_node",
    "projector_P",
    "projector_Q",
    "reflect",
    "reflection_isometry_residual",
]


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.einsum("...ij,...j->...i", A, x)


def _mtv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.einsum("...ji,...j->...i", A, x)


def constraint_gram(G: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``C = mu G⁻¹ muᵀ``, shape ``(..., m, m)`` (paper §2–3, "Projectors")."""
    Ginv_muT = np.linalg.solve(G, np.swapaxes(mu, -1, -2))
    return mu @ Ginv_muT


def projector_Q(G: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Vector projector onto D^⊥ along D: ``Q = G⁻¹ muᵀ C⁻¹ mu`` (paper (31), (44)).

    Returns ``(..., n, n)``; ``Q @ Q = Q`` and ``G @ Q`` is symmetric. Apply
    ``np.swapaxes(Q, -1, -2)`` (``Qᵀ``) to covectors.
    """
    Ginv_muT = np.linalg.solve(G, np.swapaxes(mu, -1, -2))
    C = mu @ Ginv_muT
    return Ginv_muT @ np.linalg.solve(C, mu)


def projector_P(G: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Vector projector onto D along D^⊥: ``P = I − Q`` (paper (45))."""
    Q = projector_Q(G, mu)
    return np.eye(Q.shape[-1]) - Q


def reflect(p_plus: np.ndarray, G: np.ndarray, mu: np.ndarray, a: np.ndarray | None = None):
    """The whole GNI at one node: ``p⁻ = p⁺ − 2 Qᵀ(p⁺ − Π)``.

    Equivalent to (8) (linear constraints, ``a = None``) and to (26) (affine constraints
    ``mu v + a = 0``, i.e. ``Π = G Y`` with ``a = −mu Y``), paper Def. 4.1; Def. 6.1 "Reflection
    form". Written without ``Q``: ``Qᵀ(p⁺ − Π) = muᵀ C⁻¹ (mu G⁻¹ p⁺ + a)``.

    The map is an involution and an isometry of ``|p − Π|_{G⁻¹}``.
    """
    w = _mv(mu, np.linalg.solve(G, p_plus[..., None])[..., 0])
    if a is not None:
        w = w + a
    C = constraint_gram(G, mu)
    return p_plus - 2.0 * _mtv(mu, np.linalg.solve(C, w[..., None])[..., 0])


def multiplier_from_post_momentum(p_plus, G, mu, h, a=None):
    """λ_k from the post-momentum at node k: ``h λ = −2 C⁻¹ (mu G⁻¹ p⁺ + a)``.

    This is the multiplier of the local form (9a)/(27a) in chetaev's sign convention
    (``p⁻ − p⁺ = h muᵀ λ``).
    """
    w = _mv(mu, np.linalg.solve(G, p_plus[..., None])[..., 0])
    if a is not None:
        w = w + a
    C = constraint_gram(G, mu)
    return (-2.0 / h) * np.linalg.solve(C, w[..., None])[..., 0]


def node_from_post_momentum(p_plus, G, mu, h, a=None):
    """Node data ``(v_k, λ_k, p̄_k)`` from the post-momentum ``p⁺_k``.

    ``p̄ = (p⁺ + p⁻)/2 = p⁺ + (h/2) muᵀ λ`` is the averaged momentum and ``v = G⁻¹ p̄`` the node
    velocity; it satisfies ``mu v + a = 0`` exactly (paper (9b), (27b), (32)).
    """
    lam = multiplier_from_post_momentum(p_plus, G, mu, h, a)
    p_bar = p_plus + 0.5 * h * _mtv(mu, lam)
    v = np.linalg.solve(G, p_bar[..., None])[..., 0]
    return v, lam, p_bar


def pre_post_from_node(v, lam, G, mu, h):
    """Inverse of :func:`node_from_post_momentum`: ``p∓ = G v ± (h/2) muᵀ λ``."""
    p_bar = _mv(G, v)
    imp = 0.5 * h * _mtv(mu, lam)
    return p_bar + imp, p_bar - imp


def average_momentum_residual(p_minus, p_plus, G, mu, a=None):
    """``mu G⁻¹ (p⁻ + p⁺)/2 + a``: the discrete constraint (9b)/(27b); zero for every GNI."""
    w = _mv(mu, np.linalg.solve(G, (0.5 * (p_minus + p_plus))[..., None])[..., 0])
    return w if a is None else w + a


def reflection_isometry_residual(p_minus, p_plus, G, mu, a=None):
    """``|p⁻ − Π|²_{G⁻¹} − |p⁺ − Π|²_{G⁻¹}`` (the docs' theory page row 3.9), with ``Π`` any
    covector
    satisfying ``mu G⁻¹ Π = −a``."""
    if a is None:
        shift = 0.0
    else:
        C = constraint_gram(G, mu)
        shift = -_mtv(mu, np.linalg.solve(C, a[..., None])[..., 0])
    dm = p_minus - shift
    dp = p_plus - shift
    nm = np.einsum("...i,...i->...", dm, np.linalg.solve(G, dm[..., None])[..., 0])
    npl = np.einsum("...i,...i->...", dp, np.linalg.solve(G, dp[..., None])[..., 0])
    return nm - npl
