"""The constant-mass path of the continuous multiplier (``ConstrainedSystem.multiplier``).

With a constant mass matrix (``MechanicalSystem`` with an array ``mass``, or any
``TrivializedMechanicalSystem``) the KKT solve multiplies by ``M⁻¹`` formed once with the
system instead of factorising ``D22L`` at every batch entry, and a single constraint's
``1 x 1`` matrix ``C`` is divided by directly. Checked here against two references that share
nothing with that path but the system's derivative blocks:

* the general path: the same system with its mass given as a callable ``q -> M`` (then
  ``D22L`` is solved with LAPACK per entry and ``cond(C)`` is an SVD);
* the full ``(n + m)`` KKT system ``[[G, -Bᵀ], [B, 0]] [a; λ] = [f; -c]`` solved by
  ``np.linalg.solve`` (paper §3, eq. (3.2); on a group the Euler–Poincaré right-hand side
  of §6, ``f = D1L − D21L η + ad*_η D2L``).

Both differ from the constant-mass path only by rounding: a few chained ``n``-term
products of O(1)-conditioned matrices (the masses below have condition numbers below 3), so
the bound is ``rounding_bound(scale, n_terms=n, n_ops=4)`` with the largest entry as scale.
"""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
    SingularMatrixError,
)
from chetaev.discrete_lagrangian.systems._systems import _constant_mass_inverse, coadjoint
from chetaev.discrete_lagrangian.testing import assert_rounding_close, heavy_top
from chetaev.liegroups import SO3

N = 4


def _mass(rng) -> np.ndarray:
    """A symmetric positive definite 4 x 4 mass with eigenvalues in [1, 2.5] (seeded)."""
    Q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    return (Q * np.array([1.0, 1.4, 1.9, 2.5])) @ Q.T


def _potential():
    k = np.array([1.0, 0.5, 2.0, 0.7])

    def V(q):
        return 0.5 * np.sum(k * q**2, axis=-1) + 0.25 * q[..., 0] ** 4

    def gV(q):
        g = k * q
        g[..., 0] += q[..., 0] ** 3
        return g

    return V, gV


def _constraint(m: int) -> LinearVelocityConstraint:
    """m = 1: a sleigh-like row A(q) = (1, q_2, sin q_3, 0); m = 2 adds (0, 1, 0, q_0)."""

    def A(q):
        rows = [
            np.stack(
                [np.ones_like(q[..., 0]), q[..., 2], np.sin(q[..., 3]), np.zeros_like(q[..., 0])],
                -1,
            )
        ]
        if m == 2:
            rows.append(
                np.stack(
                    [
                        np.zeros_like(q[..., 0]),
                        np.ones_like(q[..., 0]),
                        np.zeros_like(q[..., 0]),
                        q[..., 0],
                    ],
                    -1,
                )
            )
        return np.stack(rows, -2)

    def dA(q):
        D = np.zeros((*q.shape[:-1], m, N, N))
        D[..., 0, 1, 2] = 1.0
        D[..., 0, 2, 3] = np.cos(q[..., 3])
        if m == 2:
            D[..., 1, 3, 0] = 1.0
        return D

    return LinearVelocityConstraint(A, dA=dA)


def _pair(m: int, seed: int):
    """The same system with a constant mass (fast path) and with the mass as a callable."""
    rng = np.random.default_rng(seed)
    M = _mass(rng)
    V, gV = _potential()
    const = MechanicalSystem(M, V, gV)
    general = MechanicalSystem(lambda q: np.broadcast_to(M, (*q.shape[:-1], N, N)), V, gV, n=N)
    con = _constraint(m)
    return ConstrainedSystem(const, con), ConstrainedSystem(general, con), rng


def _kkt_reference(system, q, v):
    """(λ, a) of the full KKT system, one np.linalg.solve per entry."""
    sysm, con = system.system, system.constraint
    G = np.asarray(sysm.D22L(q, v), dtype=float)
    f = sysm.D1L(q, v) - np.einsum("...ij,...j->...i", sysm.D21L(q, v), v)
    if sysm.group is not None:
        f = f + coadjoint(sysm.group, v, sysm.D2L(q, v))
    B = np.asarray(con.dphi_dv(q, v), dtype=float)
    c = np.einsum("...aj,...j->...a", con.dphi_dq(q, v), v)
    n, m = G.shape[-1], B.shape[-2]
    batch = np.broadcast_shapes(G.shape[:-2], B.shape[:-2], f.shape[:-1])
    K = np.zeros((*batch, n + m, n + m))
    K[..., :n, :n] = G
    K[..., :n, n:] = -np.swapaxes(B, -1, -2)
    K[..., n:, :n] = B
    rhs = np.concatenate(
        [np.broadcast_to(f, (*batch, n)), -np.broadcast_to(c, (*batch, m))], axis=-1
    )
    sol = np.linalg.solve(K, rhs[..., None])[..., 0]
    return sol[..., n:], sol[..., :n]


def _close(actual, desired, what):
    assert_rounding_close(actual, desired, n_terms=N, n_ops=4, what=what)


