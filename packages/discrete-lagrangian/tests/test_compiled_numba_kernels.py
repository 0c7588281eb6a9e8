"""Compiled kernels from the user's own numba functions (issue 17: "kernels come from the
symbolic front-end and from user functions already decorated with numba").

A system whose callables are ``numba.njit`` functions gets kernels that call them
(``systems._numba_kernels``); every generated kernel is compared, when built, with the
system's own numpy method at two seeded points (bound 64·eps·n·scale: the same values
summed in another order). One compiled module is built here (the spherical pendulum,
Lobatto-3 ``ConstrainedPRK``); the kernels of the other system classes are checked in plain
Python (the guard above), without compiling.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from chetaev.discrete_lagrangian import (  # noqa: E402
    ConstrainedPRK,
    NewtonOptions,
    integrate,
)
from chetaev.discrete_lagrangian import systems as sy  # noqa: E402
from chetaev.discrete_lagrangian.core import _kernels  # noqa: E402
from chetaev.discrete_lagrangian.extending import BackendError  # noqa: E402
from chetaev.discrete_lagrangian.systems import _numba_kernels  # noqa: E402
from chetaev.rktableaux import lobatto_iiia_iiib  # noqa: E402

#: The agreement bound of the packages' compiled tests (test_compiled.py): both paths solve
#: the same equations with the same stopping rule at tol 1e-14; 100 steps.
AGREE = 1e-12
TIGHT = NewtonOptions(tol=1e-14)
GRAV = 9.81


@numba.njit
def _pot(q):
    return GRAV * q[2]


@numba.njit
def _pot_grad(q):
    return np.array([0.0, 0.0, GRAV])


@numba.njit
def _pot_hess(q):
    return np.zeros((3, 3))


@numba.njit
def _sphere(q):
    return np.array([0.5 * (q @ q - 1.0)])


@numba.njit
def _sphere_jac(q):
    return q.reshape(1, 3).copy()


@numba.njit
def _sphere_hess(q):
    return np.eye(3).reshape(1, 3, 3).copy()


def _pendulum(**con) -> sy.ConstrainedSystem:
    """The spherical pendulum (unit length, g = 9.81) of numba functions."""
    mech = sy.MechanicalSystem(np.eye(3), _pot, _pot_grad, _pot_hess, vectorized=False)
    fns = {"phi": _sphere, "jacobian": _sphere_jac, "hessian": _sphere_hess, **con}
    return sy.ConstrainedSystem(mech, sy.HolonomicConstraint(
        fns["phi"], fns["jacobian"], fns["hessian"], vectorized=False))


Q0 = np.array([1.0, 0.0, 0.0])
V0 = np.array([0.0, 0.5, 0.3])


def _run(system, backend, q0=Q0, v0=V0):
    method = ConstrainedPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend=backend)
    return integrate(system, method, q0, v0, h=0.05, n_steps=100)


def _assert_agree(a, b) -> None:
    for field in ("q", "v", "p"):
        x, y = getattr(a, field), getattr(b, field)
        scale = max(1.0, float(np.max(np.abs(x))))
        assert np.max(np.abs(x - y)) <= AGREE * scale, field


def test_numba_functions_run_compiled_and_agree_with_numpy() -> None:
    system = _pendulum()
    ref = _run(system, "numpy")
    auto = _run(system, "auto")
    assert auto.stats["backend"] == "numba"
    _assert_agree(auto, ref)
    rng = np.random.default_rng(5)
    q0 = Q0 + 0.2 * rng.standard_normal((4, 3))
    q0 /= np.linalg.norm(q0, axis=-1, keepdims=True)
    v0 = 0.5 * rng.standard_normal((4, 3))
    v0 -= np.sum(v0 * q0, axis=-1, keepdims=True) * q0  # tangent: on the hidden constraint
    _assert_agree(_run(system, "numba", q0, v0), _run(system, "numpy", q0, v0))


def test_the_first_state_derivative_check_covers_the_compiled_run() -> None:
    @numba.njit
    def bad_hess(q):  # twice the true Hessian
        return 2.0 * np.eye(3).reshape(1, 3, 3)

    system = _pendulum(hessian=bad_hess)
    assert _kernels.kernels_of(system) is not None  # the kernels reproduce the system
    with pytest.raises(ValueError, match="hessian"):
        _run(system, "numba")


@numba.njit
def _x3(q):
    return q * q * q


def test_plain_or_missing_callables_keep_numpy_and_numba_says_why() -> None:
    plain = sy.ConstrainedSystem(
        sy.MechanicalSystem(np.eye(3), _pot, lambda q: np.array([0.0, 0.0, GRAV]), _pot_hess,
                            vectorized=False),
        sy.HolonomicConstraint(_sphere, _sphere_jac, _sphere_hess, vectorized=False))
    no_hess = sy.MechanicalSystem(np.eye(3), _pot, _pot_grad, vectorized=False)
    varying = sy.MechanicalSystem(lambda q: np.eye(3) * (1 + q[0] ** 2), _pot, _pot_grad,
                                  _pot_hess, n=3, vectorized=False)
    cases = {plain: "`potential_grad` is a plain Python callable",
             no_hess: "`potential_hess` is not given",
             varying: "position-dependent mass"}
    for system, why in cases.items():
        assert _kernels.kernels_of(system) is None
        assert why in _kernels.why_no_kernels(system)
    method = ConstrainedPRK(lobatto_iiia_iiib(3), backend="numba")
    with pytest.raises(BackendError, match="potential_grad` is a plain Python callable"):
        integrate(plain, method, Q0, V0, h=0.05, n_steps=2)
    assert _run(plain, "auto").stats["backend"] == "numpy"


# --- every system class, checked in plain Python (no compile) ------------------------------


@numba.njit
def _lag_dq(q, v):
    return np.array([-q[0] - v[1] * v[1] * q[1], -q[1] * v[1] * v[1]])


@numba.njit
def _lag_dv(q, v):
    return np.array([v[0], v[1] * (1.0 + 0.5 * 0.0) * (1.0 + q[1] * q[1])])


@numba.njit
def _lag_dvv(q, v):
    return np.array([[1.0, 0.0], [0.0, 1.0 + q[1] * q[1]]])


@numba.njit
def _lag_dvdq(q, v):  # [i, j] = ∂²L/∂v_i∂q_j: not symmetric, so a wrong transpose shows
    return np.array([[0.0, 0.0], [0.0, 2.0 * q[1] * v[1]]])


@numba.njit
def _lag_dqq(q, v):
    return np.array([[-1.0, 0.0], [0.0, -v[1] * v[1]]])


@numba.njit
def _A1(q):  # one constraint written without its axis: (n,)
    return np.array([-q[1], 0.0, 1.0])


@numba.njit
def _dA1(q):
    out = np.zeros((3, 3))
    out[0, 1] = -1.0
    return out


@numba.njit
def _a1(q):
    return 0.3 * (1.0 + 0.3 * q[0])


@numba.njit
def _da1(q):
    return np.array([0.09, 0.0, 0.0])


@numba.njit
def _vphi(q, v):
    return np.array([v[2] - q[1] * v[0] + 0.1 * v[1] ** 2])


@numba.njit
def _vphi_q(q, v):
    return np.array([[0.0, -v[0], 0.0]])


@numba.njit
def _vphi_v(q, v):
    return np.array([[-q[1], 0.2 * v[1], 1.0]])


@numba.njit
def _vphi_vq(q, v):
    out = np.zeros((1, 3, 3))
    out[0, 0, 1] = -1.0
    return out


@numba.njit
def _vphi_vv(q, v):
    out = np.zeros((1, 3, 3))
    out[0, 1, 1] = 0.2
    return out


@numba.njit
def _quartic(q):
    return 0.25 * np.sum(q**4)


@numba.njit
def _quartic_hess(q):
    return np.diag(3.0 * q * q)


def _particle(constraint) -> sy.ConstrainedSystem:
    mech = sy.MechanicalSystem(np.diag([1.0, 2.0, 1.5]), _quartic, _x3, _quartic_hess,
                               vectorized=False)
    return sy.ConstrainedSystem(mech, constraint, derivative_check=False)


@pytest.mark.parametrize("case", ["lagrangian", "linear-promoted-affine", "linear-constant",
                                  "velocity"])
def test_kernels_of_every_class_reproduce_the_system(case: str) -> None:
    if case == "lagrangian":
        system = sy.LagrangianSystem(2, lambda q, v: 0.0, _lag_dq, _lag_dv, _lag_dvv,
                                     _lag_dvdq, _lag_dqq, vectorized=False)
        kind, m, mech = None, 0, False
    elif case == "linear-promoted-affine":
        system = _particle(sy.LinearVelocityConstraint(_A1, a=_a1, dA=_dA1, da=_da1,
                                                       vectorized=False))
        kind, m, mech = "velocity", 1, True
    elif case == "linear-constant":
        A = np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
        system = _particle(sy.LinearVelocityConstraint(A, a=np.array([0.1, -0.2])))
        kind, m, mech = "velocity", 2, True
    else:
        system = _particle(sy.VelocityConstraint(_vphi, _vphi_q, _vphi_v, _vphi_vq, _vphi_vv,
                                                 vectorized=False))
        kind, m, mech = "velocity", 1, True
    k = _kernels.kernels_of(system)
    assert k is not None, _kernels.why_no_kernels(system)
    assert (k.constraint, k.m, k.mechanical, k.forced) == (kind, m, mech, False)
    assert _kernels.kernels_of(system) is k  # registered: built once


def test_the_guard_rejects_a_kernel_that_does_not_reproduce_the_system(monkeypatch) -> None:
    # a generator bug (D11L written without its sign) must be caught, not compiled
    copy = _numba_kernels._copy
    monkeypatch.setattr(_numba_kernels, "_copy",
                        lambda call, shape, sign="", **kw: copy(call, shape, "", **kw))
    system = _pendulum()
    kernels, why = _numba_kernels.numba_kernels(system)
    assert kernels is None
    assert "differs from the system's own D1L" in why


def test_fingerprint_follows_what_numba_freezes() -> None:
    def make(c):
        @numba.njit
        def f(q):
            return c * q

        return f

    @numba.njit
    def outer(q):
        return _x3(q) + 1.0

    fp = _numba_kernels.fingerprint
    assert fp(make(1.0)) == fp(make(1.0))  # the same code and closure: one module
    assert fp(make(1.0)) != fp(make(2.0))  # a closure value
    assert fp(_pot) != fp(_pot_grad)
    before = fp(outer)
    global _x3
    saved = _x3
    try:
        _x3 = numba.njit(lambda q: q * q)  # the callee changes: a new module
        assert fp(outer) != before
    finally:
        _x3 = saved
    global GRAV
    g, before = GRAV, fp(_pot)
    try:
        GRAV = 1.62  # a global scalar numba freezes
        assert fp(_pot) != before
    finally:
        GRAV = g


# --- on a Lie group ---------------------------------------------------------------------------

_CHI = np.array([0.1, 0.2, 1.0])


@numba.njit
def _top_V(R):
    return R[2, 0] * _CHI[0] + R[2, 1] * _CHI[1] + R[2, 2] * _CHI[2]


@numba.njit
def _hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


@numba.njit
def _top_dV(R):  # left-trivialized ∇V = χ × Γ, Γ = Rᵀe₃
    return _hat(_CHI) @ R[2, :].copy()


@numba.njit
def _top_d2V(R):
    return _hat(_CHI) @ _hat(R[2, :].copy())


def _numba_top():
    from chetaev.liegroups import SO3

    return sy.TrivializedMechanicalSystem(SO3, np.diag([1.0, 1.5, 2.5]), _top_V, _top_dV,
                                          _top_d2V, vectorized=False)


def test_lie_numba_functions_run_compiled_and_agree() -> None:
    """The heavy top (``testing.heavy_top``'s) from numba functions of the group element:
    LieVPRK runs compiled and agrees with numpy and with the symbolic top's compiled run."""
    from chetaev.discrete_lagrangian import LieVPRK
    from chetaev.discrete_lagrangian.testing import heavy_top
    from chetaev.liegroups import SO3

    pytest.importorskip("sympy")
    top = _numba_top()
    g0, e0 = SO3.exp(np.array([0.3, 0.2, 0.1])), np.array([0.5, -0.3, 1.2])

    def run(system, backend):
        method = LieVPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend=backend)
        return integrate(system, method, g0, e0, h=0.05, n_steps=100)

    ref = run(top, "numpy")
    for sol in (run(top, "auto"), run(heavy_top(symbolic=True), "numba")):
        assert sol.stats["backend"] == "numba"
        _assert_agree(sol, ref)


