"""DSOCS models: particle with prescribed curvature, inertia wheel pendulum."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.examples.models import curvature_particle, inertia_wheel


def test_particle_exact_solution_solves_the_ode():
    t = np.linspace(0.0, 4.0, 401)
    q, v = curvature_particle.exact(t)
    rhs = curvature_particle.ode_rhs()
    f = np.array([rhs(0.0, np.concatenate([qi, vi])) for qi, vi in zip(q, v)])
    dt = t[1] - t[0]
    # Central difference on a circle of radius 1 at angular speed ω = √2: the error is
    # exactly |x⁽³⁾|·(1 − sin(ω dt)/(ω dt))/ω² ≤ ω³dt²/6 for q and ω⁴dt²/6 for v (Taylor,
    # derived; measured 4.714e-5 and 6.667e-5, i.e. the bound to 4 digits), plus the rounding
    # of the difference quotient, 4·eps·max|x|/dt.
    w = np.sqrt(2.0)
    rounding = 4 * np.finfo(float).eps * 2.0 / dt
    np.testing.assert_allclose((q[2:] - q[:-2]) / (2 * dt), f[1:-1, :2], rtol=0,
                               atol=w**3 * dt**2 / 6 + rounding)
    np.testing.assert_allclose((v[2:] - v[:-2]) / (2 * dt), f[1:-1, 2:], rtol=0,
                               atol=w**4 * dt**2 / 6 + rounding)
    E = curvature_particle.energy(v)
    # measured (1 run(s), threads 1 & unset): worst |diff| 2.2e-16 vs allowed 1e-07,
    # margin 4.5e+08 (loose)
    np.testing.assert_allclose(E, 1.0, atol=1e-14)
    # a circle of radius |v|/(k|v|)·... = 1/k through the origin
    centre = np.array([-np.sqrt(2) / 2, np.sqrt(2) / 2])
    # measured (1 run(s), threads 1 & unset): worst |diff| 4.4e-16 vs allowed 1e-07,
    # margin 2.25e+08 (loose)
    np.testing.assert_allclose(np.linalg.norm(q - centre, axis=1), 1.0, atol=1e-14)


def test_particle_starts():
    h = 0.01
    exact = curvature_particle.start(h, "exact")
    e_paper = np.linalg.norm(curvature_particle.start(h, "paper") - exact)
    e_second = np.linalg.norm(curvature_particle.start(h, "second_order") - exact)
    assert e_paper == pytest.approx(0.5 * h**2 * 2, rel=0.01)  # ½h²|a0|, |a0| = 2
    # measured (1 run(s), threads 1 & unset): worst 4.71e-07 vs 1e-05, margin 21.2
    assert e_second < 1e-5
    with pytest.raises(ValueError, match="start kind must be"):
        curvature_particle.start(h, "fancy")


def test_particle_trajectory_and_dsocs_agree():
    h = 0.1
    fast = curvature_particle.trajectory(h, 50)
    generic = curvature_particle.dsocs(h).trajectory(fast[0], fast[1], 50)
    assert fast.shape == (51, 2)
    # measured (1 run(s), threads 1 & unset): worst |diff| 3.2e-15 vs allowed 3.7e-09,
    # margin 1.15e+06 (loose)
    np.testing.assert_allclose(generic, fast, atol=1e-12)


def test_wheel_initial_lyapunov_value_and_monotone_reference():
    V0 = inertia_wheel.lyapunov(inertia_wheel.Q0, inertia_wheel.V0)
    assert V0 == pytest.approx(14770.1624508, rel=1e-10)  # paper §4.2, Figs. 4–6 (indep. check)
    ref = inertia_wheel.reference(20.0)
    y = ref(np.linspace(0.0, 20.0, 2001))
    V = inertia_wheel.lyapunov(y[:2].T, y[2:].T)
    assert np.all(np.diff(V) <= 1e-6 * V[:-1])
    assert np.all(inertia_wheel.dissipation(y[:2].T, y[2:].T) >= 0)
    assert V[-1] < V[0]


def test_wheel_starts_and_trajectory():
    h = 0.02
    q1 = inertia_wheel.start(h, "second_order")
    ref = inertia_wheel.reference(0.1)
    # measured (1 run(s), threads 1 & unset): worst 2.26e-05 vs 0.0001, margin 4.43
    assert np.linalg.norm(q1 - ref(h)[:2]) < 1e-4
    # measured (1 run(s), threads 1 & unset): worst 0.107 vs 0.001, margin 107
    assert np.linalg.norm(inertia_wheel.start(h, "paper") - ref(h)[:2]) > 1e-3
    nodes = inertia_wheel.trajectory(h, 100)
    assert nodes.shape == (101, 2) and np.all(np.isfinite(nodes))
    generic = inertia_wheel.dsocs(h).trajectory(nodes[0], nodes[1], 100)
    # measured (1 run(s), threads 1 & unset): worst |diff| 6.6e-15 vs allowed 2.4e-08,
    # margin 3.7e+06 (loose)
    np.testing.assert_allclose(generic, nodes, atol=1e-9)
    with pytest.raises(ValueError, match="start kind must be"):
        inertia_wheel.start(h, "fancy")
