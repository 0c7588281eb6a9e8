"""DSOCS models: the discrete second-order constrained systems against the continuous
formulations (exact solution, SOCS ODE, closed-loop ODE) on TRAJECTORIES, and the generic
Newton DSOCS against the closed-form / physical-root steps."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("chetaev.examples")

from chetaev.discrete_lagrangian import integrate
from chetaev.examples.models import curvature_particle, inertia_wheel
from scipy.integrate import solve_ivp


def test_particle_exact_solution_and_socs_ode_agree():
    t = np.linspace(0.0, 10.0, 11)
    q, v = curvature_particle.exact(t)
    sol = solve_ivp(curvature_particle.ode_rhs(), (0.0, 10.0),
                    [*curvature_particle.Q0, *curvature_particle.V0], method="DOP853",
                    t_eval=t, rtol=1e-13, atol=1e-13)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.5e-11 vs allowed 4.5e-10, margin 30.1
    np.testing.assert_allclose(sol.y[:2].T, q, atol=1e-10)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.4e-11 vs allowed 4.5e-10, margin 31.5
    np.testing.assert_allclose(sol.y[2:].T, v, atol=1e-10)
    # control: negative curvature turns the other way
    qn, _ = curvature_particle.exact(t, k=-1.0)
    assert np.max(np.abs(qn - q)) > 0.5


@pytest.mark.parametrize("closed_form", [True, False])
def test_particle_dsocs_follows_the_exact_trajectory(closed_form):
    h, tf = 0.01, 5.0
    # the system at any step, the method with the closed-form (or the generic Newton) step
    ds = curvature_particle.dsocs(h, closed_form=False)
    sol = integrate(ds, curvature_particle.method(closed_form=closed_form, start="second_order"),
                    curvature_particle.Q0, curvature_particle.V0, h, t_final=tf)
    assert sol.success
    q, v = curvature_particle.exact(sol.t)
    # second order: measured 1.33e-4 (q) and 1.67e-4 (v); an O(h) start would give ~1e-2
    assert np.max(np.abs(sol.q - q)) < 3e-4
    assert np.max(np.abs(sol.v[1:] - v[1:])) < 3e-4
    fast = curvature_particle.trajectory(h, len(sol.t) - 1, kind="second_order")
    np.testing.assert_allclose(sol.q, fast, atol=1e-10)


def test_wheel_dsocs_follows_the_closed_loop_trajectory():
    h, tf = 0.005, 3.0
    ref = inertia_wheel.reference(tf)
    wheel = inertia_wheel.dsocs(h, solver="newton-unsafe")  # the system; the step: the method
    sol = integrate(wheel, inertia_wheel.method(start="second_order"),
                    inertia_wheel.Q0, inertia_wheel.V0, h, t_final=tf)
    assert sol.success
    y = ref(sol.t)
    # second order: measured 2.9e-5 in θ and 4.5e-3 in ψ (|ψ| up to 155), both a quarter at
    # h/2; the paper's first-order start would give θ errors of about 0.66 h = 3.3e-3
    assert np.max(np.abs(sol.q[:, 0] - y[0])) < 1e-4
    assert np.max(np.abs(sol.q[:, 1] - y[1])) < 1e-2
    # the generic Newton DSOCS (with the root safeguard) gives the same nodes
    nodes = inertia_wheel.trajectory(h, 200, kind="second_order")
    generic = wheel.trajectory(nodes[0], nodes[1], 200,
                               method=inertia_wheel.method(solver="newton"))
    # measured (1 run(s), threads 1 & unset): worst |diff| 2e-12 vs allowed 2.8e-08,
    # margin 1.36e+04 (loose)
    np.testing.assert_allclose(generic, nodes, atol=1e-8)
    # measured (1 run(s), threads 1 & unset): worst |diff| 3.9e-14 vs allowed 2.7e-08,
    # margin 6.76e+05 (loose)
    np.testing.assert_allclose(sol.q[:201], nodes, atol=1e-9)
