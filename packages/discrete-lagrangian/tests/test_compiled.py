"""The compiled backend (issue 17): VPRK and ConstrainedPRK compiled with numba against their
numpy paths.

The compiled step solves the same equations (paper Thm. 4.2) with the same unknowns, initial
guess and Newton stopping rule as the numpy path, so with ``NewtonOptions(tol=1e-14)`` both
stop within ``max(1e-14, 64 eps)·scale`` of the same root; over 100 steps they agree to 1e-12
(the brief's bound; measured below 1e-15 on the double pendulum, single and batched). One
generated module (double pendulum, Lobatto IIIA–IIIB(3)) is compiled per test session
(numba's on-disk cache keeps it across sessions).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import (  # noqa: E402
    VPRK,
    ConstrainedPRK,
    ConvergenceError,
    DiscreteEulerLagrange,
    InputError,
    MechanicalSystem,
    NewtonOptions,
    integrate,
    reference_solution,
)
from chetaev.discrete_lagrangian.core._backend import BACKENDS, BackendError  # noqa: E402
from chetaev.discrete_lagrangian.core._interface import interface_of  # noqa: E402
from chetaev.discrete_lagrangian.symbolic import from_lagrangian  # noqa: E402
from chetaev.discrete_lagrangian.testing import (  # noqa: E402
    double_pendulum,
    fit_order,
    spherical_pendulum,
)
from chetaev.rktableaux import gauss, lobatto_iiia_iiib  # noqa: E402

AGREE = 1e-12  # the brief's bound for tol = 1e-14 over 100 steps
TIGHT = NewtonOptions(tol=1e-14)
Q0 = np.array([1.0, -0.5])
V0 = np.array([0.3, 0.8])


@pytest.fixture(scope="module")
def pendulum2():
    """The double pendulum (unit masses, lengths, g) from its symbolic Lagrangian: a
    q-dependent mass matrix, so every kernel (D21L, D11L, ...) enters the step."""
    t1, t2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
    L = (w1**2 + w2**2 / 2 + w1 * w2 * sp.cos(t1 - t2)
         + 2 * sp.cos(t1) + sp.cos(t2))
    return from_lagrangian(L, [t1, t2], [w1, w2])


def _run(system, backend, q0=Q0, v0=V0, n=100, h=0.1, newton=TIGHT):
    method = VPRK(lobatto_iiia_iiib(3), newton=newton, backend=backend)
    return integrate(system, method, q0, v0, h=h, n_steps=n)


def _steps(method, system, q0, v0, n, h=0.1):
    """The state after ``n`` calls of ``method.step`` from ``(q0, v0)``."""
    st = method.initial_state(system, q0, v0)
    for _ in range(n):
        st = method.step(system, st, h)
    return st


def test_kernels_exposed(pendulum2):
    k = interface_of(pendulum2).kernels
    assert k is not None and k.n == 2 and k.mechanical and k.constraint is None
    assert interface_of(double_pendulum()).kernels is None


def test_compiled_agrees_with_numpy_single(pendulum2):
    a, b = _run(pendulum2, "numpy"), _run(pendulum2, "numba")
    assert a.stats["backend"] == "numpy" and b.stats["backend"] == "numba"
    assert a.success and b.success
    for f in ("t", "q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
    assert b.lam is None and b.final_state().n == 100


def test_compiled_agrees_with_numpy_batched(pendulum2):
    rng = np.random.default_rng(7)
    q0 = Q0 + 0.3 * rng.standard_normal((5, 2))
    v0 = V0 + 0.3 * rng.standard_normal((5, 2))
    a, b = _run(pendulum2, "numpy", q0, v0), _run(pendulum2, "numba", q0, v0)
    assert b.q.shape == a.q.shape == (101, 5, 2)
    for f in ("q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f


def test_save_every_and_step(pendulum2):
    a, b = _run(pendulum2, "numpy", n=10), _run(pendulum2, "numba", n=10)
    c = integrate(pendulum2, VPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numba"),
                  Q0, V0, h=0.1, n_steps=10, save_every=3)
    assert np.allclose(c.t, a.t[[0, 3, 6, 9, 10]], rtol=0, atol=0)
    assert np.max(np.abs(c.q - a.q[[0, 3, 6, 9, 10]])) <= AGREE
    # Method.step runs the compiled step too (one call per step)
    st = _steps(VPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numba"), pendulum2, Q0, V0,
                10)
    assert st.info["backend"] == "numba"
    assert np.max(np.abs(st.q - b.q[-1])) <= AGREE


def test_order_compiled(pendulum2):
    """Order 4 of Lobatto IIIA–IIIB(3) on the compiled backend, against DOP853."""
    T = 1.0
    ref = reference_solution(pendulum2, Q0, V0, [0.0, T])
    hs = [0.1, 0.05, 0.025, 0.0125]
    errs = []
    for h in hs:
        tr = _run(pendulum2, "numba", n=round(T / h), h=h, newton=NewtonOptions())
        assert tr.stats["backend"] == "numba"
        errs.append(max(np.max(np.abs(tr.q[-1] - ref.q[-1])),
                        np.max(np.abs(tr.p[-1] - ref.p[-1]))))
    # errors 1e-5 .. 1e-9, far above the round-off floor; band ±0.25 as test_orders.py
    assert abs(fit_order(hs, errs, 1e-11) - 4) <= 0.25, errs


def test_backend_selection(pendulum2):
    assert _run(pendulum2, "auto", n=3).stats["backend"] == "numba"
    assert _run(pendulum2, "numpy", n=3).stats["backend"] == "numpy"
    plain = double_pendulum()
    assert _run(plain, "auto", n=3).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="from_lagrangian"):
        _run(plain, "numba", n=3)


def test_backend_errors():
    assert BACKENDS == ("numpy", "numba", "auto")
    with pytest.raises(BackendError, match="`backend`") as exc:
        VPRK(lobatto_iiia_iiib(3), backend="fast")
    assert isinstance(exc.value, InputError)
    # a method without any compiled step raises at construction
    from chetaev.discrete_lagrangian.discretization_maps import StageConstrainedBaseline

    with pytest.raises(BackendError, match="no compiled path yet"):
        StageConstrainedBaseline(backend="numba")
    assert DiscreteEulerLagrange(backend="numpy").backend == "numpy"
    assert DiscreteEulerLagrange().backend == "auto"


def test_numba_step_of_a_forced_system_raises():
    """A forced system has no compiled path: ``Method.step`` under ``backend="numba"`` says
    so (as ``integrate`` does) instead of running numpy quietly."""
    forced = MechanicalSystem(np.eye(1), lambda q: 0.5 * q[..., 0] ** 2, lambda q: q,
                              lambda q: np.ones((*np.shape(q)[:-1], 1, 1)),
                              force=lambda q, v, u: -0.1 * v)
    method = VPRK(lobatto_iiia_iiib(3), backend="numba")
    st = VPRK(lobatto_iiia_iiib(3), backend="numpy").initial_state(forced, [1.0], [0.0])
    with pytest.raises(BackendError, match="forced system"):
        method.step(forced, st, 0.1)


def test_compiled_newton_failure(pendulum2):
    """A Newton failure in compiled code ends the run like the numpy path: success False
    and the ConvergenceError message naming step, time and residual."""
    one = NewtonOptions(max_iter=1, tol=1e-14)
    a, b = _run(pendulum2, "numpy", n=5, newton=one), _run(pendulum2, "numba", n=5, newton=one)
    assert not a.success and not b.success
    assert "step 0" in b.message and "residual" in b.message
    assert len(b.t) == len(a.t) == 1
    m = VPRK(lobatto_iiia_iiib(3), newton=one, backend="numba")
    with pytest.raises(ConvergenceError):
        m.step(pendulum2, m.initial_state(pendulum2, Q0, V0), 0.1)


def test_backend_survives_pickle_and_copy():
    import copy
    import pickle

    m = VPRK(lobatto_iiia_iiib(3), backend="numpy")
    assert pickle.loads(pickle.dumps(m)).backend == "numpy"
    assert copy.deepcopy(m).backend == "numpy"
    assert pickle.loads(pickle.dumps(VPRK(lobatto_iiia_iiib(3)))).backend == "auto"


def test_continue_from_state(pendulum2):
    """A run continued from ``traj.final_state()`` stays on the grid, compiled as numpy."""
    a = _run(pendulum2, "numpy", n=20)
    m = VPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numba")
    b1 = integrate(pendulum2, m, Q0, V0, h=0.1, n_steps=10)
    b2 = integrate(pendulum2, m, b1.final_state(), None, h=0.1, n_steps=10)
    assert b2.stats["backend"] == "numba" and b2.t[-1] == a.t[-1]
    assert b2.final_state().n == 20
    assert np.max(np.abs(b2.q[-1] - a.q[-1])) <= AGREE


def test_compiled_velocity_with_linear_terms():
    """v_{k+1} = D22L⁻¹(p_{k+1} − D2L(q_{k+1}, 0)) when L has terms linear in v (a charged
    particle in a constant magnetic field): the compiled inverse Legendre map keeps the
    D2L(q, 0) term (measured agreement 1e-16; it used to return D22L⁻¹ p, off by O(1))."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    L = (vx**2 + vy**2) / 2 + (x * vy - y * vx) / 2 - (x**2 + y**2) / 2
    system = from_lagrangian(L, [x, y], [vx, vy])
    a, b = (integrate(system, VPRK(lobatto_iiia_iiib(2), newton=TIGHT, backend=bk),
                      [1.0, 0.0], [0.0, 0.5], h=0.1, n_steps=20) for bk in ("numpy", "numba"))
    assert b.stats["backend"] == "numba"
    for f in ("q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f


# ------------------------------------------------------------ ConstrainedPRK, eq. (13)
# lambda enters eq. (13) only through h â_ij ∂Φ/∂qᵀ Λ^j: a residual difference of the
# size of the stopping value (max(tol, 64 eps)·scale) moves Λ by up to ~1/h times more.
# Bound AGREE / h = 1e-11 at h = 0.1; measured worst 1.9e-12 (RATTLE: the numpy fast
# path's reduced iteration in Λ¹ against the compiled (V, Λ) iteration), margin 5.
AGREE_LAM = AGREE / 0.1
SQ0 = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
SV0 = np.array([0.0, 0.8, 0.0])  # tangent: q·v = 0


@pytest.fixture(scope="module")
def sphere():
    """The spherical pendulum, |q| = 1, unit mass and g (constant mass: the numpy RATTLE
    step takes its reduced ``fast_path``)."""
    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    L = (vx**2 + vy**2 + vz**2) / 2 - z
    return from_lagrangian(L, [x, y, z], [vx, vy, vz],
                           holonomic=[(x**2 + y**2 + z**2 - 1) / 2])


@pytest.fixture(scope="module")
def sphere_gyro():
    """A particle on the unit sphere with a q-dependent mass matrix, a magnetic term linear
    in v and gravity: every kernel (D21L, D22L(q), D2L(q, 0), the constraint's Hessian)
    enters the compiled step and its Jacobian."""
    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    L = (((1 + x**2 / 2) * vx**2 + (1 + y**2 / 2) * vy**2 + vz**2) / 2
         + (x * vy - y * vx) / 2 - z)
    return from_lagrangian(L, [x, y, z], [vx, vy, vz],
                           holonomic=[(x**2 + y**2 + z**2 - 1) / 2])


def _cprk(system, s, backend, q0=SQ0, v0=SV0, n=100, h=0.1, newton=TIGHT, **kw):
    method = ConstrainedPRK(lobatto_iiia_iiib(s), newton=newton, backend=backend, **kw)
    return integrate(system, method, q0, v0, h=h, n_steps=n)


def _sphere_batch(b=5, seed=1):
    rng = np.random.default_rng(seed)
    q0 = SQ0 + 0.3 * rng.standard_normal((b, 3))
    q0 /= np.linalg.norm(q0, axis=1, keepdims=True)
    v0 = SV0 + 0.3 * rng.standard_normal((b, 3))
    v0 -= np.sum(v0 * q0, axis=1, keepdims=True) * q0
    return q0, v0


def _agree(a, b):
    assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
    assert a.success and b.success and b.q.shape == a.q.shape
    for f in ("t", "q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
    assert np.max(np.abs(a.lam - b.lam)) <= AGREE_LAM
    assert b.stats["max_constraint_residual"] <= AGREE


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_rattle_compiled_agrees_with_fast_path(sphere, batched):
    """RATTLE (s = 2): the compiled (V, Λ) iteration and the numpy reduced iteration in Λ¹
    (``fast_path``) solve the same equations (13)."""
    q0, v0 = _sphere_batch() if batched else (SQ0, SV0)
    _agree(_cprk(sphere, 2, "numpy", q0, v0), _cprk(sphere, 2, "numba", q0, v0))


@pytest.mark.parametrize("s", [2, 3])
@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_constrained_compiled_agrees_with_numpy(sphere_gyro, s, batched):
    """Lobatto-s (13) on the gyroscopic sphere: same solution and the same Newton iteration
    count as the numpy (V, Λ) iteration (same unknowns, guess and analytic Jacobian;
    measured equal, 268 and 263 iterations over 100 steps for s = 2, 3; a Jacobian error
    would cost extra iterations on most of the 100 steps, the bound allows 3)."""
    q0, v0 = _sphere_batch() if batched else (SQ0, SV0)
    a, b = _cprk(sphere_gyro, s, "numpy", q0, v0), _cprk(sphere_gyro, s, "numba", q0, v0)
    _agree(a, b)
    assert abs(a.stats["newton_iterations"] - b.stats["newton_iterations"]) <= 3


def test_constrained_without_h1_compiled(sphere):
    """Gauss-2 with ``check_hypotheses=False`` (no H1: Φ(Q^i) = 0 at every stage, no
    tangency row; the compiled ``FIRST = 0``) against numpy, 20 steps: the same Newton
    iteration count (measured 60 and 60; bound ±3 as above). Without the tangency row the
    normal velocity is not controlled (paper §4.3), which amplifies differences at the
    stopping level: measured 8e-16 in q, 5.3e-13 in v and p, 2.4e-11 in λ; bounds AGREE in
    q, 1e-11 in v, p (margin 19), 1e-9 in λ (margin 40). A wrongly wired row gives O(1)
    differences."""
    a, b = (integrate(sphere, ConstrainedPRK(gauss(2), check_hypotheses=False, newton=TIGHT,
                                             backend=bk), SQ0, SV0, h=0.1, n_steps=20)
            for bk in ("numpy", "numba"))
    assert b.stats["backend"] == "numba" and a.success and b.success
    assert abs(a.stats["newton_iterations"] - b.stats["newton_iterations"]) <= 3
    assert np.max(np.abs(a.q - b.q)) <= AGREE
    assert max(np.max(np.abs(a.v - b.v)), np.max(np.abs(a.p - b.p))) <= 1e-11
    assert np.max(np.abs(a.lam - b.lam)) <= 1e-9


@pytest.mark.parametrize("s", [2, 3])
def test_constrained_order_compiled(sphere_gyro, s):
    """Order 2s − 2 of Lobatto IIIA–IIIB(s) on the compiled backend, against DOP853."""
    T = 1.5
    ref = reference_solution(sphere_gyro, SQ0, SV0, [0.0, T])
    hs = [0.1, 0.05, 0.025]
    errs = []
    for h in hs:
        tr = _cprk(sphere_gyro, s, "numba", n=round(T / h), h=h, newton=NewtonOptions())
        assert tr.stats["backend"] == "numba"
        errs.append(max(np.max(np.abs(tr.q[-1] - ref.q[-1])),
                        np.max(np.abs(tr.v[-1] - ref.v[-1]))))
    # band ±0.25 as test_orders.py; floor 1e-11 as above
    assert abs(fit_order(hs, errs, 1e-11) - (2 * s - 2)) <= 0.25, errs


def test_constrained_step_and_selection(sphere_gyro):
    """``Method.step`` runs the compiled step; "auto" compiles for a system with kernels,
    keeps numpy for a plain one, and "numba" then says how to get kernels."""
    ref = _cprk(sphere_gyro, 3, "numpy", n=5)
    st = _steps(ConstrainedPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numba"),
                sphere_gyro, SQ0, SV0, 5)
    assert st.info["backend"] == "numba"
    assert np.max(np.abs(st.q - ref.q[-1])) <= AGREE
    assert np.max(np.abs(st.lam - ref.lam[-1])) <= AGREE_LAM
    assert _cprk(sphere_gyro, 3, "auto", n=2).stats["backend"] == "numba"
    plain = spherical_pendulum()
    assert _cprk(plain, 3, "auto", n=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="from_lagrangian"):
        _cprk(plain, 3, "numba", n=2)


@pytest.fixture(scope="module")
def bookkeeping():
    """The step loop's bookkeeping pieces of the one Newton driver (``NEWTON``) alone:
    ``_remember`` and ``_extrapolate`` compile without an engine."""
    from chetaev.discrete_lagrangian.core._kernels import load_module
    from chetaev.discrete_lagrangian.extending import NEWTON

    return load_module("import math\nimport numpy as np\nfrom numba import njit\n" + NEWTON)


def _predict(mod, rows):
    """``_extrapolate`` of the solutions ``rows`` (oldest first), through ``_remember``."""
    rows = np.asarray(rows, dtype=float)
    hist = np.zeros((5, rows.shape[1]))
    nhist = 0
    for row in rows:
        nhist = mod._remember(hist, nhist, row.copy())
    x = np.full(rows.shape[1], np.nan)
    return mod._extrapolate(hist, nhist, x), x


def test_predictor_degree(bookkeeping):
    """The guess of a step is the polynomial extrapolation (in the step index) of the last
    solutions, of the highest degree (at most 4, one less than the solutions kept) whose
    backward differences do not grow. A resolved motion: a polynomial sequence of degree d
    with shrinking differences is extrapolated exactly (to its rounding: at most 5 products
    with integer weights of absolute sum <= 31 and their sums, each rounded to eps/2, plus
    the rounding of the sequence itself: bound 31 * 8 eps * max|value|). An
    unresolved one (differences that grow, the sign flipping every step) keeps the linear
    extrapolation (the degree used before higher ones existed), never a higher one."""
    k = np.arange(-4.0, 1.0)  # step indices of the 5 solutions, the next is k = 1
    # the Taylor coefficients of exp(0.3 k): the backward differences at k = 0 shrink by
    # about 1 - exp(-0.3) per order for every degree d (checked: 0.26, 0.068, 0.015, 0.008)
    coef = 0.3 ** np.arange(5) / np.array([1.0, 1.0, 2.0, 6.0, 24.0])
    for d in range(5):
        seq = np.polynomial.polynomial.polyval(k, coef[: d + 1])
        cols = np.stack([seq, 2.0 * seq - 1.0], axis=1)
        for n in range(d + 1, 6):  # at least d + 1 solutions determine the polynomial
            ok, x = _predict(bookkeeping, cols[-n:])
            want = np.polynomial.polynomial.polyval(1.0, coef[: d + 1])
            assert ok
            bound = 31 * 8 * np.finfo(float).eps * np.max(np.abs(cols))
            assert np.max(np.abs(x - [want, 2.0 * want - 1.0])) <= bound
    ok, x = _predict(bookkeeping, np.zeros((0, 2)))
    assert not ok  # no solution yet: the hook's own guess
    flip = np.array([[(-1.0) ** j, 1.0] for j in range(5)])  # +1, -1, +1, -1, +1
    ok, x = _predict(bookkeeping, flip)
    assert ok and np.array_equal(x, 2.0 * flip[-1] - flip[-2])  # linear: 3, 1


# A toy system for the Newton driver alone: F(x) = (x0^3 + x0 - 2, x1 - x0^2), root (1, 1).
# Mode 0 factorises the Jacobian; mode 1 a matrix ten times too small (its iteration
# multiplies the error by about -9: it diverges), whose fallback is mode 0.
_TOY_ENGINE = '''
@njit(cache=True)
def _eval(mode, ctx, x, R, J, jac):
    if not jac:
        R[0] = x[0] ** 3 + x[0] - 2.0
        R[1] = x[1] - x[0] ** 2
        return
    J[0, 0] = 3.0 * x[0] ** 2 + 1.0
    J[0, 1] = 0.0
    J[1, 0] = -2.0 * x[0]
    J[1, 1] = 1.0


@njit(cache=True)
def _scale(mode, ctx, x):
    return 1.0


@njit(cache=True)
def _factor(mode, ctx, x, R, J, piv):
    _eval(mode, ctx, x, R, J, True)
    if mode == 1:
        for i in range(2):
            for j in range(2):
                J[i, j] *= 0.1
    return _lu_factor(J, piv), mode


@njit(cache=True)
def _solve(mode, ctx, J, piv, R, dx):
    _lu_solve(J, piv, R, dx)


@njit(cache=True)
def _fallback(mode):
    return FALLBACK
'''


@pytest.mark.parametrize("fallback", [0, 1])
def test_newton_hands_over_to_the_fallback_matrix(fallback):
    """``_newton`` (the one compiled driver) with an engine's own matrices: a fresh matrix
    that does not contract (its first rate is about 9, above ``refresh``) hands over to
    ``_fallback(mode)``. With the fallback (mode 0, the Jacobian) Newton converges to the
    root within the tolerance; without one (``_fallback`` keeps mode 1) it stops unconverged
    (the residual grows: ``max_stall`` non-decreasing iterations)."""
    from chetaev.discrete_lagrangian.core._kernels import load_module
    from chetaev.discrete_lagrangian.extending import DENSE_MATRIX, LINALG, NEWTON

    source = ("import math\nimport numpy as np\nfrom numba import njit\n"
              f"FALLBACK = {fallback}\n" + LINALG + NEWTON.replace(DENSE_MATRIX, _TOY_ENGINE))
    mod = load_module(source)
    x = np.array([1.3, 0.5])
    R, dx, piv = np.zeros(2), np.zeros(2), np.zeros(2, np.int64)
    J = np.zeros((2, 2))
    r, thr, _ = mod._newton(1, (0.0,), x, R, J, piv, dx, 1e-13, 0.0, 0.0, -1.0, 50, 0.2, 3,
                             True)
    if fallback == 0:
        assert r <= thr == 1e-13
        # |J^-1|_inf = 1.5 at the root (J = [[4, 0], [-2, 1]]): |x - 1| <= 1.5 thr to first order
        assert np.max(np.abs(x - 1.0)) <= 2.0 * thr
    else:
        assert not r <= thr


@pytest.mark.parametrize(("kind", "alpha"), [("midpoint", 0.5), ("alpha", 0.3)])
def test_del_compiled_agrees_with_numpy(pendulum2, kind, alpha):
    """``DiscreteEulerLagrange``'s midpoint and α rules run compiled as the one-stage VPRK of
    their pair (``coeffs``: a = [[α]], â = [[1 − α]]), whose discrete Lagrangian is L_d:
    the same map (eq. (6)), with Newton on V = (q_{k+1} − q_k)/h instead of q_{k+1}. With
    tol 1e-14 both stop within the tolerance of the same root: the VPRK bound, 1e-12 over
    100 steps, single and batched, on the double pendulum (q-dependent mass); measured
    worst 2.2e-13 (midpoint, batch of 4: the two stop at different points of the
    tolerance ball, their unknowns differ), margin 4.5. The α rule (order 1) tells a wrong
    stage point apart: α and 1 − α differ at O(h) per step."""
    rng = np.random.default_rng(11)
    q0b = Q0 + 0.3 * rng.standard_normal((4, 2))
    v0b = V0 + 0.3 * rng.standard_normal((4, 2))
    for q0, v0 in ((Q0, V0), (q0b, v0b)):
        a, b = (integrate(pendulum2, DiscreteEulerLagrange(kind, alpha, newton=TIGHT,
                                                           backend=bk),
                          q0, v0, h=0.1, n_steps=100) for bk in ("numpy", "numba"))
        assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
        assert a.success and b.success and b.q.shape == a.q.shape
        for f in ("q", "v", "p"):
            assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f


def test_del_trapezoidal_stays_on_numpy(pendulum2):
    """The trapezoidal rule is no one-stage PRK pair: numpy under "auto", a BackendError
    under "numba" that names it."""
    sol = integrate(pendulum2, DiscreteEulerLagrange("trapezoidal"), Q0, V0, h=0.1, n_steps=3)
    assert sol.success and sol.stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="trapezoidal"):
        integrate(pendulum2, DiscreteEulerLagrange("trapezoidal", backend="numba"), Q0, V0,
                  h=0.1, n_steps=3)
