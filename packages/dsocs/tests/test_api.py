"""Protocol, shapes, batching and error messages of chetaev.dsocs."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import ConvergenceError, InputError, integrate
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.dsocs import (
    DSOCS,
    DSOCSConvergenceError,
    DSOCSInputError,
    DSOCSIntegrator,
    KinematicConstraint,
    TwoPointLagrangian,
    VariationalConstraint,
    convergence_study,
    curvature_particle_dsocs,
    inertia_wheel_dsocs,
)


def k_var(q):
    q = np.asarray(q, float)
    return 1.0 + 0.5 * q[..., 0] - 0.3 * q[..., 1]


def test_error_hierarchy():
    assert issubclass(DSOCSInputError, InputError) and issubclass(DSOCSInputError, ValueError)
    assert issubclass(DSOCSConvergenceError, ConvergenceError)
    assert issubclass(DSOCSConvergenceError, RuntimeError)


def test_batched_generic_step_matches_single_steps():
    ds = curvature_particle_dsocs(k_var, 0.05, closed_form=False)
    rng = np.random.default_rng(0)
    q0 = rng.normal(size=(3, 2)) * 0.3
    q1 = q0 + 0.05 * rng.normal(size=(3, 2))
    q2, _ = ds.step(q0, q1)
    assert q2.shape == (3, 2)
    # Batched Newton vs single Newton: a member may take one more iteration in the batch, so the
    # two agree to the Newton tolerance (1e-12 relative), not bitwise; measured 0.0 (threads 1
    # and unset). atol 1e-13 with the default rtol 1e-7: an effective bound ≥ 1.6e-8, loose.
    for i in range(3):
        np.testing.assert_allclose(q2[i], ds.step(q0[i], q1[i])[0], atol=1e-13)


def test_integrate_an_ensemble():
    h = 0.05
    ds = curvature_particle_dsocs(k_var, h)
    q0 = np.zeros((4, 2))
    v0 = np.stack([[np.cos(a), np.sin(a)] for a in (0.0, 1.0, 2.0, 3.0)])
    sol = integrate(ds, DSOCSIntegrator(start="second_order"), q0, v0, h, n_steps=50)
    assert sol.success and sol.q.shape == (51, 4, 2) and sol.v.shape == (51, 4, 2)
    single = integrate(ds, DSOCSIntegrator(start="second_order"), q0[2], v0[2], h, n_steps=50)
    # ensemble vs single run, 50 Newton steps: measured 0.0; loose (default rtol 1e-7)
    np.testing.assert_allclose(sol.q[:, 2], single.q, atol=1e-12)


def test_failed_step_becomes_an_unsuccessful_trajectory():
    Ld = TwoPointLagrangian.mechanical(np.eye(2), lambda q: np.zeros(np.shape(q)), 0.1)
    # D_K = {|q2|² + 1 = 0} has no real point: Newton cannot converge
    ds = DSOCS(Ld, lambda q0, q1, q2: (np.sum(q2 * q2, -1) + 1.0)[..., None],
               VariationalConstraint(basis=lambda q0, q1, q2: np.array([[1.0, 0.0]]),
                                     depends_on=()), h=0.1, max_deflations=1)
    sol = integrate(ds, DSOCSIntegrator(start="paper"), np.zeros(2), np.ones(2), 0.1,
                    n_steps=5)
    assert not sol.success
    assert "Newton did not converge at step 0" in sol.message
    assert "Try:" in sol.message
    with pytest.raises(DSOCSConvergenceError, match="halve h"):
        ds.step(np.zeros(2), np.ones(2) * 0.1)
    with pytest.raises(DSOCSConvergenceError, match=r"at step 1 \(t = 0.1\)"):
        ds.trajectory(np.zeros(2), np.ones(2) * 0.1, 5)


def test_root_filter_rejecting_everything_raises():
    ds = curvature_particle_dsocs(1.0, 0.1, closed_form=False)
    ds = DSOCS(ds.discrete_lagrangian, ds.kinematic_constraint, ds.variational_constraint,
               h=0.1, root_filter=lambda q0, q1, q2: np.zeros(np.shape(q2)[:-1], bool),
               max_deflations=1)
    with pytest.raises(DSOCSConvergenceError, match="rejected by root_filter"):
        ds.step(np.zeros(2), np.array([0.1, 0.1]))


def test_bad_input_messages():
    ds = curvature_particle_dsocs(1.0, 0.1)
    with pytest.raises(DSOCSInputError, match=r"q1 must have shape \(\.\.\., 2\)"):
        ds.step(np.zeros(2), np.zeros(3))
    with pytest.raises(DSOCSInputError, match="NaN or inf"):
        ds.step(np.array([np.nan, 0.0]), np.zeros(2))
    with pytest.raises(DSOCSInputError, match="exactly one of basis"):
        VariationalConstraint()
    with pytest.raises(DSOCSInputError, match="start must be 'paper', 'second_order'"):
        DSOCSIntegrator(start="taylor")
    with pytest.raises(DSOCSInputError, match="build the DSOCS with the same step"):
        integrate(ds, DSOCSIntegrator(), np.zeros(2), np.ones(2), 0.05, n_steps=3)
    with pytest.raises(DSOCSInputError, match="variations_depend_on may contain only"):
        DSOCS.from_continuous(ds.socs.system, ds.socs.constraint, ds.socs.variations, 0.1,
                              variations_depend_on=("x",))
    with pytest.raises(DSOCSInputError, match="callable D1L"):
        DSOCS.from_continuous(object(), ds.socs.constraint, ds.socs.variations, 0.1)
    with pytest.raises(DSOCSInputError, match="problem must be 'particle' or 'inertia_wheel'"):
        convergence_study("pendulum")
    with pytest.raises(DSOCSInputError, match="solver must be 'R-branch'"):
        inertia_wheel_dsocs(0.1, solver="closest")
    with pytest.raises(DSOCSInputError, match="must be a finite nonzero number"):
        curvature_particle_dsocs(1.0, 0.0)
    with pytest.raises(DSOCSInputError, match="discrete_lagrangian must be"):
        DSOCS(object(), None, VariationalConstraint(basis=lambda a, b, c: np.eye(2)))


def test_second_order_start_needs_an_acceleration():
    Ld = TwoPointLagrangian.mechanical(np.eye(2), lambda q: np.zeros(np.shape(q)), 0.1)
    ds = DSOCS(Ld, None, VariationalConstraint(basis=lambda a, b, c: np.eye(2), depends_on=()),
               h=0.1)
    with pytest.raises(DSOCSInputError, match="needs the initial acceleration"):
        integrate(ds, DSOCSIntegrator(start="second_order"), np.zeros(2), np.ones(2), 0.1,
                  n_steps=2)
    sol = integrate(ds, DSOCSIntegrator(start="second_order", acceleration=lambda q, v: 0 * q),
                    np.zeros(2), np.ones(2), 0.1, n_steps=10)
    np.testing.assert_allclose(sol.q[-1], [1.0, 1.0], atol=1e-13)  # free motion is exact
    # a DSOCS without its own h runs with the step's h (the method takes h from step only):
    # the same nodes as with h = 0.1; node 0 holds the given v0 (the start waits for h)
    no_h = DSOCS(Ld, None, VariationalConstraint(basis=lambda a, b, c: np.eye(2), depends_on=()))
    ref = integrate(ds, DSOCSIntegrator(start="paper"), np.zeros(2), np.ones(2), 0.1, n_steps=4)
    sol = integrate(no_h, DSOCSIntegrator(start="paper"), np.zeros(2), np.ones(2), 0.1,
                    n_steps=4)
    assert sol.success, sol.message
    np.testing.assert_array_equal(sol.q, ref.q)
    np.testing.assert_array_equal(sol.v[1:], ref.v[1:])
    np.testing.assert_array_equal(sol.v[0], np.ones(2))


def test_kinematic_constraint_finite_difference_jacobians():
    g = KinematicConstraint(lambda q0, q1, q2: (np.sum(q0 * q1, -1) + q2[..., 0] ** 3)[..., None])
    q0, q1, q2 = np.array([0.1, 0.2]), np.array([0.3, -0.4]), np.array([0.5, 0.6])
    J0, J1, J2 = g.jacobians(q0, q1, q2)
    # measured (1 run(s), threads 1 & unset): worst |diff| 3.4e-12 vs allowed 4.1e-08,
    # margin 1.2e+04 (loose)
    np.testing.assert_allclose(J0, [[0.3, -0.4]], atol=1e-9)
    # measured (1 run(s), threads 1 & unset): worst |diff| 7.4e-13 vs allowed 1.1e-08,
    # margin 1.49e+04 (loose)
    np.testing.assert_allclose(J1, [[0.1, 0.2]], atol=1e-9)
    # measured (1 run(s), threads 1 & unset): worst |diff| 6.2e-12 vs allowed 7.6e-08,
    # margin 1.23e+04 (loose)
    np.testing.assert_allclose(J2, [[0.75, 0.0]], atol=1e-9)


def test_restart_from_a_saved_trajectory_is_bit_for_bit(tmp_path):
    from chetaev.discrete_lagrangian import Trajectory

    h = 0.05
    ds = curvature_particle_dsocs(k_var, h)
    m = DSOCSIntegrator(start="second_order")
    first = integrate(ds, m, np.zeros(2), np.ones(2), h, n_steps=40)
    first.save(tmp_path / "run.npz")
    cont = integrate(ds, m, Trajectory.load(tmp_path / "run.npz").final_state(), h=h,
                     n_steps=40)
    full = integrate(ds, m, np.zeros(2), np.ones(2), h, n_steps=80)
    # bitwise by design: the .npz round-trip restores the state exactly and the restart runs the
    # same method on the same inputs and batch size, i.e. the same floating-point operations
    # (measured max|diff| = 0, threads 1 and unset)
    np.testing.assert_array_equal(cont.q[-1], full.q[-1])
    np.testing.assert_array_equal(cont.v[-1], full.v[-1])


def test_problem_specific_solver_reports_its_measured_residual():
    """The closed-form/R-branch solvers' residual of eq. (4) is evaluated, not assumed 0,
    and a solver returning a non-finite point raises (no silent NaN)."""
    h = 0.05
    ds = curvature_particle_dsocs(k_var, h)  # closed-form step
    q0 = np.array([0.1, -0.2])
    q1 = q0 + h * np.array([0.6, 0.8])
    q2, info = ds.step(q0, q1)
    assert info["residual"] == float(np.max(np.abs(ds.residual(q0, q1, q2))))
    # measured (1 run(s), threads 1 & unset): worst 2.66e-15 vs 1e-13, margin 37.5
    assert 0.0 <= info["residual"] < 1e-13
    wheel = inertia_wheel_dsocs(0.1)
    q0w = np.array([0.3, 0.0])
    q1w = q0w + 0.1 * np.array([0.1, 0.2])
    q2w, info = wheel.step(q0w, q1w)
    # rows of size Σ|∂g/∂q2| ≈ 2e10: measured residual 5.8e-8, i.e. 3e-18 relative
    sens = np.abs(wheel.jacobian_q2(q0w, q1w, q2w)).sum(-1)
    assert 0.0 < info["residual"] <= 1e-16 * np.max(sens)
    bad = DSOCS(ds.discrete_lagrangian, ds.kinematic_constraint, ds.variational_constraint,
                h=h, solver=lambda q0, q1: np.full(np.shape(q1), np.nan))
    with pytest.raises(DSOCSConvergenceError, match=r"step 7 \(t = 0.35\).*non-finite"):
        bad.step(q0, q1, step_index=7, t=0.35)


def test_model_functions_check_their_inputs():
    """Bad nodes, steps and options raise DSOCSInputError (no silent NaN or broadcasting)."""
    from chetaev.dsocs import (
        iwp_physical_step,
        iwp_trajectory,
        particle_closed_form_step,
        particle_discrete_circle,
        particle_residual,
    )

    q0, q1 = np.zeros((3, 2)), np.full((3, 2), 0.1)
    with pytest.raises(DSOCSInputError, match="h must be a finite nonzero"):
        particle_closed_form_step(q0, q1, 0.0, 1.0)
    with pytest.raises(DSOCSInputError, match=r"q1 must have shape \(\.\.\., 2\)"):
        particle_closed_form_step(q0, q1[:, :1], 0.1, 1.0)
    with pytest.raises(DSOCSInputError, match="do not broadcast"):
        particle_residual(q0, q1[:2], q1, 0.1, 1.0)
    with pytest.raises(DSOCSInputError, match="q0 contains NaN"):
        iwp_physical_step(q0 * np.nan, q1, 0.1)
    with pytest.raises(DSOCSInputError, match="h must be a finite nonzero"):
        iwp_physical_step(q0, q1, np.nan)
    with pytest.raises(DSOCSInputError, match="finite nonzero curvature"):
        particle_discrete_circle(q0, q1, 0.0)
    with pytest.raises(DSOCSInputError, match="rule must be 'R-branch' or 'paper'"):
        iwp_trajectory(q0[0], q1[0], 0.1, 10, rule="Paper")
    with pytest.raises(DSOCSInputError, match=r"shape \(2,\)"):
        iwp_trajectory(q0, q1, 0.1, 10)


def test_exact_particle_solution_takes_a_batch():
    from chetaev.dsocs import particle_exact_solution

    t = np.linspace(0.0, 2.0, 5)
    q0 = np.array([[0.0, 0.0], [1.0, -1.0]])
    v0 = np.array([[1.0, 0.0], [0.3, 0.4]])
    q, v = particle_exact_solution(t, 2.0, q0, v0)
    assert q.shape == v.shape == (5, 2, 2)
    for i in range(2):
        qi, vi = particle_exact_solution(t, 2.0, q0[i], v0[i])
        # the same elementwise formula on a batch: equal up to the ulp differences of numpy's
        # SIMD vs scalar sin/cos (measured 0.0): a rounding bound of the few chained operations
        # (the former absolute 1e-15 was ≈ 2 ulps of |q| ≈ 2, tighter than its rounding)
        assert_rounding_close(q[:, i], qi, n_ops=4, what="q")
        assert_rounding_close(v[:, i], vi, n_ops=4, what="v")
    # constant speed |v0| along the circle
    speed = np.broadcast_to(np.linalg.norm(v0, axis=-1), (5, 2))
    # |v| after the rotation of v0: a 2-term norm of rotated components (measured 1.1e-16)
    assert_rounding_close(np.linalg.norm(v, axis=-1), speed, n_terms=2, n_ops=2, what="|v|")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"tol": -1.0}, "tol must be a finite positive"), ({"tol": np.nan}, "tol must be"),
     ({"max_iter": 0}, r"max_iter must be an integer >= 1"),
     ({"max_deflations": -1}, r"max_deflations must be an integer >= 0"),
     ({"h": 0.0}, "h must be a finite nonzero"),
     ({"solver": "closed"}, "solver must be a callable"),
     ({"root_filter": 3}, "root_filter must be a callable")],
)
def test_dsocs_options_are_checked(kwargs, match):
    ds = curvature_particle_dsocs(k_var, 0.05, closed_form=False)
    with pytest.raises(DSOCSInputError, match=match):
        DSOCS(ds.discrete_lagrangian, ds.kinematic_constraint, ds.variational_constraint,
              **kwargs)


def test_integrator_order_is_not_claimed_for_a_custom_start():
    assert DSOCSIntegrator(start="paper").order == 1
    assert DSOCSIntegrator(start="second_order").order == 2
    assert DSOCSIntegrator(start=lambda q0, v0, h: q0 + h * v0).order is None


def test_constraint_objects_check_their_arguments():
    basis = lambda q0, q1, q2: np.array([[1.0, 0.0]])  # noqa: E731
    with pytest.raises(DSOCSInputError, match=r"depends_on must list the slots 0, 1, 2"):
        VariationalConstraint(basis=basis, depends_on=(3,))
    with pytest.raises(DSOCSInputError, match="basis/annihilator must be a callable"):
        VariationalConstraint(basis=np.eye(2))
    with pytest.raises(DSOCSInputError, match="g must be a callable"):
        KinematicConstraint(np.zeros(1))
    assert VariationalConstraint(basis=basis, depends_on=[2, 1, 1]).depends_on == (1, 2)