@numba.njit
def _gamma_row(R):  # A(g) = Γᵀ: Φ = Γ·η (one constraint, written without its axis)
    return R[2, :].copy()


@numba.njit
def _gamma_row_grad(R):  # left-trivialized: d/dε Γ(R exp(ε ê_j)) = Γ × e_j = hat(Γ) e_j
    return _hat(R[2, :].copy())


def test_lie_constraint_kernels_reproduce_the_system() -> None:
    from chetaev.liegroups import SO3

    for con, m in ((sy.LinearVelocityConstraint(_gamma_row, dA=_gamma_row_grad,
                                                vectorized=False), 1),
                   (sy.LinearVelocityConstraint(np.array([[0.0, 0.0, 1.0]])), 1)):
        system = sy.ConstrainedSystem(_numba_top(), con)
        k = _kernels.kernels_of(system)
        assert k is not None, _kernels.why_no_kernels(system)
        assert (k.group, k.constraint, k.m, k.mechanical) == (SO3, "velocity", m, True)
        assert {"lt_force", "phi_g", "phi_vg"} <= set(k.names)
    hol = sy.ConstrainedSystem(_numba_top(), sy.HolonomicConstraint(
        _sphere, _sphere_jac, _sphere_hess, vectorized=False))
    assert "holonomic constraint on a group" in _kernels.why_no_kernels(hol)
