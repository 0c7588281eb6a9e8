"""The per-step residuals of eq. (14)/(15) and their analytic Jacobians (paper eq. (14), App. D;
eq. (15), App. E)."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.nh_integrators import _equations as eq
from chetaev.nh_integrators import testing
from chetaev.nh_integrators._adapter import stage_model
from chetaev.rktableaux import lobatto_iiia_iiib


def _fd(fun, x, eps=1e-6):
    cols = []
    for k in range(x.shape[-1]):
        d = np.zeros(x.shape[-1])
        d[k] = eps
        cols.append((fun(x + d) - fun(x - d)) / (2 * eps))
    return np.stack(cols, axis=-1)


MODELS = [
    "particle_system",
    "affine_particle_system",
    "cvt_system",
    "chaotic_system",
    "sleigh_system",
    "general_particle_system",
]
# models whose Legendre map has an explicit inverse (mechanical systems): only these have
# the explicit path (v from p in closed form) and the engine's per-step form (PRKStep)
EXPLICIT = [m for m in MODELS if stage_model(getattr(testing, m)()).legendre_inv is not None]
assert "general_particle_system" not in EXPLICIT and len(EXPLICIT) == len(MODELS) - 1
LAGRANGIAN_CASES = [(m, True) for m in MODELS] + [(m, False) for m in EXPLICIT]


@pytest.mark.parametrize(("model_name", "implicit"), LAGRANGIAN_CASES)
@pytest.mark.parametrize("s", [2, 3, 4])
@pytest.mark.parametrize("variant", ["iiia", "iiib"])
def test_lagrangian_jacobian_matches_finite_differences(nh, model_name, s, implicit, variant):
    system = getattr(nh, model_name)()
    model = stage_model(system)
    pair = lobatto_iiia_iiib(s)
    a, ahat = pair.first.a, pair.second.a
    n, m = model.n, model.m
    rng = np.random.default_rng(s + 10 * implicit)
    N = sum(eq.lagrangian_sizes(s, n, m, implicit))
    x = 0.3 * rng.normal(size=(2, N))
    q, p, lam = (
        0.5 * rng.normal(size=(2, n)),
        0.5 * rng.normal(size=(2, n)),
        rng.normal(size=(2, m)),
    )
    args = (q, p, lam, 0.2, a, ahat, model, implicit, variant)
    J = eq.lagrangian_jacobian(x, *args)
    Jfd = _fd(lambda xx: eq.lagrangian_residual(xx, *args), x)
    assert J.shape == (2, N, N)
    # central FD, step 1e-6: truncation ~1e-12·|R'''| plus cancellation eps·|R|/1e-6 ~ 2e-10
    # (|R| = O(1)), i.e. ~2e-10·max(1, |J|); bound 2e-8·max(1, |J|) (100x). Measured worst
    # 1.7e-10 (66 cases, OPENBLAS_NUM_THREADS=1 and unset): margin 118
    np.testing.assert_allclose(J, Jfd, atol=2e-8 * max(1.0, np.abs(J).max()), rtol=0)


@pytest.mark.parametrize("model_name", EXPLICIT)
@pytest.mark.parametrize("s", [2, 3, 4])
def test_fast_path_equals_generic_code(nh, model_name, s):
    """The engine's per-step form (PRKStep with the fast hooks; the step's default path) and
    its generic form (prk_residual with the same hooks) agree to round-off (the FD test
    above checks the Jacobian against the residual)."""
    system = getattr(nh, model_name)()
    model = stage_model(system)
    pair = lobatto_iiia_iiib(s)
    a, ahat = pair.first.a, pair.second.a
    n, m = model.n, model.m
    rng = np.random.default_rng(7 * s)
    N = sum(eq.lagrangian_sizes(s, n, m, False))
    x = 0.3 * rng.normal(size=(3, N))
    q, p = 0.5 * rng.normal(size=(3, n)), 0.5 * rng.normal(size=(3, n))
    lam = rng.normal(size=(3, m))
    args = (q, p, lam, 0.2, a, ahat, model)
    step = eq.lagrangian_step(*args)
    R, J = step.residual(x), step.jacobian(x)
    Rg = eq.lagrangian_residual(x, *args, generic=True)
    Jg = eq.lagrangian_jacobian(x, *args, generic=True)
    # round-off: each entry sums s stages of n-term products (n_terms = s·n) in a different
    # order; the terms are O(1) (scale max(1, |·|))
    nt = s * n
    assert_rounding_close(R, Rg, n_terms=nt, scale=max(1.0, np.abs(Rg).max()), what="R")
    assert_rounding_close(J, Jg, n_terms=nt, scale=max(1.0, np.abs(Jg).max()), what="J")
    J1 = eq.lagrangian_step(q[1], p[1], lam[1], *args[3:]).jacobian(x[1])  # unbatched
    assert_rounding_close(J1, Jg[1], n_terms=nt, scale=max(1.0, np.abs(Jg).max()), what="J1")


@pytest.mark.parametrize("model_name", [*EXPLICIT, "particle_cvt_system"])
@pytest.mark.parametrize("s", [2, 3, 4])
def test_staged_layout_equals_batch_first(nh, model_name, s):
    """The stage-major layout of the per-step form (``staged=True``, used with the structured
    Newton matrix for one batch axis) gives the batch-first residual, Jacobian, structured
    solve and node values to round-off (m = 1 and m = 2, affine, non-identity mass)."""
    system = getattr(nh, model_name)()
    model = stage_model(system)
    assert model.mass is not None
    pair = lobatto_iiia_iiib(s)
    a, ahat = pair.first.a, pair.second.a
    n, m = model.n, model.m
    rng = np.random.default_rng(11 * s)
    N = sum(eq.lagrangian_sizes(s, n, m, False))
    x = 0.3 * rng.normal(size=(5, N))
    F = rng.normal(size=(5, N))
    q, p = 0.5 * rng.normal(size=(5, n)), 0.5 * rng.normal(size=(5, n))
    lam = rng.normal(size=(5, m))
    args = (q, p, lam, 0.2, a, ahat, model)
    ref, staged = eq.lagrangian_step(*args), eq.lagrangian_step(*args, staged=True)
    R = ref.residual(x)
    # round-off: the stage mixes are summed in another order (n_terms = s·n, O(1) terms)
    nt = s * n
    assert_rounding_close(staged.residual(x), R, n_terms=nt, scale=max(1.0, np.abs(R).max()),
                          what="staged residual")
    for got, want in zip(staged.node_values(), ref.node_values()):
        assert_rounding_close(got, want, n_terms=nt, scale=max(1.0, np.abs(want).max()),
                              what="staged node values")
    # bitwise by design: the same entries of x, copied into another layout
    np.testing.assert_array_equal(staged.stage_multipliers(), ref.stage_multipliers())
    J = ref.jacobian(x)
    # bitwise by design: the stage-major step's jacobian builds the batch-first step from the
    # same inputs and calls its jacobian (one code path)
    np.testing.assert_array_equal(staged.jacobian(x), J)
    dx = ref.structured_solver(x)(F)
    # the same block solve in another layout: round-off amplified by the conditioning of the
    # stage blocks; measured: bitwise equal over the 18 cases, bound 1e-12·max(1, |dx|)
    np.testing.assert_allclose(
        staged.structured_solver(x)(F), dx, rtol=0, atol=1e-12 * max(1.0, np.abs(dx).max())
    )
    with pytest.raises(ValueError, match="B, n"):
        eq.lagrangian_step(q[0], p[0], lam[0], *args[3:], staged=True)


@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("s", [2, 3])
def test_hamiltonian_jacobian_matches_finite_differences(nh, model_name, s):
    system = getattr(nh, model_name)()
    model = stage_model(system)
    if model.legendre_inv is None:
        from dataclasses import replace

        model = replace(model, legendre_inv=system.system.legendre_inv)
    pair = lobatto_iiia_iiib(s)
    a, ahat = pair.first.a, pair.second.a
    n, m = model.n, model.m
    rng = np.random.default_rng(s)
    N = 2 * s * n + (s - 1) * m
    x = 0.3 * rng.normal(size=(N,))
    q, p, lam = 0.5 * rng.normal(size=n), 0.5 * rng.normal(size=n), rng.normal(size=m)
    args = (q, p, lam, 0.2, a, ahat, model)
    J = eq.hamiltonian_jacobian(x, *args)
    Jfd = _fd(lambda xx: eq.hamiltonian_residual(xx, *args), x)
    # central FD as above (~2e-10·max(1, |J|) plus the truncation of the Legendre inverse's
    # third derivatives); bound 2e-7·max(1, |J|). Measured worst 1.4e-10 (12 cases): margin 1.4e3
    np.testing.assert_allclose(J, Jfd, atol=2e-7 * max(1.0, np.abs(J).max()), rtol=0)


def test_residual_is_batched_over_two_leading_axes(nh):
    """Residual and Jacobian of a (2, 3) batch equal the per-entry values."""
    model = stage_model(nh.chaotic_system())
    pair = lobatto_iiia_iiib(3)
    a, ahat = pair.first.a, pair.second.a
    n, m, s = 7, 1, 3
    rng = np.random.default_rng(1)
    N = sum(eq.lagrangian_sizes(s, n, m, False))
    x = 0.3 * rng.normal(size=(2, 3, N))
    q, p, lam = rng.normal(size=(2, 3, n)), rng.normal(size=(2, 3, n)), rng.normal(size=(2, 3, m))
    R = eq.lagrangian_residual(x, q, p, lam, 0.1, a, ahat, model)
    J = eq.lagrangian_jacobian(x, q, p, lam, 0.1, a, ahat, model)
    for i in range(2):
        for j in range(3):
            r1 = eq.lagrangian_residual(x[i, j], q[i, j], p[i, j], lam[i, j], 0.1, a, ahat, model)
            J1 = eq.lagrangian_jacobian(x[i, j], q[i, j], p[i, j], lam[i, j], 0.1, a, ahat, model)
            # batched vs single: sums of s·n terms in a possibly different order (round-off)
            assert_rounding_close(R[i, j], r1, n_terms=s * n, what="batched residual")
            assert_rounding_close(J[i, j], J1, n_terms=s * n, what="batched Jacobian")


def test_stage_one_constraint_is_automatic_and_endpoint_is_the_node(nh):
    """By H1, Q^1 = q_k and p_k^1 = p_k; by H3, Q^s = q_{k+1} and p_k^s = p_{k+1} (paper eq. (14),
    App. D)."""
    system = nh.particle_system()
    model = stage_model(system)
    pair = lobatto_iiia_iiib(4)
    a, b, ahat = pair.first.a, pair.first.b, pair.second.a
    rng = np.random.default_rng(2)
    x = rng.normal(size=sum(eq.lagrangian_sizes(4, 3, 1, False)))
    q, p, lam = rng.normal(size=3), rng.normal(size=3), rng.normal(size=1)
    _R, _J, ev = eq.lagrangian_evaluation(x, q, p, lam, 0.1, a, ahat, model)
    Lam, Q, pk = ev.Lam, ev.Q, ev.extra["pk"]
    q1, p1, lam1, _ = eq.lagrangian_output(x, q, p, lam, 0.1, a, b, ahat, model)
    # Q^1 = q + h Σ 0·V^j and Q^s = q + h Σ a_sj V^j vs q + h Σ b_j V^j with a_sj = b_j:
    # round-off of s-term sums (np.allclose's default rtol 1e-5 made the old bounds loose)
    assert_rounding_close(Q[0], q, n_terms=4, what="Q^1")
    assert_rounding_close(pk[0], p, n_terms=4, what="p^1")
    assert_rounding_close(Q[-1], q1, n_terms=4, what="Q^s")
    assert_rounding_close(pk[-1], p1, n_terms=4, what="p^s")
    assert np.array_equal(lam1, Lam[-1])  # bitwise by design: lambda_{k+1} is Lam[..., -1, :]
