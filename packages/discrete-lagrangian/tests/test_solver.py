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


# --- per-entry decisions (issue 18), moved from nh's solver tests -----------------------


@pytest.mark.parametrize("simplified", [True, False])
def test_newton_stops_a_stalled_or_singular_member_alone(simplified):
    """x^2 = c per member: c = 2 converges; c = -1 has no root (Newton wanders: the member
    stalls); x0 = 0 has a singular Jacobian; c = NaN is non-finite. Each of these is frozen
    and reported not converged while the others converge, each bitwise as alone."""
    c = np.array([2.0, -1.0, 3.0, 5.0, np.nan, 0.5])
    x0 = np.array([1.0, 0.5, 2.0, 0.0, 1.0, 1.0])[:, None]
    opts = NewtonOptions(max_iter=60, max_stall=4)

    def solve(cc, xx):
        def fun(x):
            return x * x - cc[:, None]

        def jac(x):
            return 2.0 * x[..., None]

        return newton_solve(fun, xx, jac, opts, simplified=simplified)

    with np.errstate(invalid="ignore"):
        res = solve(c, x0)
        solo = [solve(c[k : k + 1], x0[k : k + 1]) for k in range(len(c))]
    assert res.converged.tolist() == [True, False, True, False, False, True]
    for k, one in enumerate(solo):
        assert np.array_equal(res.x[k], one.x[0], equal_nan=True), k
        assert res.converged[k] == one.converged[0]


def _structured_cubic(c, d, x0, opts):
    """x^3 = c with the approximate matrix 3 xb^2 + d (d per member, built at xb)."""
    c = c.reshape((*x0.shape[:-1], 1))
    d = d.reshape((*x0.shape[:-1], 1))

    def fun(x):
        return x**3 - c

    def jac(x):
        return 3.0 * (x * x)[..., None]

    def make_solver(xb):
        J0 = 3.0 * xb * xb + d
        return lambda F: F / J0

    return newton_solve(fun, x0, jac, opts, simplified=False, structured=make_solver)


def test_newton_structured_rebuilds_and_falls_back_per_member():
    """d = 0 is exact at xb (rebuilds as x moves), a large d contracts too slowly (rate >
    refresh_rate right after a build: that member alone goes to the analytic fallback).
    Each member's result is bitwise that of a batch of it alone."""
    c = np.array([2.0, 8.0, 1.4, 0.5])
    d = np.array([0.0, 40.0, 0.0, 5.0])
    x0 = np.array([1.3, 1.0, 1.0, 1.0])[:, None]
    # member 2: rates 0.14 (fresh matrix) then 0.26 > refresh_rate = 0.2: a rebuild
    opts = NewtonOptions(max_iter=60, refresh_rate=0.2)
    res = _structured_cubic(c, d, x0, opts)
    assert res.converged.all() and res.n_structured >= 2 and res.n_jac >= 1
    for k in range(len(c)):
        one = _structured_cubic(c[k : k + 1], d[k : k + 1], x0[k : k + 1], opts)
        assert np.array_equal(res.x[k], one.x[0]), k
        unbatched = _structured_cubic(c[k : k + 1], d[k : k + 1], x0[k], opts)
        assert unbatched.converged and abs(unbatched.x[0] ** 3 - c[k]) <= 4 * res.tol[k]


def test_singular_structured_matrix_falls_back_for_that_member_only():
    """Issue 18 leftover: member 1's structured matrix is singular at its start (d = -3 x0^2,
    so J0 = 0 and the solve returns non-finite values): that member alone goes to the
    analytic fallback and converges; the others' iterates equal their solo runs bitwise and
    use no analytic Jacobian."""
    c = np.array([2.0, 3.0, 0.5])
    x0 = np.array([1.1, 1.0, 0.9])[:, None]
    d = np.array([0.0, -3.0, 0.0])
    opts = NewtonOptions(max_iter=60)
    with np.errstate(divide="ignore", invalid="ignore"):
        res = _structured_cubic(c, d, x0, opts)
        solo = [_structured_cubic(c[k : k + 1], d[k : k + 1], x0[k : k + 1], opts)
                for k in range(3)]
        single = _structured_cubic(c[1:2], d[1:2], x0[1], opts)
    assert res.converged.all() and res.n_jac >= 1
    assert single.converged and single.n_jac >= 1
    assert solo[0].n_jac == 0 and solo[2].n_jac == 0 and solo[1].n_jac >= 1
    for k, one in enumerate(solo):
        assert np.array_equal(res.x[k], one.x[0]), k


# --- Gauss–Newton and deflation (moved from dsocs) ---------------------------------------


def test_gauss_newton_tall_consistent_system_and_damping():
    """A tall consistent system (x^2 = 2 twice, plus x - sqrt 2 = 0) is solved by
    Gauss–Newton; Armijo damping brings a far guess (x0 = 40) in as well; the step-size
    test stops at ``tol``."""
    root = np.sqrt(2.0)

    def fun(x):
        return np.concatenate([x * x - 2.0, 2 * (x * x - 2.0), x - root], axis=-1)

    def jac(x):
        return np.stack([2 * x, 4 * x, np.ones_like(x)], axis=-2)

    for damped in (False, True):
        res = newton_solve(fun, np.array([[1.0], [40.0]]), jac, NewtonOptions(tol=1e-13),
                           gauss_newton=True, damped=damped)
        assert res.converged.all() and np.all(res.step <= 1e-13)
        # |x - root| after a step of relative size <= tol at quadratic convergence: far below
        # tol; a few ulps of root from the rounding of the last update
        assert np.all(np.abs(res.x - root) <= 4 * np.spacing(root))


def test_deflation_finds_the_other_root():
    """x^2 = 1 from x0 = 0.9 converges to 1; deflating that root sends Newton from the same
    guess to -1 (Farrell et al. 2015)."""
    from chetaev.discrete_lagrangian import deflated

    def fun(x):
        return x * x - 1.0

    def jac(x):
        return 2.0 * x[..., None]

    first = newton_solve(fun, np.array([0.9]), jac)
    assert first.converged and abs(first.x[0] - 1.0) <= 2 * np.finfo(float).eps
    f, j = deflated(fun, jac, [first.x], power=2)
    second = newton_solve(f, np.array([0.9]), j, NewtonOptions(tol=1e-13), gauss_newton=True,
                          damped=True)
    assert second.converged and abs(second.x[0] + 1.0) <= 2 * np.finfo(float).eps
