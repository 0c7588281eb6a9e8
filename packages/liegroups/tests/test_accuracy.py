"""Numerics users report as bugs: SO(3) log near pi, tiny-angle exp/log/dL/dL_inv
(no cancellation), SE(2)/SE(3) tiny angles, the series/closed-form switch."""

import numpy as np
import pytest
from chetaev.liegroups import SE2, SE3, SO3, retraction
from chetaev.liegroups._numerics import SERIES_THETA_SQ, FTable
from scipy.spatial.transform import Rotation

AXES = np.array([[0.0, 0.0, 1.0], [1.0, 2.0, -2.0], [-0.3, 0.1, 0.9], [1.0, 0.0, 0.0]])
AXES /= np.linalg.norm(AXES, axis=-1, keepdims=True)


def _series_matrix(A, coeffs):
    """sum_k coeffs[k] A^k, plain matrix arithmetic (independent reference)."""
    out = np.zeros_like(A)
    P = np.broadcast_to(np.eye(A.shape[-1]), A.shape).copy()
    for c in coeffs:
        out = out + c * P
        P = P @ A
    return out


def _fact(n):
    return float(np.prod(np.arange(1, n + 1)))


def test_so3_log_relative_error_on_whole_range():
    """|log R - xi| / theta <= 1e-12 for theta in [1e-12, pi), R from scipy (independent)."""
    thetas = np.concatenate([
        np.logspace(-12, 0, 25),
        np.linspace(1.0, np.pi, 30, endpoint=False),
        np.pi - np.logspace(-1, -12, 12),
    ])
    xi = thetas[:, None, None] * AXES[None, :, :]
    R = Rotation.from_rotvec(xi.reshape(-1, 3)).as_matrix().reshape(*xi.shape, 3)
    err = np.linalg.norm(SO3.log(R) - xi, axis=-1) / thetas[:, None]
    # measured: 3.7e-16 (deterministic inputs, BLAS 1 and unset): margin 2700
    assert err.max() <= 1e-12, err.max()


def test_so3_log_at_exactly_pi():
    for axis in AXES:
        R = Rotation.from_rotvec(np.pi * axis).as_matrix()
        w = SO3.log(R)
        # measured: all three <= 4.4e-16, 4.4e-16, 6.1e-16: margins 2250, 2250, 6.5
        assert abs(np.linalg.norm(w) - np.pi) <= 1e-12
        assert min(np.abs(w - np.pi * axis).max(), np.abs(w + np.pi * axis).max()) <= 1e-12
        assert np.abs(SO3.exp(w) - R).max() <= 1e-15 * 4


@pytest.mark.parametrize("theta", [1e-8, 1e-12])
def test_so3_tiny_angle_relative_accuracy(theta):
    """exp, log, dL, dL_inv (exp and Cayley) at theta = 1e-8, 1e-12 against truncated series
    (truncation error theta^5 ~ 1e-40): relative error ~1e-15 entrywise."""
    xi = theta * AXES
    X = SO3.hat(xi)
    R_ref = _series_matrix(X, [1 / _fact(k) for k in range(6)])
    R = SO3.exp(xi)
    # measured: every check of this test is exact (error 0) at theta = 1e-8, 1e-12
    assert np.all(np.abs(R - R_ref) <= 2.3e-16 * np.abs(R_ref)), np.abs(R - R_ref).max()
    assert np.all(np.abs(SO3.log(R_ref) - xi) <= 1e-15 * theta)
    exp = retraction(SO3, "exp")
    dL_ref = _series_matrix(-X, [1 / _fact(k + 1) for k in range(6)])
    assert np.all(np.abs(exp.dL(xi) - dL_ref) <= 2.3e-16 * np.abs(dL_ref))
    # dL_inv = sum B_k/k! (-ad)^k with Bernoulli numbers B = 1, -1/2, 1/6, 0, -1/30
    dLi_ref = _series_matrix(-X, [1.0, -0.5, 1 / 12, 0.0, -1 / 720])
    assert np.all(np.abs(exp.dL_inv(xi) - dLi_ref) <= 2.3e-16 * np.abs(dLi_ref))
    cay = retraction(SO3, "cayley")
    # cay = I + X + X^2/2 + X^3/4 + ...; dL_cay = (I + X/2)^{-1}(...) -> I - X/2 + X^2/4 + ...
    cay_ref = _series_matrix(X, [1.0, 1.0, 0.5, 0.25, 0.125])
    assert np.all(np.abs(cay(xi) - cay_ref) <= 2.3e-16 * np.abs(cay_ref))
    assert np.all(np.abs(cay.inv(cay_ref) - xi) <= 1e-15 * theta)


