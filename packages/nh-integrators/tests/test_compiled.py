"""The compiled backend (issue 17) of NonholonomicPRK: the Lagrangian form (eq. (14), App. D)
and the Hamiltonian form (eq. (15), App. E).

The compiled step solves eq. (14) with the unknowns ``[V^1..V^s, Lambda^2..Lambda^s]``, the
initial guess and the Newton stopping rule of the numpy path; with ``NewtonOptions(tol=1e-14)``
both stop within ``max(1e-14, 64 eps)·(1 + max(|p|, |v|))`` of the same root, so over 100 steps
they agree to 1e-12 (the brief's bound; measured 2.2e-16 in q, v, p and 1.1e-14 in lambda on
the particle, single trajectory). One module (particle, Lobatto-3) is compiled per session.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import NewtonOptions, integrate, reference_solution  # noqa: E402
from chetaev.discrete_lagrangian.extending import MEMORY_KEY, BackendError  # noqa: E402
from chetaev.discrete_lagrangian.symbolic import from_lagrangian  # noqa: E402
from chetaev.discrete_lagrangian.testing import (  # noqa: E402
    fit_order,
    harmonic_nonholonomic_particle,
)
from chetaev.nh_integrators import NonholonomicPRK  # noqa: E402

AGREE = 1e-12
# lambda enters eq. (14) only through h â_ij D2Phi^T Lambda^j: a residual difference of
# 1e-12-size (both solves stop at max(tol, 64 eps)·scale) moves lambda by up to ~1/h times
# more. Bound AGREE / h (1e-11 at h = 0.1); measured worst 1.39e-12 (batch of 5, seed 3, when
# the numpy batch used the structured Newton matrix and the compiled one the analytic
# Jacobian), margin 7.
AGREE_LAM = AGREE / 0.1
TIGHT = NewtonOptions(tol=1e-14)
Q0 = np.array([1.0, 0.5, 0.0])
V0 = np.array([0.5, 1.0, 0.25])  # v_z = y v_x


@pytest.fixture(scope="module")
def particle():
    """The nonholonomic particle of §7.1: L = |v|²/2 − (x² + y²)/2, v_z − y v_x = 0."""
    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    L = (vx**2 + vy**2 + vz**2) / 2 - (x**2 + y**2) / 2
    return from_lagrangian(L, [x, y, z], [vx, vy, vz], nonholonomic=[vz - y * vx])


def _run(system, backend, q0=Q0, v0=V0, n=100, h=0.1, newton=TIGHT, **kw):
    method = NonholonomicPRK(3, newton=newton, backend=backend, **kw)
    return integrate(system, method, q0, v0, h=h, n_steps=n)


def _batch(b=5, seed=3):
    rng = np.random.default_rng(seed)
    q0 = Q0 + 0.3 * rng.standard_normal((b, 3))
    v0 = V0 + 0.3 * rng.standard_normal((b, 3))
    v0[:, 2] = q0[:, 1] * v0[:, 0]  # on the constraint
    return q0, v0


def test_compiled_agrees_with_numpy_single(particle):
    a, b = _run(particle, "numpy"), _run(particle, "numba")
    assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
    assert a.success and b.success
    for f in ("t", "q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
    assert np.max(np.abs(a.lam - b.lam)) <= AGREE_LAM
    assert b.stats["max_constraint_residual"] == pytest.approx(
        a.stats["max_constraint_residual"], abs=AGREE)


def test_compiled_agrees_with_numpy_batched(particle):
    q0, v0 = _batch()
    a, b = _run(particle, "numpy", q0, v0), _run(particle, "numba", q0, v0)
    assert b.q.shape == a.q.shape == (101, 5, 3) and b.lam.shape == (101, 5, 1)
    for f in ("q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
    assert np.max(np.abs(a.lam - b.lam)) <= AGREE_LAM


@pytest.mark.parametrize(
    ("reuse", "newton"),
    [("auto", TIGHT), ("structured", TIGHT), ("step", TIGHT), ("iteration", TIGHT),
     # a refresh rate no matrix meets: every fresh structured matrix hands over to the
     # analytic Jacobian (the fallback of STRUCTURED_MATRIX), rebuilt at every iteration
     ("structured", NewtonOptions(tol=1e-14, refresh_rate=1e-300))],
)
def test_compiled_newton_matrices_agree(particle, reuse, newton):
    """Every Newton matrix of the compiled Lagrangian form converges to the same root: the
    structured matrix ("auto", "structured": no LU of the N x N Jacobian, Schur complement on
    the multipliers), its fallback, and the analytic Jacobian ("step", "iteration"), against
    the numpy path's analytic Jacobian, single and batched, over 100 steps (the bounds of
    the agreement tests above)."""
    q0, v0 = _batch()
    for q, v in ((Q0, V0), (q0, v0)):
        a = _run(particle, "numpy", q, v, jacobian_reuse="step")
        b = _run(particle, "numba", q, v, newton=newton, jacobian_reuse=reuse)
        assert b.stats["backend"] == "numba" and a.success and b.success
        for f in ("q", "v", "p"):
            assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
        assert np.max(np.abs(a.lam - b.lam)) <= AGREE_LAM


def test_compiled_step(particle):
    m = NonholonomicPRK(3, newton=TIGHT, backend="numba")
    ref = _run(particle, "numpy", n=5)
    st = m.initial_state(particle, Q0, V0)
    for _ in range(5):
        st = m.step(particle, st, 0.1)
    assert st.info["backend"] == "numba"
    assert np.max(np.abs(st.q - ref.q[-1])) <= AGREE
    assert np.max(np.abs(st.lam - ref.lam[-1])) <= AGREE


@pytest.mark.parametrize("form", ["lagrangian", "hamiltonian"])
def test_order_compiled(particle, form):
    """Order 2s − 2 = 4 in q and p on the compiled backend (both forms), against DOP853."""
    T = 2.0
    ref = reference_solution(particle, Q0, V0, [0.0, T])
    hs = [0.2, 0.1, 0.05, 0.025]
    errs = []
    for h in hs:
        tr = _run(particle, "numba", n=round(T / h), h=h, newton=NewtonOptions(), form=form)
        assert tr.stats["backend"] == "numba"
        errs.append(max(np.max(np.abs(tr.q[-1] - ref.q[-1])),
                        np.max(np.abs(tr.p[-1] - ref.p[-1]))))
    assert abs(fit_order(hs, errs, 1e-11) - 4) <= 0.25, errs


def test_backend_selection(particle):
    assert _run(particle, "auto", n=2).stats["backend"] == "numba"
    plain = harmonic_nonholonomic_particle()
    assert _run(plain, "auto", n=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="from_lagrangian"):
        _run(plain, "numba", n=2)
    # configurations without a compiled path: numpy under "auto", an error under "numba"
    assert _run(particle, "auto", n=2, multiplier_rule="carry").stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="carry"):
        _run(particle, "numba", n=2, multiplier_rule="carry")


def test_step_linearization_of_a_compiled_method(particle):
    """A method that steps compiled still linearizes: ``step_linearization`` takes its step on
    the numpy path (the compiled step keeps no Newton matrix), so it returns the same
    linearization as ``backend="numpy"``, against central differences within ``step_fd_rtol``."""
    from chetaev.discrete_lagrangian.testing import step_fd_rtol, step_linearization_error

    method = NonholonomicPRK(3, backend="numba")
    state = method.initial_state(particle, Q0, V0)
    # compiled: no recorded numpy unknowns, only the compiled run's memory between steps
    assert set(method.step(particle, state, 0.1).carry) == {MEMORY_KEY}
    lin, err = step_linearization_error(method, particle, state, 0.1)
    assert err <= step_fd_rtol(0.1)
    ref = NonholonomicPRK(3, backend="numpy").step_linearization(particle, state, 0.1)
    assert np.array_equal(lin.A, ref.A)


# ------------------------------------------------------------ the Hamiltonian form, eq. (15)
@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_hamiltonian_compiled_agrees_with_numpy(particle, batched):
    """The compiled Hamiltonian unknowns [Q, P, Λ²..Λˢ] (``EVAL_QP``) against the numpy
    path's ``unknowns="QP"``: same solution (agreement 1e-15 in q, v, p, 1e-14 in lambda)
    and no more Newton iterations (same unknowns and analytic Jacobian; the compiled guess
    extrapolates up to five past solutions where numpy's uses three: measured 255 against
    386 iterations over 100 steps, single; a Jacobian error would cost extra iterations on
    most of the 100 steps, the bound allows 3 more than numpy's)."""
    q0, v0 = _batch() if batched else (Q0, V0)
    a = _run(particle, "numpy", q0, v0, form="hamiltonian")
    b = _run(particle, "numba", q0, v0, form="hamiltonian")
    assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
    assert a.success and b.success and b.q.shape == a.q.shape
    for f in ("t", "q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
    assert np.max(np.abs(a.lam - b.lam)) <= AGREE_LAM
    assert b.stats["newton_iterations"] <= a.stats["newton_iterations"] + 3
    # the two forms are the same map (paper eq. (15), App. E)
    c = _run(particle, "numba", q0, v0)
    assert np.max(np.abs(c.q - b.q)) <= AGREE



def test_numba_functions_give_kernels(particle):
    """The same particle from the user's own numba functions (issue 17's second route to
    kernels: ``@numba.njit`` callables, one configuration each, ``vectorized=False``; the
    single constraint written without its axis, A(q) -> (3,)): it runs compiled and agrees
    with the numpy path and with the symbolic system's compiled run (bounds above)."""
    import numba
    from chetaev.discrete_lagrangian import systems as sy

    @numba.njit
    def grad(q):
        return np.array([q[0], q[1], 0.0])

    @numba.njit
    def hess(q):
        return np.diag(np.array([1.0, 1.0, 0.0]))

    @numba.njit
    def A(q):
        return np.array([-q[1], 0.0, 1.0])

    @numba.njit
    def dA(q):
        out = np.zeros((3, 3))
        out[0, 1] = -1.0  # [i, j] = ∂A_i/∂q_j
        return out

    mech = sy.MechanicalSystem(np.eye(3), lambda q: 0.5 * (q[..., 0] ** 2 + q[..., 1] ** 2),
                               grad, hess, vectorized=False)
    system = sy.ConstrainedSystem(mech, sy.LinearVelocityConstraint(A, dA=dA,
                                                                    vectorized=False))
    q0, v0 = _batch()
    for q, v in ((Q0, V0), (q0, v0)):
        a, b = _run(system, "numpy", q, v), _run(system, "auto", q, v)
        c = _run(particle, "numba", q, v)
        assert b.stats["backend"] == "numba"
        for ref in (a, c):
            for f in ("q", "v", "p"):
                assert np.max(np.abs(getattr(ref, f) - getattr(b, f))) <= AGREE, f
            assert np.max(np.abs(ref.lam - b.lam)) <= AGREE_LAM
