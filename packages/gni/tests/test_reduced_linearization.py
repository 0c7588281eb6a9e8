"""ReducedGNI's step linearization in the complete state (q, g, v, λ) (issue 20).

The state ``(x_k, W_k, v_k, λ_k)`` is perturbed as ``(x_k + δx, W_k τ(ε), v_k + δv,
λ_k + δλ)`` (the step reads the carried multiplier λ_k) with the
method's retraction τ and the next group element read in the same chart,
``ε_{k+1} = τ⁻¹(W_{k+1}⁻¹ W'_{k+1})`` (``ReducedGNI._step_linearization_impl``):
``∂ε_{k+1}/∂ε = Ad_{τ(−σ_k)}`` and ``∂ε_{k+1}/∂(x, v, u) = h dLτ_{σ_k} ∂ξ_k/∂(x, v, u)``
from the step's implicit-function-theorem solve.

Model: the paper's ball on a rotating table (§7.4, Exp. 2: I = (1, 1.1, 1.2), m = 3, r = 1,
Ω = 0.2, affine constraints; ``rolling_ball``), unforced and steered by a body-frame torque
with dissipation, F = (0, 0, −c ω + b u) with u ∈ R² (the user steering the ball to a target
orientation needs the rows of ε); both retractions (Cayley, exp); single and batched (two
members at different nodes, W_k ≠ e). Also a reduced system on SE(2) and on SE(3), where Ad
is not orthogonal (``test_other_groups``).

Reference: central differences of ``step`` in the same coordinates
(``chetaev.discrete_lagrangian.testing.step_finite_differences`` with
``coordinates="(q, g, v, lam)"``, through ``step_linearization_error``), bound ``step_fd_rtol(h)``
derived in ``packages/discrete-lagrangian/tests/test_linearization.py``
((64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|[A B]|, 2.9e-8 at h = 0.1). The group rows are
also compared on their own, relative to their own size (the same derivation with max|rows|
in place of max|[A B]|: the rounding of τ⁻¹(W⁻¹W') is ~eps, of the same order as the other
rows'). Measured (OPENBLAS_NUM_THREADS=1 and unset, identical): see the tests' docstrings.
Mutations checked to fail: dRτ in place of dLτ in the ε rows, Ad_{τ(σ)} in place of
Ad_{τ(−σ)}.
"""

import functools

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian.testing import (
    multistep_linearization_error,
    rounding_bound,
    step_fd_rtol,
    step_finite_differences,
    step_linearization_error,
)
from chetaev.gni import BALL_EXPERIMENT_2, ReducedGNI, ReducedSystem, rolling_ball
from chetaev.liegroups import SE2, SE3, retraction

H = 0.1
N_SHAPE, D, M = 2, 3, 2  # shape, group and constraint dimensions of the ball
C_DAMP = 0.2
B_TORQUE = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, -0.2]])  # body-frame torque per control


def _ball(forced):
    e = BALL_EXPERIMENT_2
    ball = rolling_ball(e["inertia"], e["mass"], e["radius"], e["table_rate"])
    if not forced:
        return ball

    def force(x, v, u):
        v, u = np.asarray(v, dtype=float), np.asarray(u, dtype=float)
        batch = np.broadcast_shapes(v.shape[:-1], u.shape[:-1])
        out = np.zeros((*batch, 5))
        out[..., 2:] = -C_DAMP * v[..., 2:] + np.einsum("ij,...j->...i", B_TORQUE, u)
        return out

    return attrs.evolve(ball, force=force, n_controls=2)


def _node(method, system, batched, u):
    """A node after a few steps (W_k ≠ e, λ_k from a step); batched: two members at steps 3
    and 5 of the same run (their shapes, velocities, multipliers and group elements differ)."""
    e = BALL_EXPERIMENT_2
    kw = {} if u is None else {"u": u[0] if batched else u}
    st = method.initial_state(system, np.array(e["x0"]), np.array(e["v0"]), **kw)
    states = [st]
    for _ in range(5):
        st = method.step(system, st, H, **kw)
        states.append(st)
    if not batched:
        return states[3]
    a, b = states[3], states[5]
    return attrs.evolve(
        a, q=np.stack([a.q, b.q]), v=np.stack([a.v, b.v]), p=np.stack([a.p, b.p]),
        lam=np.stack([a.lam, b.lam]),
        carry={"g": np.stack([a.carry["g"], b.carry["g"]]),
               "xi": np.stack([a.carry["xi"], b.carry["xi"]])})


