"""The worked example of docs/architecture.rst ("How to add a method") runs and is right.

``architecture_example.py`` is included verbatim in the docs, so it cannot rot: it is a
:class:`Method` subclass that ``integrate`` runs, it computes the same map as
``DiscreteEulerLagrange("alpha", alpha=0.0)`` (the same discrete Lagrangian solved for another
unknown) and it has order 1 against an independent reference on a nonlinear problem.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    DiscreteEulerLagrange,
    InputError,
    Method,
    NewtonOptions,
    integrate,
    reference_solution,
)
from chetaev.discrete_lagrangian.testing import double_pendulum, fit_order, henon_heiles

_PATH = pathlib.Path(__file__).with_name("architecture_example.py")


def _example():
    spec = importlib.util.spec_from_file_location("architecture_example", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("architecture_example", mod)
    spec.loader.exec_module(mod)
    return mod


def test_example_is_short_and_a_method():
    lines = _PATH.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 100
    method = _example().SymplecticEuler()
    assert isinstance(method, Method)
    assert (method.name, method.order, method.symmetric) == ("symplectic Euler (example)", 1,
                                                             False)


@pytest.mark.parametrize("make", [double_pendulum, henon_heiles])
def test_example_is_the_alpha_zero_discrete_euler_lagrange(make):
    """Both solve p_k = −D1L_d(q_k, q_{k+1}) for L_d = h L(q0, (q1 − q0)/h) to the Newton
    tolerance (tol = 1e-12 relative), in w = (q1 − q0)/h and in q1. Measured over 5 random
    initial conditions × h ∈ {0.1, 0.05, 0.02, 0.01} × 50 steps on both problems (with
    OPENBLAS_NUM_THREADS=1 and unset): worst max|Δ(q, p)| / max(1, |q|, |p|) = 1.34e-11;
    the bound 50 steps × tol × 10 = 5e-10 leaves a margin of 37."""
    q0, v0 = np.array([1.0, -0.5]), np.array([0.3, 0.8])
    if make is henon_heiles:
        q0, v0 = np.array([0.1, -0.2]), np.array([0.4, 0.3])
    system = make()
    tol = NewtonOptions().tol
    for h in (0.1, 0.02):
        a = integrate(system, _example().SymplecticEuler(), q0, v0, h=h, n_steps=50)
        b = integrate(system, DiscreteEulerLagrange("alpha", alpha=0.0), q0, v0, h=h,
                      n_steps=50)
        assert a.success and b.success
        np.testing.assert_array_equal(a.t, b.t)
        scale = max(1.0, np.abs(a.q).max(), np.abs(a.p).max())
        diff = max(np.abs(a.q - b.q).max(), np.abs(a.p - b.p).max()) / scale
        assert diff <= 50 * tol * 10, diff


def test_example_has_order_one():
    """Against scipy DOP853 (rtol 1e-13) on the double pendulum; measured slope 0.97."""
    system = double_pendulum()
    q0, v0, T = np.array([1.0, -0.5]), np.array([0.3, 0.8]), 1.0
    ref = reference_solution(system, q0, v0, [0.0, T])
    hs = [0.05, 0.025, 0.0125]
    errs = []
    for h in hs:
        tr = integrate(system, _example().SymplecticEuler(), q0, v0, h=h, t_final=T)
        errs.append(max(np.abs(tr.q[-1] - ref.q[-1]).max(), np.abs(tr.p[-1] - ref.p[-1]).max()))
    assert abs(fit_order(hs, errs) - 1) <= 0.25, errs


def test_example_gets_the_base_bookkeeping():
    """The h rule, the counter and the time come from Method.step, not from the example."""
    system = henon_heiles()
    method = _example().SymplecticEuler()
    s0 = method.initial_state(system, [0.1, -0.2], [0.4, 0.3], t0=1.0)
    for bad in (0.0, np.nan, np.inf):
        with pytest.raises(InputError, match="step size `h`"):
            method.step(system, s0, bad)
    s1 = method.step(system, s0, -0.1)
    assert s1.n == 1 and s1.t == 0.9
    with pytest.raises(InputError, match="finite"):
        method.initial_state(system, [np.nan, 0.0], [0.4, 0.3])
