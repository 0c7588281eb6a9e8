"""Bad input raises LieGroupError (a ValueError) with a message saying what was expected."""

import numpy as np
import pytest
from chetaev.liegroups import (
    S2,
    SE2,
    SE3,
    SO2,
    SO3,
    LieGroupError,
    Product,
    Rn,
    Sphere2,
    retraction,
)
from scipy.spatial.transform import Rotation


def test_error_is_value_error():
    assert issubclass(LieGroupError, ValueError)


@pytest.mark.parametrize("G", [SO2, SO3, SE2, SE3, Product(SO3, Rn(2))], ids=repr)
def test_log_of_non_element(G):
    bad = np.eye(G.matrix_dim)
    bad[0, 0] = 1.5
    with pytest.raises(LieGroupError, match=rf"{G.name}\.log: expected elements of {G.name}"):
        G.log(bad)
    with pytest.raises(LieGroupError, match="pass check=False"):
        G.log(np.stack([np.eye(G.matrix_dim), bad]))


def test_log_of_reflection_and_se3_bottom_row():
    with pytest.raises(LieGroupError, match=r"det R = 1"):
        SO3.log(np.diag([1.0, 1.0, -1.0]))
    g = np.eye(4)
    g[3, 0] = 0.1
    with pytest.raises(LieGroupError, match=r"SE3\.log: expected elements of SE3 \(\[\[R, p\]"):
        SE3.log(g)


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (
            lambda: SO3.exp(np.zeros(4)),
            r"SO3\.exp: expected `xi` with shape \(\.\.\., 3\).*got shape \(4,\)",
        ),
        (lambda: SO3.exp(np.zeros((2, 2))), r"shape \(\.\.\., 3\)"),
        (lambda: SE3.exp(np.zeros(3)), r"SE3\.exp: expected `xi` with shape \(\.\.\., 6\)"),
        (lambda: SO3.log(np.eye(4)), r"SO3\.log: expected `g` with shape \(\.\.\., 3, 3\)"),
        (lambda: SO3.log(np.ones(3)), r"got shape \(3,\)"),
        (lambda: Rn(2).exp(np.zeros(3)), r"R2\.exp: expected `xi` with shape \(\.\.\., 2\)"),
        (lambda: retraction(SO3, "exp").dL_deriv(np.zeros(3), np.zeros(2)), r"`eta` with shape"),
        (lambda: retraction(SE2, "cayley").dL(np.zeros(2)), r"SE2\.cay: expected `xi`"),
        (lambda: SO3.exp("abc"), r"must be a real array"),
    ],
)
def test_wrong_shapes(call, pattern):
    with pytest.raises(LieGroupError, match=pattern):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: SO3.exp(np.array([np.nan, 0.0, 0.0])),
        lambda: SO3.log(np.full((3, 3), np.nan)),
        lambda: retraction(SE3, "exp").dL_inv(np.array([0, 0, np.inf, 0, 0, 0])),
        lambda: retraction(SO3, "cayley")(np.array([[0.0, 0, 0], [np.nan, 0, 0]])),
        lambda: Product(SO3, Rn(2)).exp(np.array([0, 0, 0, np.nan, 1.0])),
        lambda: S2.project(np.full((3, 3), np.nan)),
    ],
)
def test_nan_input(call):
    pattern = r"contains \d+ NaN or inf entr(y|ies); expected finite"
    with pytest.raises(LieGroupError, match=pattern):
        call()


def test_retraction_factory_errors():
    with pytest.raises(LieGroupError, match=r"unknown kind 'foo'; expected 'exp' or 'cayley'"):
        retraction(SO3, "foo")
    with pytest.raises(LieGroupError, match=r"expected a group object such as SO3"):
        retraction("SO3", "exp")


def test_constructor_errors():
    with pytest.raises(LieGroupError, match="positive integer dimension"):
        Rn(0)
    with pytest.raises(LieGroupError, match="positive integer dimension"):
        Rn(2.5)
    with pytest.raises(LieGroupError, match="one or more group objects"):
        Product()
    with pytest.raises(LieGroupError, match="one or more group objects"):
        Product(SO3, 3)
    with pytest.raises(LieGroupError, match="expected 2 parts"):
        Product(SO3, Rn(2)).from_parts([np.eye(3)])
    with pytest.raises(LieGroupError, match="unit 3-vector"):
        Sphere2(x0=(0.0, 0.0, 2.0))


@pytest.mark.parametrize("G", [SO2, SO3, SE2, SE3], ids=repr)
def test_cayley_inverse_at_half_turn(G):
    """cay^{-1} is singular for rotations by pi: a clear error, never NaN."""
    if G is SO3:
        g = Rotation.from_rotvec([np.pi, 0, 0]).as_matrix()
    else:
        xi = np.zeros(G.dim)
        xi[-1 if G is not SE3 else 3] = np.pi
        g = G.exp(xi)
    with pytest.raises(LieGroupError, match=r"(rotation by pi|is singular)"):
        retraction(G, "cayley").inv(g)


def test_sphere_point_check():
    with pytest.raises(LieGroupError, match=r"S2\.section: expected unit vectors `x` on S\^2"):
        S2.section(np.array([0.0, 0.0, 2.0]))


def test_is_element_never_raises():
    for G in [SO2, SO3, SE2, SE3, Rn(3), Product(SO3, Rn(2))]:
        assert not G.is_element(np.zeros(7))
        nan = np.full(G.shape, np.nan)
        assert not G.is_element(nan)
        assert bool(G.is_element(G.identity()))
    assert not S2.is_point(np.zeros(3))
    ok = SO3.is_element(np.stack([np.eye(3), 2 * np.eye(3)]))
    assert ok.tolist() == [True, False]