@pytest.mark.parametrize("theta", [1e-8, 1e-12])
@pytest.mark.parametrize("G", [SE2, SE3], ids=repr)
def test_se_tiny_angle(G, theta):
    """log(exp(xi)) = xi with relative error 1e-15 when the rotation angle is tiny (translation
    O(1)); dL matches its (converged) series."""
    rng = np.random.default_rng(7)
    xi = rng.normal(size=(5, G.dim))
    rot = slice(2, 3) if G is SE2 else slice(3, 6)  # rotation coordinates
    xi[:, rot] *= theta / np.linalg.norm(xi[:, rot], axis=-1, keepdims=True)
    back = G.log(G.exp(xi))
    # measured: worst 0.083 of the bound (SE3, theta = 1e-8): margin 12
    assert np.all(np.abs(back - xi) <= 2e-15 * np.abs(xi) + 1e-30), np.abs(back - xi).max()
    A = -G.ad(xi)
    dL_ref = _series_matrix(A, [1 / _fact(j + 1) for j in range(30)])
    tau = retraction(G, "exp")
    # measured: 2.2e-16 and 2.6e-16 (round-off of unit-scale entries): margins 4.5, 3.9
    assert np.abs(tau.dL(xi) - dL_ref).max() <= 1e-15
    assert np.abs(tau.dL_inv(xi) @ dL_ref - np.eye(G.dim)).max() <= 1e-15


def test_series_switch_is_continuous():
    """f_n on the two sides of each series threshold (adjacent floats: series below, closed
    form at the threshold) agree to 2e-15 relative."""
    for key, (thr, _) in SERIES_THETA_SQ.items():
        s = np.array([np.nextafter(thr, 0.0), thr])
        T = FTable(s)
        for n in {"n<=2": (0, 1, 2), "n<=4": (3, 4), "n>=5": (5, 6, 7)}[key]:
            a, b = T.f(n)
            # measured: worst 0.21 of the bound (f_6 at its threshold): margin 4.8
            assert abs(a - b) <= 2e-15 * abs(a) + 1e-30, (key, n, a, b)


def test_f_functions_against_mpmath():
    """f_n and its first two s-derivatives against 40-digit sums of the series, with the error
    measured against the scale of the cancellation (the sum of |terms|)."""
    import mpmath as mp  # a test dependency of the package ([test] extra)
    mp.mp.dps = 40
    s_values = np.array([0.0, 1e-20, 1e-9, 1e-4, 0.3, 1.0, 3.999, 4.0, 6.0, 9.8, 16.0, 25.0])
    T = FTable(s_values)

    def series(n, x, order, sign):
        # d^order/ds^order sum_k sign^k s^k/(2k+n)!
        tot = mp.mpf(0)
        for k in range(order, 80):
            fall = mp.mpf(1)
            for j in range(order):
                fall *= k - j
            tot += sign**k * fall * x ** (k - order) / mp.factorial(2 * k + n)
        return tot

    for n in range(9):
        for i, s in enumerate(s_values):
            x = mp.mpf(float(s))
            got = [T.f(n)[i]] + ([T.df(n)[i], T.d2f(n)[i]] if n <= 4 else [])
            for order, value in enumerate(got):
                ref, scale = series(n, x, order, -1), series(n, x, order, 1)
                # measured: worst 1.4e-16 against 5e-15·scale (scale >= 0.5): margin 18
                assert abs(float(value - ref)) <= 5e-15 * float(scale), (n, s, order)