@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("batch", [(), (40,), (3, 5)])
def test_constant_mass_multiplier_equals_the_general_path(m, batch):
    """λ(q, v) and the constrained acceleration of the constant-mass path equal the general
    path's and the full KKT solve's to rounding, on a seeded sample (single, one and two
    batch axes); the two systems really take different paths."""
    fast, general, rng = _pair(m, 100 + 10 * m + len(batch))
    assert _constant_mass_inverse(fast.system) is not None
    assert _constant_mass_inverse(general.system) is None
    q = rng.uniform(-1.0, 1.0, (*batch, N))
    v = rng.uniform(-1.0, 1.0, (*batch, N))
    lam, acc = fast.multiplier(q, v), fast.acceleration(q, v)
    assert lam.shape == (*batch, m) and acc.shape == (*batch, N)
    _close(lam, general.multiplier(q, v), "λ: constant mass vs general path")
    _close(acc, general.acceleration(q, v), "a: constant mass vs general path")
    lam_ref, acc_ref = _kkt_reference(general, q, v)
    _close(lam, lam_ref, "λ: constant mass vs full KKT")
    _close(acc, acc_ref, "a: constant mass vs full KKT")


def test_constant_mass_batch_entries_equal_single_solves():
    """Every batch entry of the constant-mass multiplier is bitwise the unbatched one (its
    products are summed in a fixed order, whatever the batch size)."""
    fast, _general, rng = _pair(2, 7)
    q = rng.uniform(-1.0, 1.0, (33, N))
    v = rng.uniform(-1.0, 1.0, (33, N))
    lam = fast.multiplier(q, v)
    single = np.stack([fast.multiplier(q[i], v[i]) for i in range(33)])
    assert np.array_equal(lam, single)
    assert np.array_equal(lam[:7], fast.multiplier(q[:7], v[:7]))


@pytest.mark.parametrize("batch", [(), (25,)])
def test_trivialized_constant_inertia_multiplier_equals_the_full_kkt(batch):
    """The heavy top on SO(3) (constant inertia 𝕀: 𝕀⁻¹ formed once) with one constant and
    one configuration-dependent linear constraint on η: λ and η̇ equal the full KKT solve
    with the Euler–Poincaré right-hand side (§6) to rounding."""
    top = heavy_top()
    assert _constant_mass_inverse(top) is not None

    def A(g):
        row0 = np.broadcast_to(np.array([0.3, -0.5, 1.0]), (*g.shape[:-2], 3))
        return np.stack([row0, g[..., 2, :]], -2)

    system = ConstrainedSystem(top, LinearVelocityConstraint(A, group=SO3))
    rng = np.random.default_rng(31 + len(batch))
    g = SO3.random(rng, batch)
    eta = rng.standard_normal((*batch, 3))
    lam_ref, acc_ref = _kkt_reference(system, g, eta)
    _close(system.multiplier(g, eta), lam_ref, "λ: heavy top vs full KKT")
    _close(system.acceleration(g, eta), acc_ref, "η̇: heavy top vs full KKT")


@pytest.mark.parametrize("general", [False, True])
def test_one_dependent_constraint_is_singular_on_both_paths(general):
    """A single constraint with a zero row at some entry (C = 0 there) raises
    SingularMatrixError on both paths (the 1 x 1 shortcut keeps cond(C)'s verdict)."""
    fast, gen, _rng = _pair(1, 3)
    system = gen if general else fast
    zero_row = ConstrainedSystem(
        system.system,
        LinearVelocityConstraint(
            lambda q: np.where(q[..., :1, None] > 0, 0.0, 1.0) * np.ones((*q.shape[:-1], 1, N)),
            dA=lambda q: np.zeros((*q.shape[:-1], 1, N, N)),
        ),
    )
    q = np.array([[-0.5, 0.1, 0.2, 0.3], [0.5, 0.1, 0.2, 0.3]])
    v = np.zeros((2, N))
    assert np.all(np.isfinite(zero_row.multiplier(q[:1], v[:1])))
    with pytest.raises(SingularMatrixError, match="singular"):
        zero_row.multiplier(q, v)


def test_two_by_two_condition_number_matches_numpy():
    """The closed-form condition number of a 2 x 2 C (``σ₁/σ₂`` from ``|C|_F`` and
    ``det C``) equals ``np.linalg.cond`` to ``eps·cond`` relative (the rounding of the
    smaller singular value), and both exceed the singularity threshold 1e13 on nearly
    dependent rows; singular and non-finite matrices give a non-finite value."""
    from chetaev.discrete_lagrangian.systems._constraints import _condition_number

    rng = np.random.default_rng(23)
    C = rng.standard_normal((400, 2, 2)) * np.exp(rng.uniform(-20.0, 20.0, (400, 1, 1)))
    ref = np.linalg.cond(C)
    got = _condition_number(C)
    assert np.all(np.abs(got - ref) <= 64 * np.finfo(float).eps * ref * ref)
    near = (
        np.array([[1.0, 2.0], [0.5, 1.0 + 1e-15]])[None]
        * np.array([1e-30, 1.0, 1e30])[:, None, None]
    )
    assert np.all(np.linalg.cond(near) > 1e13) and np.all(_condition_number(near) > 1e13)
    bad = np.array(
        [
            [[0.0, 0.0], [0.0, 0.0]],
            [[1.0, 2.0], [2.0, 4.0]],
            [[np.nan, 1.0], [0.0, 1.0]],
            [[np.inf, 0.0], [0.0, 1.0]],
        ]
    )
    assert not np.any(np.isfinite(_condition_number(bad)) & (_condition_number(bad) <= 1e13))
