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
    assert err.max() <= 1e-12, err.max()


def test_so3_log_at_exactly_pi():
    for axis in AXES:
        R = Rotation.from_rotvec(np.pi * axis).as_matrix()
        w = SO3.log(R)
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
    assert np.all(np.abs(back - xi) <= 2e-15 * np.abs(xi) + 1e-30), np.abs(back - xi).max()
    A = -G.ad(xi)
    dL_ref = _series_matrix(A, [1 / _fact(j + 1) for j in range(30)])
    tau = retraction(G, "exp")
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
                assert abs(float(value - ref)) <= 5e-15 * float(scale), (n, s, order)


@pytest.mark.parametrize("kind", ["exp", "cayley"])
def test_so3_closed_forms_match_spec_table(kind):
    """The spec tables (homogeneous-spaces-rkmk §4): dR exp = I + aX + bX^2,
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
    assert np.abs(tau.dR(w) - dR).max() <= 1e-15
    assert np.abs(tau.dR_inv(w) - dRi).max() <= 1e-15
    # J^R_cay of the spec table
    if kind == "cayley":
        v = np.array([0.3, 0.2, -0.5])
        d = 4 + t**2
        JR = -2 / d * SO3.hat(v) - 4 / d**2 * np.outer(2 * v + np.cross(w, v), w)
        assert np.abs(tau.dR_deriv(w, v) - JR).max() <= 1e-15