@pytest.mark.parametrize("kind", ["exp", "cayley"])
def test_so3_closed_forms_match_spec_table(kind):
    """The closed forms of SO(3) (homogeneous-spaces paper §4): dR exp = I + aX + bX^2,
    (dR exp)^-1 = I - X/2 + cX^2, dR cay = 2/(4+t^2)(2I + X), (dR cay)^-1 = I - X/2 + w w^T/4."""
    w = np.array([0.4, -1.1, 0.7])
    t = np.linalg.norm(w)
    X = SO3.hat(w)
    tau = retraction(SO3, kind)
    if kind == "exp":
        a = (1 - np.cos(t)) / t**2
        b = (t - np.sin(t)) / t**3
        c = (1 - (t / 2) / np.tan(t / 2)) / t**2
        dR = np.eye(3) + a * X + b * X @ X
        dRi = np.eye(3) - X / 2 + c * X @ X
    else:
        dR = 2 / (4 + t**2) * (2 * np.eye(3) + X)
        dRi = np.eye(3) - X / 2 + np.outer(w, w) / 4
    # measured: 5.6e-17, 2.2e-16, 2.8e-17 (this and the next two): margins 18, 4.5, 36
    assert np.abs(tau.dR(w) - dR).max() <= 1e-15
    assert np.abs(tau.dR_inv(w) - dRi).max() <= 1e-15
    # J^R_cay in closed form
    if kind == "cayley":
        v = np.array([0.3, 0.2, -0.5])
        d = 4 + t**2
        JR = -2 / d * SO3.hat(v) - 4 / d**2 * np.outer(2 * v + np.cross(w, v), w)
        assert np.abs(tau.dR_deriv(w, v) - JR).max() <= 1e-15


# ----------------------------------------------------------------------------- issue 14
def _mp_so3_dL_inv(w):
    """Exact SO(3) exp dL^{-1}(w) = a I + hat(w)/2 + ((1 - a)/theta^2) w w^T,
    a = (theta/2) cot(theta/2), in 40-digit arithmetic from the float entries of w."""
    import mpmath

    with mpmath.workdps(40):
        wm = [mpmath.mpf(float(x)) for x in w]
        th2 = sum(x * x for x in wm)
        th = mpmath.sqrt(th2)
        a = (th / 2) * mpmath.cot(th / 2)
        c = (1 - a) / th2
        hat = [[0, -wm[2], wm[1]], [wm[2], 0, -wm[0]], [-wm[1], wm[0], 0]]
        M = [[(a if i == j else 0) + hat[i][j] / 2 + c * wm[i] * wm[j] for j in range(3)]
             for i in range(3)]
        return np.array([[float(x) for x in row] for row in M]), float(a)


THETAS_2PI = [1e-3, 0.5, 1.0, 1.99, 2.0, 2.01, 3.0, np.pi, 3.5, 4.5, 5.5, 6.0,
              2 * np.pi - 1e-3, 2 * np.pi - 1e-6, 2 * np.pi - 1e-9]


@pytest.mark.parametrize("theta", THETAS_2PI)
def test_so3_exp_dL_inv_accurate_up_to_two_pi(theta):
    """Issue 14: exp dL_inv against mpmath for |w| up to 2 pi - 1e-9.

    Bound (derived): the inputs are exact; |w|^2 is rounded (relative <= 3 eps), so
    theta carries a relative error <= 2 eps, which a(theta) = (theta/2) cot(theta/2) amplifies
    by its condition number kappa = |theta a'/a| <= 1 + theta/|sin theta|; the entries
    are a (w_j^2 + w_k^2)/theta^2 + w_i^2/theta^2 on the diagonal, (1 - a) w_i w_j / theta^2
    and w_k/2 off it, each a few roundings.  Hence
    |computed - exact| <= 16 eps (1 + |a| (1 + kappa)) entrywise (16: a margin for the ~8
    roundings of each entry).  The textbook form (before the fix) gave -1995 instead of 1 for
    entry [2, 2] at w = (0, 0, 2 pi - 1e-9)."""
    tau = retraction(SO3, "exp")
    eps = np.finfo(float).eps
    for u in AXES:
        w = theta * u
        exact, a = _mp_so3_dL_inv(w)
        kappa = 1.0 + theta / abs(np.sin(theta))
        bound = 16 * eps * (1.0 + abs(a) * (1.0 + kappa))
        got = tau.dL_inv(w)
        err = np.max(np.abs(got - exact))
        assert err <= bound, (theta, u, err, bound)
        # the entry along the axis carries no amplification at all: exact to a few ulps
        along = u @ got @ u
        assert abs(along - 1.0) <= 16 * eps * (1 + abs(a)) * np.max(np.abs(u)) ** 0, along
        # dR_inv(w) = dL_inv(-w): same accuracy
        assert np.max(np.abs(tau.dR_inv(w) - _mp_so3_dL_inv(-w)[0])) <= bound