def _control(forced, batched):
    if not forced:
        return None
    return np.array([[0.7, -0.3], [-0.4, 0.5]]) if batched else np.array([0.7, -0.3])


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_group_linearization_matches_finite_differences(kind, forced, batched):
    """[A B] in (q, g, v, λ) against central differences of ``step`` (module docstring; bound
    ``step_fd_rtol(0.1)`` = 2.9e-8), and the group rows ε_{k+1} alone relative to their own
    size (same bound). Measured worst over the 8 cases: 1.13e-11 overall (exp, forced) and
    4.2e-12 for the group rows (exp, forced, batched), 1/2500 of the bound. The group rows'
    (x, v) columns are ~h = 0.1 (measured 0.099), their B ~5e-3 (asserted > 0.05, > 1e-3)."""
    system = _ball(forced)
    method = ReducedGNI(kind)
    u = _control(forced, batched)
    state = _node(method, system, batched, u)
    lin, err = step_linearization_error(method, system, state, H, u)
    lead = (2,) if batched else ()
    k = N_SHAPE + D + N_SHAPE + D + M
    assert lin.coordinates == "(q, g, v, lam)"
    assert lin.A.shape == (*lead, k, k) and lin.B.shape == (*lead, k, 2 if forced else 0)
    assert err <= step_fd_rtol(H), err
    fd = step_finite_differences(method, system, state, H, u, "(q, g, v, lam)")
    AB = np.concatenate([lin.A, lin.B], -1)
    rows = slice(N_SHAPE, N_SHAPE + D)
    scale = np.max(np.abs(AB[..., rows, :]))
    err_g = np.max(np.abs(AB[..., rows, :] - fd[..., rows, :])) / scale
    assert err_g <= step_fd_rtol(H), err_g
    # the group rows depend on (x, v) (and u) through the increment: not only the Ad block
    cols = np.r_[0:N_SHAPE, N_SHAPE + D:k]
    assert np.max(np.abs(lin.A[..., rows, cols])) > 0.05
    if forced:
        assert np.max(np.abs(lin.B[..., rows, :])) > 1e-3


@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_group_blocks_and_the_reduced_sub_block(kind):
    """The structure of A in (q, g, v, λ): (x_{k+1}, v_{k+1}, λ_{k+1}) do not depend on ε
    (exact zeros: the reduced step is G-invariant); ∂ε_{k+1}/∂ε = Ad_{τ(−σ_k)} with
    σ_k = h ξ_k (equal to SO(3)'s Ad = τ(σ_k)ᵀ to rounding, 3-term products); and the rows
    and columns s = (x, v, λ) are, bitwise, the ``"(q, v, lam)"`` linearization of the same
    node without its
    group element (``carry["g"] = None``), with the same ``B`` rows."""
    system = _ball(True)
    method = ReducedGNI(kind)
    u = _control(True, True)
    state = _node(method, system, True, u)
    lin = method.step_linearization(system, state, H, u)
    n, d, N = N_SHAPE, D, N_SHAPE + D
    eps = slice(n, n + d)
    s = np.r_[0:n, n + d:n + d + N + M]
    assert np.all(lin.A[..., s, eps] == 0.0)
    R = retraction(system.group, kind)(H * lin.state.carry["xi"])
    np.testing.assert_allclose(lin.A[..., eps, eps], np.swapaxes(R, -1, -2), rtol=0,
                               atol=rounding_bound(1.0, 3, n_ops=4))
    no_g = attrs.evolve(state, carry={**state.carry, "g": None})  # same warm start
    old = method.step_linearization(system, no_g, H, u)
    assert old.coordinates == "(q, v, lam)" and old.A.shape == (2, 9, 9)
    np.testing.assert_array_equal(lin.A[..., s, :][..., :, s], old.A)
    np.testing.assert_array_equal(lin.B[..., s, :], old.B)


