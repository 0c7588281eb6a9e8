"""The compiled backend (issue 17) of the discretization-map methods on vector spaces.

The compiled step (:mod:`chetaev.discrete_lagrangian.methods._compiled_dmaps`) solves the
node-constrained equations of :func:`~chetaev.discrete_lagrangian.methods._dmaps_euclid.
node_step` (paper Thm. 4.5, (4.4)–(4.5), the null-space form (4.7)–(4.9), RATTLE
(5.16)–(5.18)) and the joint solve (5.7) of ``ExtrinsicEulerBA`` with the same unknowns,
initial guess and stopping rule as the numpy path, so with ``NewtonOptions(tol=1e-14)`` both
stop within ``max(1e-14, 64 eps)·scale`` of the same root and agree over 100 steps to 1e-12
(λ: 1e-12 / h), with the same number of Newton iterations (a wrong Jacobian would keep the
root but not the quadratic convergence). Measured on the model below (h = 0.05, 100 steps):
the node steps at most 2.0e-14 in q, v, p and 1.7e-14 in λ single, 5.8e-14 (RATTLE, p) and
1.1e-13 in λ for the batch of four; the extrinsic joint solve 1.1e-13 single and 1.2e-13
batched (p); the iteration counts equal. The difference starts at rounding level (~7e-16
after one step) and grows with the dynamics (a batch spread of 0.3 rad instead of 0.2
reaches 2.3e-13 in p).

The model has what the registry's spherical pendulum lacks: two constraints (the complete
Householder QR of the null-space form with more than one column), a non-diagonal constant
mass matrix (M⁻¹ in the projection and the multiplier) and a potential with a nonzero
Hessian (the θ-map's ``θ(1 − θ)h²∇²V`` Jacobian block): two planar pendula
``φ = ((x₁² + y₁² − 1)/2, (x₂² + y₂² − 1)/2)`` coupled by the mass and by a spring,
``V = y₁ + y₂ + ½(x₁ − x₂)² + x₁⁴/10``. Each (method, form) is one compiled module (~10 s
on first use, then cached on disk).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import (  # noqa: E402
    ConvergenceError,
    NewtonOptions,
    integrate,
)
from chetaev.discrete_lagrangian import discretization_maps as dm  # noqa: E402
from chetaev.discrete_lagrangian import testing as dlt  # noqa: E402
from chetaev.discrete_lagrangian.extending import BackendError  # noqa: E402
from chetaev.discrete_lagrangian.symbolic import from_lagrangian  # noqa: E402

AGREE = 1e-12
H = 0.05
AGREE_LAM = AGREE / H
TIGHT = NewtonOptions(tol=1e-14)
MASS = [[2.0, 0.3, 0.0, 0.1], [0.3, 1.0, 0.2, 0.0], [0.0, 0.2, 1.5, 0.0], [0.1, 0.0, 0.0, 1.0]]

#: The compiled configurations: θ-maps (generic θ, Euler B, the midpoint in null-space
#: form), RATTLE and the extrinsic Euler B∘A (joint solve).
METHODS = {
    "theta-0.3": lambda **kw: dm.DiscretizationMapMethod(0.3, **kw),
    "euler-b": lambda **kw: dm.DiscretizationMapMethod(1.0, **kw),
    "midpoint-nullspace": lambda **kw: dm.DiscretizationMapMethod(0.5, nullspace=True, **kw),
    "rattle": lambda **kw: dm.Rattle(**kw),
    "extrinsic-euler-ba": lambda **kw: dm.ExtrinsicEulerBA(**kw),
}


@pytest.fixture(scope="module")
def pendula():
    """The two coupled pendula of the module docstring (from ``from_lagrangian``)."""
    q = sp.symbols("x1 y1 x2 y2")
    v = sp.symbols("u1 w1 u2 w2")
    M = sp.Matrix(MASS)
    vv = sp.Matrix(v)
    T = (vv.T * M * vv)[0, 0] / 2
    V = q[1] + q[3] + (q[0] - q[2]) ** 2 / 2 + q[0] ** 4 / 10
    phi = [(q[0] ** 2 + q[1] ** 2 - 1) / 2, (q[2] ** 2 + q[3] ** 2 - 1) / 2]
    return from_lagrangian(T - V, list(q), list(v), holonomic=phi)


def _state(a, b, wa, wb):
    """A point of TN: the angles a, b from the downward vertical, angular rates wa, wb."""
    a, b, wa, wb = (np.asarray(x, float) for x in (a, b, wa, wb))
    q = np.stack([np.sin(a), -np.cos(a), np.sin(b), -np.cos(b)], axis=-1)
    v = np.stack([wa * np.cos(a), wa * np.sin(a), wb * np.cos(b), wb * np.sin(b)], axis=-1)
    return q, v


Q0, V0 = _state(0.7, -0.4, 0.5, 1.1)


def _batch(b=4, seed=11):
    rng = np.random.default_rng(seed)
    return _state(*(x0 + 0.2 * rng.standard_normal(b) for x0 in (0.7, -0.4, 0.5, 1.1)))


def _run(system, name, backend, q0=Q0, v0=V0, n=100, newton=TIGHT):
    method = METHODS[name](newton=newton, backend=backend)
    return integrate(system, method, q0, v0, h=H, n_steps=n)


def _agree(a, b):
    assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
    assert a.success and b.success, (a.message, b.message)
    assert a.q.shape == b.q.shape
    for f in ("t", "q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
    assert np.max(np.abs(a.lam - b.lam)) <= AGREE_LAM
    assert b.stats["max_constraint_residual"] <= 1e-13


@pytest.mark.parametrize("name", sorted(METHODS))
def test_compiled_agrees_with_numpy_single(pendula, name):
    a, b = _run(pendula, name, "numpy"), _run(pendula, name, "numba")
    _agree(a, b)
    # the same Newton iterations: the compiled Jacobian is the numpy one
    assert b.stats["newton_iterations"] == a.stats["newton_iterations"]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_compiled_agrees_with_numpy_batched(pendula, name):
    q0, v0 = _batch()
    a, b = _run(pendula, name, "numpy", q0, v0), _run(pendula, name, "numba", q0, v0)
    _agree(a, b)
    assert b.stats["newton_iterations"] == a.stats["newton_iterations"]


def test_step_and_compositions(pendula):
    """``Method.step`` runs the compiled step (``info["backend"]``), and a composition of
    compiled members (``euler_ba``, the triple jump of RATTLE) runs every sub-step compiled."""
    ref = _run(pendula, "rattle", "numpy", n=5)
    m = dm.Rattle(newton=TIGHT, backend="numba")
    st = m.initial_state(pendula, Q0, V0)
    for _ in range(5):
        st = m.step(pendula, st, H)
    assert st.info["backend"] == "numba" and st.n == 5
    assert np.max(np.abs(st.q - ref.q[-1])) <= AGREE
    assert np.max(np.abs(st.lam - ref.lam[-1])) <= AGREE_LAM
    for make in (lambda b: dm.Composition(
            methods=(dm.DiscretizationMapMethod(0.0, newton=TIGHT, backend=b),
                     dm.DiscretizationMapMethod(1.0, newton=TIGHT, backend=b)),
            weights=(0.5, 0.5), order=2, symmetric=True),
                 lambda b: dm.triple_jump(dm.Rattle(newton=TIGHT, backend=b))):
        a = integrate(pendula, make("numpy"), Q0, V0, h=H, n_steps=20)
        b = integrate(pendula, make("numba"), Q0, V0, h=H, n_steps=20)
        assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
        for f in ("q", "v", "p"):
            assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f


def test_backend_selection(pendula):
    """"auto" compiles for a system with kernels and keeps numpy for a plain one; "numba"
    then says how to get kernels, and names the configurations without a compiled path."""
    assert _run(pendula, "rattle", "auto", n=2).stats["backend"] == "numba"
    assert _run(pendula, "rattle", "numpy", n=2).stats["backend"] == "numpy"
    plain = dlt.spherical_pendulum()
    q0, v0 = np.array([0.6, 0.0, -0.8]), np.array([0.0, 1.0, 0.0])
    sol = integrate(plain, dm.rattle(), q0, v0, h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="from_lagrangian"):
        integrate(plain, dm.Rattle(backend="numba"), q0, v0, h=H, n_steps=2)
    fd = NewtonOptions(tol=1e-14, finite_differences=True)
    with pytest.raises(BackendError, match="finite_differences"):
        _run(pendula, "theta-0.3", "numba", n=2, newton=fd)
    assert _run(pendula, "theta-0.3", "auto", n=2, newton=fd).stats["backend"] == "numpy"
    # a forced system runs on numpy
    q, v = sp.symbols("x y"), sp.symbols("u w")
    forced = from_lagrangian((v[0] ** 2 + v[1] ** 2) / 2 - q[1], list(q), list(v),
                             holonomic=[(q[0] ** 2 + q[1] ** 2 - 1) / 2],
                             force=[-0.1 * v[0], -0.1 * v[1]])
    fq0, fv0 = np.array([0.6, -0.8]), np.array([0.8, 0.6])
    with pytest.raises(BackendError, match="forced system"):
        integrate(forced, dm.Rattle(backend="numba"), fq0, fv0, h=H, n_steps=2)
    sol = integrate(forced, dm.rattle(), fq0, fv0, h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numpy"
    # the stage-constrained baseline has no compiled step at all
    with pytest.raises(BackendError, match="no compiled path yet"):
        dm.StageConstrainedBaseline(backend="numba")


def test_compiled_newton_failure(pendula):
    """A Newton failure in compiled code ends the run like the numpy path (success False,
    the ConvergenceError message naming step, time and residual); ``Method.step`` raises."""
    one = NewtonOptions(max_iter=1, tol=1e-14)
    a, b = _run(pendula, "rattle", "numpy", n=5, newton=one), _run(
        pendula, "rattle", "numba", n=5, newton=one)
    assert not a.success and not b.success
    assert "step 0" in b.message and "residual" in b.message
    assert len(b.t) == len(a.t) == 1
    m = dm.Rattle(newton=one, backend="numba")
    with pytest.raises(ConvergenceError, match="residual"):
        m.step(pendula, m.initial_state(pendula, Q0, V0), H)