def test_so3_dL_inv_axis_entry_near_two_pi_is_one():
    """The reported case, exactly: [2, 2] = 1 at w = (0, 0, 2 pi - 1e-9)."""
    w = np.array([0.0, 0.0, 2 * np.pi - 1e-9])
    got = retraction(SO3, "exp").dL_inv(w)
    assert got[2, 2] == 1.0
    assert np.all(got[2, :2] == 0.0) and np.all(got[:2, 2] == 0.0)


def _mp_se2_dL_inv(x):
    """Exact SE(2) exp dL^{-1} = [[F^{-1}, -F^{-1} u], [0, 1]] (module docstring of _se2),
    F^{-1} = a I + (omega/2) J, a = (omega/2) cot(omega/2), u = f2 J v + omega f3 v, 40 digits."""
    import mpmath

    with mpmath.workdps(40):
        v1, v2, om = (mpmath.mpf(float(t)) for t in x)
        f2 = (1 - mpmath.cos(om)) / om**2
        f3 = (om - mpmath.sin(om)) / om**3
        a = (om / 2) * mpmath.cot(om / 2)
        b = om / 2
        u = [f2 * (-v2) + om * f3 * v1, f2 * v1 + om * f3 * v2]
        Fi = [[a, -b], [b, a]]
        Fu = [Fi[0][0] * u[0] + Fi[0][1] * u[1], Fi[1][0] * u[0] + Fi[1][1] * u[1]]
        M = [[Fi[0][0], Fi[0][1], -Fu[0]], [Fi[1][0], Fi[1][1], -Fu[1]], [0, 0, 1]]
        return np.array([[float(t) for t in row] for row in M]), float(a)


@pytest.mark.parametrize("theta", THETAS_2PI)
def test_se2_se3_exp_dL_inv_up_to_two_pi(theta):
    """SE(2): against mpmath with the same derived bound (scaled by the translation size);
    SE(3): its diagonal blocks are the SO(3) dL^{-1} (tested above) and dL_inv dL = I to the
    conditioning |dL_inv| |dL| of the pair."""
    eps = np.finfo(float).eps
    x = np.array([0.7, -1.3, theta])
    exact, a = _mp_se2_dL_inv(x)
    kappa = 1.0 + theta / abs(np.sin(theta))
    size = 1.0 + np.linalg.norm(x[:2])
    bound = 16 * eps * size * (1.0 + abs(a) * (1.0 + kappa)) * (1.0 + abs(a))
    tau2 = retraction(SE2, "exp")
    assert np.max(np.abs(tau2.dL_inv(x) - exact)) <= bound
    tau3 = retraction(SE3, "exp")
    xi = np.array([0.7, -1.3, 0.4, *(theta * AXES[1])])
    Di, D = tau3.dL_inv(xi), tau3.dL(xi)
    # bitwise by design: the SO3 block is computed by the same SO3 routine on the same input
    np.testing.assert_array_equal(Di[3:, 3:], retraction(SO3, "exp").dL_inv(xi[3:]))
    cond = np.max(np.abs(Di)) * np.max(np.abs(D)) * 6
    assert np.max(np.abs(Di @ D - np.eye(6))) <= 16 * 6 * eps * cond * (1.0 + kappa)
