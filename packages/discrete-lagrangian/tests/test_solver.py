"""The Newton solver: batched, analytic / FD Jacobians, simplified Newton, failure modes."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import ConvergenceError, InputError, NewtonOptions, newton_solve


def _cubic(a):
    def fun(x):
        return x**3 + x - a

    def jac(x):
        return (3 * x**2 + 1)[..., None] * np.eye(x.shape[-1])

    return fun, jac


@pytest.mark.parametrize("use_jac", [True, False])
@pytest.mark.parametrize("simplified", [False, True])
def test_batched_cubic(use_jac, simplified):
    a = np.linspace(-5, 5, 12).reshape(4, 3)
    fun, jac = _cubic(a)
    res = newton_solve(fun, np.zeros_like(a), jac if use_jac else None,
                       NewtonOptions(simplified=simplified))
    assert res.all_converged
    assert res.converged.shape == (4,)
    # measured: 2.2e-13 (OPENBLAS_NUM_THREADS=1): margin 45; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(fun(res.x), 0, rtol=0, atol=1e-11)
    assert np.all(res.residual <= res.tol)


def test_batched_equals_single():
    a = np.linspace(-5, 5, 12).reshape(4, 3)
    fun, jac = _cubic(a)
    res = newton_solve(fun, np.zeros_like(a), jac)
    for i in range(4):
        f1, j1 = _cubic(a[i])
        r1 = newton_solve(f1, np.zeros(3), j1)
        np.testing.assert_array_equal(r1.x, res.x[i])


def test_coupled_system_quadratic_convergence():
    # x0² + x1² = 4, x0 x1 = 1
    def fun(x):
        return np.stack([x[..., 0] ** 2 + x[..., 1] ** 2 - 4, x[..., 0] * x[..., 1] - 1], -1)

    def jac(x):
        return np.stack([np.stack([2 * x[..., 0], 2 * x[..., 1]], -1),
                         np.stack([x[..., 1], x[..., 0]], -1)], -2)

    res = newton_solve(fun, np.array([2.0, 0.3]), jac, NewtonOptions(tol=1e-14))
    assert res.all_converged and res.iterations <= 7
    resfd = newton_solve(fun, np.array([2.0, 0.3]), None, NewtonOptions(tol=1e-14))
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1): margin inf; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(resfd.x, res.x, rtol=0, atol=1e-13)


def test_no_real_root_is_reported_not_nan():
    def fun(x):
        return x**2 + 1.0

    res = newton_solve(fun, np.array([0.5]), lambda x: (2 * x)[..., None],
                       NewtonOptions(max_iter=30))
    assert not res.all_converged
    assert np.all(np.isfinite(res.x))
    assert np.isfinite(res.residual).all()


def test_tolerance_kept_above_roundoff_floor():
    fun, jac = _cubic(np.array([1e8]))
    res = newton_solve(fun, np.array([400.0]), jac, NewtonOptions(tol=1e-30), scale=1e8)
    assert res.tol[()] >= 64 * np.finfo(float).eps * 1e8
    assert res.all_converged


def test_singular_jacobian_is_not_converged():
    res = newton_solve(lambda x: x * 0 + 1.0, np.zeros((2, 2)), lambda x: np.zeros((*x.shape, 2)))
    assert not np.any(res.converged)


def test_options_validation():
    with pytest.raises(InputError, match="positive"):
        NewtonOptions(tol=-1)
    with pytest.raises(InputError, match="max_iter"):
        NewtonOptions(max_iter=0)


def test_convergence_error_message():
    err = ConvergenceError(step=412, t=4.12, residual=3.1e-6, tol=1e-12, iterations=20,
                           hint="halve h, or increase NewtonOptions(max_iter=...)")
    assert str(err) == (
        "Newton did not converge at step 412 (t = 4.12): residual 3.1e-06 > 1.0e-12 after "
        "20 iterations. Try: halve h, or increase NewtonOptions(max_iter=...)."
    )
    assert isinstance(err, RuntimeError)
    import pickle

    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_raise_unless_converged_reports_the_failed_batch_entry():
    """Batched solve: entry 0 converges (x² = 1), entry 1 cannot (x² = −1, no real root).
    The error names step, time, and the residual of the entry that failed."""
    from chetaev.discrete_lagrangian import State, raise_unless_converged

    c = np.array([[1.0], [-1.0]])
    res = newton_solve(lambda x: x * x - c, np.array([[2.0], [0.5]]),
                       jac=lambda x: 2 * x[..., None], options=NewtonOptions(max_iter=15))
    assert bool(res.converged[0]) and not bool(res.converged[1])
    state = State(t=2.5, q=np.zeros((2, 1)), v=np.zeros((2, 1)), n=25)
    with pytest.raises(ConvergenceError, match=r"at step 25 \(t = 2.5\): residual [1-9]") as e:
        raise_unless_converged(res, state)
    assert e.value.residual >= 0.5  # |x² + 1| ≥ 1 for real x: the failed entry, not entry 0
    ok = newton_solve(lambda x: x * x - 1.0, np.array([[2.0]]), jac=lambda x: 2 * x[..., None])
    assert raise_unless_converged(ok, state) is ok