def test_tangent_bases_include_the_group():
    """``basis``/``next_basis`` in (q, g, v, λ): orthonormal (rounding of 12-term products),
    the n + N − m = 5 columns of {K(x)v + a(x) = 0} and the m = 2 multiplier directions with
    zero ε rows, then the d = 3 group directions; A maps the tangent space into the next
    one, |(I − E1E1ᵀ)[A B]| ≤
    1e-10·max(1, |A|) (the Newton error ~1e-12 times an O(1) condition, as in the (q, v)
    test of ``test_reduced_forces``); A_tangent = E1ᵀ A E0."""
    system = _ball(True)
    method = ReducedGNI()
    u = _control(True, True)
    state = _node(method, system, True, u)
    lin = method.step_linearization(system, state, H, u)
    E0, E1 = lin.basis, lin.next_basis
    assert E0.shape == E1.shape == (2, 12, 10) and lin.A_tangent.shape == (2, 10, 10)
    eps = slice(N_SHAPE, N_SHAPE + D)
    for E in (E0, E1):
        assert np.max(np.abs(np.swapaxes(E, -1, -2) @ E - np.eye(10))) <= rounding_bound(1.0, 12)
        assert np.all(E[..., eps, :7] == 0.0)
        np.testing.assert_array_equal(E[..., eps, 7:], np.broadcast_to(np.eye(3), (2, 3, 3)))
        np.testing.assert_array_equal(E[..., 10:, 5:7], np.broadcast_to(np.eye(2), (2, 2, 2)))
    P1 = np.eye(12) - E1 @ np.swapaxes(E1, -1, -2)
    assert np.max(np.abs(P1 @ lin.A)) <= 1e-10 * max(1.0, np.max(np.abs(lin.A)))
    assert np.max(np.abs(P1 @ lin.B)) <= 1e-10 * max(1.0, np.max(np.abs(lin.B)))
    np.testing.assert_allclose(lin.A_tangent, np.swapaxes(E1, -1, -2) @ lin.A @ E0, rtol=0,
                               atol=rounding_bound(np.max(np.abs(lin.A)), 40))


@pytest.mark.parametrize("kind", ["cayley", "exp"])
@pytest.mark.parametrize("group", [SE2, SE3], ids=["SE2", "SE3"])
def test_other_groups(group, kind):
    """On SE(2) and SE(3) (Ad not orthogonal, translations in the algebra): a reduced system
    with one shape coordinate, a random SPD metric coupling x and the algebra (seeded), the
    potential Σ cos x and a linear constraint; [A B] in (q, g, v, λ) against central
    differences of ``step`` after three steps (W_k ≠ e), bound ``step_fd_rtol(0.1)`` =
    2.9e-8. Measured: SE(2) 9.2e-12 / 9.7e-12, SE(3) 1.8e-11 / 2.8e-11 (Cayley / exp)."""
    n, N = 1, 1 + group.dim
    rng = np.random.default_rng(0)
    M = rng.normal(size=(N, N))
    K = np.zeros((1, N))
    K[0, 0], K[0, -1] = 1.0, -0.5
    system = ReducedSystem(group, n, M @ M.T + N * np.eye(N), K,
                           potential=lambda x: np.sum(np.cos(x), -1),
                           potential_grad=lambda x: -np.sin(x))
    v0 = 0.5 * rng.normal(size=N)
    v0[0] = 0.5 * v0[-1]
    method = ReducedGNI(kind)
    state = method.initial_state(system, np.array([0.3]), v0)
    for _ in range(3):
        state = method.step(system, state, H)
    lin, err = step_linearization_error(method, system, state, H)
    assert lin.coordinates == "(q, g, v, lam)"
    assert lin.A.shape == (n + 2 * group.dim + n + 1,) * 2
    assert err <= step_fd_rtol(H), err


STEPS = 5


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_product_of_step_jacobians_is_the_multistep_jacobian(kind, forced, batched):
    """In the complete state (q, g, v, λ) the product A_5 ⋯ A_1 (and Σ_j A_5 ⋯ A_{j+1} B_j,
    u held) is the Jacobian of 5 steps: against central differences of 5 steps
    (``multistep_linearization_error``), bound ``STEPS · step_fd_rtol(H)`` (each step's
    evaluation error propagates through at most 5 steps of O(1) Jacobians). The product of
    the (q, g, v) blocks (the former fixed-λ_k linearization) misses ∂λ_{k+1}/∂(x_k, v_k)
    and exceeds 10 times that bound (so the test fails without the λ rows). Measured over
    the 8 cases: worst 1.5e-11 of max|[A B]| (margin 9000); the fixed-λ product off by
    5.0e-4 to 6.3e-4."""
    system = _ball(forced)
    method = ReducedGNI(kind)
    u = _control(forced, batched)
    state = _node(method, system, batched, u)
    lins, fd, err = multistep_linearization_error(method, system, state, H, u, STEPS)
    assert lins[0].coordinates == "(q, g, v, lam)"
    assert err <= STEPS * step_fd_rtol(H), err
    b = np.s_[..., : -M, : -M]  # (q, g, v) without λ's rows and columns
    Ab = functools.reduce(lambda P, lin: lin.A[b] @ P, lins[1:], lins[0].A[b])
    k = Ab.shape[-1]
    gap = np.max(np.abs(Ab - fd[..., :k, :k])) / np.max(np.abs(fd))
    assert gap > 10 * STEPS * step_fd_rtol(H), gap
