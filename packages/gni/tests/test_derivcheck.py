"""ReducedSystem verifies its derivative arguments before the first step (issue 14 item 4).

Each derivative argument of ``ReducedSystem`` (``potential_grad``, ``constraint_matrix_grad``,
``constraint_affine_grad``) wrong by a sign or by a factor 2 raises ``DerivativeError`` from
``ReducedGNI.initial_state`` / ``state_from_points``; ``derivative_check=False`` opts out; the
correct derivatives pass. The tolerance is the derived one of
``chetaev.discrete_lagrangian.compare_derivative`` (no tolerance is set here).
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import DerivativeError
from chetaev.gni import ReducedGNI, ReducedSystem, rolling_ball
from chetaev.liegroups import SO3

X0 = np.array([0.3, -0.2])


def _model() -> ReducedSystem:
    """A ball-like system with q-dependent K, an affine term and a potential (all smooth)."""

    def K(x):
        x = np.asarray(x, float)
        z, o = np.zeros(x.shape[:-1]), np.ones(x.shape[:-1])
        r0 = np.stack([o, z, z, -np.cos(x[..., 0]), 0.1 * x[..., 1] ** 2], -1)
        r1 = np.stack([z, o, np.cos(x[..., 1]), z, 0.2 * x[..., 0]], -1)
        return np.stack([r0, r1], -2)

    def dK(x):
        x = np.asarray(x, float)
        out = np.zeros((*x.shape[:-1], 2, 5, 2))
        out[..., 0, 3, 0] = np.sin(x[..., 0])
        out[..., 0, 4, 1] = 0.2 * x[..., 1]
        out[..., 1, 2, 1] = -np.sin(x[..., 1])
        out[..., 1, 4, 0] = 0.2
        return out

    def a(x):
        x = np.asarray(x, float)
        return np.stack([0.3 * x[..., 1] ** 2, -0.3 * np.sin(x[..., 0])], -1)

    def da(x):
        x = np.asarray(x, float)
        z = np.zeros(x.shape[:-1])
        return np.stack([np.stack([z, 0.6 * x[..., 1]], -1),
                         np.stack([-0.3 * np.cos(x[..., 0]), z], -1)], -2)

    def V(x):
        x = np.asarray(x, float)
        return 0.5 * x[..., 0] ** 2 + np.cos(x[..., 1]) + x[..., 0] * x[..., 1]

    def gV(x):
        x = np.asarray(x, float)
        return np.stack([x[..., 0] + x[..., 1], -np.sin(x[..., 1]) + x[..., 0]], -1)

    return ReducedSystem(SO3, 2, np.diag([2.0, 2.0, 0.5, 0.6, 0.7]), K, constraint_affine=a,
                         potential=V, potential_grad=gV, constraint_matrix_grad=dK,
                         constraint_affine_grad=da)


def _consistent_v0(system, x0):
    """A v0 with K(x0) v0 + a(x0) = 0 (least-norm solution plus a null-space part)."""
    K = system.K(x0)
    a = system.a(x0)
    v = -np.linalg.pinv(K) @ a
    null = np.linalg.svd(K)[2][2:]
    return v + null.T @ np.array([0.3, -0.2, 0.1])


ARGS = ("potential_grad", "constraint_matrix_grad", "constraint_affine_grad")


def _wrong(system, arg, factor):
    f = getattr(system, arg)
    return attrs.evolve(system, **{arg: lambda x: factor * np.asarray(f(x))})


def test_correct_derivatives_pass():
    s = _model()
    s.check_derivatives(X0)
    st = ReducedGNI().initial_state(s, X0, _consistent_v0(s, X0))
    assert st.q.shape == (2,)


@pytest.mark.parametrize("factor", [-1.0, 2.0], ids=["sign", "factor2"])
@pytest.mark.parametrize("arg", ARGS)
def test_a_wrong_derivative_is_caught_before_the_first_step(arg, factor):
    bad = _wrong(_model(), arg, factor)
    v0 = _consistent_v0(bad, X0)
    with pytest.raises(DerivativeError, match=f"`{arg}`.*derivative_check=False"):
        ReducedGNI().initial_state(bad, X0, v0)
    with pytest.raises(DerivativeError, match=f"`{arg}`"):
        bad.check_derivatives(X0)
    with pytest.raises(DerivativeError, match=f"`{arg}`"):  # the discrete start too
        ReducedGNI().state_from_points(bad, X0, X0 + 0.01, v0[2:], 0.01)


@pytest.mark.parametrize("arg", ARGS)
def test_derivative_check_false_opts_out(arg):
    bad = attrs.evolve(_wrong(_model(), arg, -1.0), derivative_check=False)
    ReducedGNI().initial_state(bad, X0, _consistent_v0(bad, X0))
    with pytest.raises(DerivativeError):  # the explicit call still checks
        bad.check_derivatives(X0)


def test_the_check_runs_once_per_system():
    calls = []
    s = _model()
    gV = s.potential_grad
    s = attrs.evolve(s, potential_grad=lambda x: calls.append(1) or gV(x))
    v0 = _consistent_v0(s, X0)
    ReducedGNI().initial_state(s, X0, v0)
    first = len(calls)
    ReducedGNI().initial_state(s, X0, v0)
    assert first > 0 and len(calls) - first == 1  # the second run: λ0's force only


@pytest.mark.parametrize("rate", [0.0, 0.2])
def test_the_paper_ball_passes(rate):
    s = rolling_ball((1.0, 1.1, 1.2), 3.0, 1.0, rate)
    s.check_derivatives(np.array([1.0, 0.0]))


def test_derivative_check_is_keyword_only_with_default_true():
    s = rolling_ball()
    assert s.derivative_check is True
    with pytest.raises(TypeError):
        ReducedSystem(SO3, 2, np.eye(5), np.ones((2, 5)), None, None, None, None, None, False)


def test_fallback_differences_are_the_one_fd_jacobian():
    """Without derivative arguments, ReducedSystem differentiates by central differences
    (dl's ``fd_jacobian``): they match the analytic derivatives to the central-difference
    error (O(ε^{2/3}) ≈ 4e-11 relative for these O(1) smooth functions; bound 1e-8 leaves the
    truncation term's constant ≲ 100 room), and a batch gives each member's single value
    bit for bit (per-entry steps, no batch-wide max)."""
    full = _model()
    bare = attrs.evolve(full, potential_hessian=None, constraint_matrix_grad=None,
                        constraint_affine_grad=None)
    rng = np.random.default_rng(20261127)
    xs = rng.uniform(-2.0, 2.0, size=(7, 2))
    hess = np.zeros((len(xs), 2, 2))
    hess[:, 0, 0] = 1.0
    hess[:, 1, 1] = -np.cos(xs[:, 1])
    hess[:, 0, 1] = hess[:, 1, 0] = 1.0
    for name, exact in (("dK", full.dK(xs)), ("da", full.da(xs)), ("hess_V", hess)):
        got = getattr(bare, name)(xs)
        np.testing.assert_allclose(got, exact, rtol=0, atol=1e-8, err_msg=name)
        single = np.stack([getattr(bare, name)(x) for x in xs])
        np.testing.assert_array_equal(got, single, err_msg=name)
