"""Every integrator family runs on every model of the holonomic, GNI and DSOCS papers it
applies to: a short run, finite output, constraint residuals at solver tolerance (issue 10).
Families that do not apply must refuse the model with a clear InputError."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("chetaev.examples")

from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    DiscreteEulerLagrange,
    InputError,
    LieVPRK,
    NewtonOptions,
    integrate,
)
from chetaev.discrete_lagrangian.discretization_maps import (
    DiscretizationMapMethod,
    ExtrinsicEulerBA,
    LieDiscretizationMapMethod,
    StageConstrainedBaseline,
    euler_ba,
    rattle,
    triple_jump,
)
from chetaev.examples.models import (
    chaplygin_ball,
    curvature_particle,
    heavy_top,
    inertia_wheel,
    planar_pendulum,
    spherical_pendulum,
)
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

N_STEPS = 8
H = 0.05


def _holonomic_models():
    q, v = planar_pendulum.initial_cartesian()
    yield "planar", planar_pendulum.cartesian_system(), q, v
    yield "spherical", spherical_pendulum.cartesian_system(), spherical_pendulum.Q0, \
        spherical_pendulum.V0
    q9, v9 = heavy_top.initial_matrix()
    yield "heavy-top-R3x3", heavy_top.matrix_system(), q9, v9


HOLONOMIC = list(_holonomic_models())
EUCLIDEAN_METHODS = [
    ConstrainedPRK(lobatto_iiia_iiib(2)),
    ConstrainedPRK(lobatto_iiia_iiib(3)),
    DiscretizationMapMethod(0.0),
    DiscretizationMapMethod(1.0),
    DiscretizationMapMethod(0.5),
    DiscretizationMapMethod(0.5, nullspace=True),
    rattle(),
    euler_ba(),
    ExtrinsicEulerBA(),
    triple_jump(rattle()),
]


#: The residual is where Newton stops, not round-off: integrate's post-condition scale
#: max(tol, 64·eps)·S², S = max(1, max|q0|, max|v0|) (discrete_lagrangian.driver._integrate).
#: Measured ratio residual/(tol·S²) over every case here: worst 1.13 (heavy top on R^{3×3},
#: ConstrainedPRK(3)), 0.94 (planar, ConstrainedPRK(3)), ≤ 0.21 for the rest, the same at
#: OPENBLAS_NUM_THREADS=1 and unset (2.8 is the worst the module docstring reports project-wide).
#: RESIDUAL_C = 8 leaves margin 7.1 here (the former fixed 1e-11 left 2.54).
RESIDUAL_C = 8.0


def _check(traj):
    assert traj.success, traj.message
    assert np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.v))
    if hasattr(traj.system, "constraint"):
        res = traj.constraint_residual(kind="all")
        S = max(1.0, np.abs(traj.q[0]).max(), np.abs(traj.v[0]).max())
        tol = RESIDUAL_C * max(NewtonOptions().tol, 64 * np.finfo(float).eps) * S**2
        assert np.max(np.abs(res)) < tol, np.max(np.abs(res))


@pytest.mark.parametrize("method", EUCLIDEAN_METHODS, ids=lambda m: m.name)
@pytest.mark.parametrize("model", HOLONOMIC, ids=lambda m: m[0])
def test_holonomic_methods_on_vector_space_models(model, method):
    _, system, q0, v0 = model
    _check(integrate(system, method, q0, v0, h=H, n_steps=N_STEPS))


@pytest.mark.parametrize("model", HOLONOMIC, ids=lambda m: m[0])
def test_stage_constrained_baseline_runs_and_leaves_the_constraint(model):
    _, system, q0, v0 = model
    traj = integrate(system, StageConstrainedBaseline(), q0, v0, h=H, n_steps=N_STEPS)
    assert traj.success and np.all(np.isfinite(traj.q))
    # measured (3 run(s), threads 1 & unset): worst 0.00186 vs 1e-08, margin 1.86e+05
    assert np.max(np.abs(traj.constraint_residual())) > 1e-8  # the paper's criticism (1.2)


@pytest.mark.parametrize("method", [VPRK(gauss(2)), VPRK(lobatto_iiia_iiib(3)),
                                    DiscreteEulerLagrange("midpoint"),
                                    DiscreteEulerLagrange("trapezoidal")],
                         ids=lambda m: m.name)
def test_unconstrained_methods_on_the_angle_pendulum(method):
    th0, om0 = planar_pendulum.initial_angle()
    traj = integrate(planar_pendulum.angle_system(), method, th0, om0, h=H, n_steps=N_STEPS)
    _check(traj)
    E = planar_pendulum.energy_angle(traj.q[:, 0], traj.v[:, 0])
    # measured (4 run(s), threads 1 & unset): worst 0.0152 vs 0.0518, margin 3.4
    assert np.ptp(E) < 1e-2 * abs(E[0])  # O(h²) energy error, no blow-up


LIE_METHODS = [LieVPRK(lobatto_iiia_iiib(2), "cayley"), LieVPRK(lobatto_iiia_iiib(3), "exp")] + [
    LieDiscretizationMapMethod(k, retraction=r)
    for k in ("euler_a", "euler_b", "lobatto2", "rattle") for r in ("cayley", "exp")]


@pytest.mark.parametrize("method", LIE_METHODS, ids=lambda m: m.name)
@pytest.mark.parametrize("formulation", ["SO3", "SO3xR3"])
def test_lie_methods_on_the_heavy_top(formulation, method):
    if formulation == "SO3":
        system, (g0, xi0) = heavy_top.so3_system(), heavy_top.initial_so3()
    else:
        system, (g0, xi0) = heavy_top.constrained_system(), heavy_top.initial_constrained()
    traj = integrate(system, method, g0, xi0, h=H, n_steps=N_STEPS)
    _check(traj)
    R = traj.q[..., :3, :3]
    # measured (20 run(s), threads 1 & unset): worst 1.11e-15 vs 1e-12, margin 901
    assert np.max(np.abs(np.einsum("tji,tjk->tik", R, R) - np.eye(3))) < 1e-12


def test_velocity_constraint_families_refuse_holonomic_models():
    gni = pytest.importorskip("chetaev.gni")
    nh = pytest.importorskip("chetaev.nh_integrators")
    q, v = planar_pendulum.initial_cartesian()
    with pytest.raises(InputError, match="linear \\(or affine\\) in the velocity"):
        integrate(planar_pendulum.cartesian_system(), gni.GNI("rattle"), q, v, h=H, n_steps=1)
    with pytest.raises(InputError, match="needs a velocity constraint"):
        integrate(planar_pendulum.cartesian_system(), nh.NonholonomicPRK(lobatto_iiia_iiib(2)),
                  q, v, h=H, n_steps=1)
    with pytest.raises(InputError, match="integrates unconstrained systems"):
        integrate(planar_pendulum.cartesian_system(), VPRK(gauss(2)), q, v, h=H, n_steps=1)


@pytest.mark.parametrize("retraction", ["cayley", "exp"])
@pytest.mark.parametrize("experiment", [1, 2])
def test_reduced_gni_on_the_ball(experiment, retraction):
    from chetaev.gni import ReducedGNI

    x0, v0 = chaplygin_ball.initial(experiment)
    traj = integrate(chaplygin_ball.system(experiment), ReducedGNI(retraction=retraction), x0,
                     v0, h=0.1, n_steps=20)
    assert traj.success and np.all(np.isfinite(traj.v))
    res = chaplygin_ball.constraint_residual(traj.q, traj.v, experiment)
    # measured (4 run(s), threads 1 & unset): worst 4.44e-16 vs 1e-12, margin 2.25e+03 (loose)
    assert np.max(np.abs(res)) < 1e-12


@pytest.mark.parametrize("start", ["paper", "second_order"])
def test_dsocs_on_the_particle_and_the_wheel(start):
    from chetaev.dsocs import DSOCSIntegrator, iwp_constraint

    for closed_form in (True, False):
        ds = curvature_particle.dsocs(0.05, closed_form=closed_form)
        sol = integrate(ds, DSOCSIntegrator(start=start), curvature_particle.Q0,
                        curvature_particle.V0, 0.05, n_steps=40)
        assert sol.success and np.all(np.isfinite(sol.q))
        steps = np.linalg.norm(np.diff(sol.q, axis=0), axis=1)
        # measured (4 run(s), threads 1 & unset): worst 4.86e-16 vs 7.08e-12,
        # margin 1.46e+04 (loose)
        assert np.ptp(steps[1:]) < 1e-10 * steps[1]  # constant step length (discrete energy)
    for solver in ("R-branch", "newton"):
        h = 0.02
        ds = inertia_wheel.dsocs(h, solver=solver)
        sol = integrate(ds, DSOCSIntegrator(start=start), inertia_wheel.Q0, inertia_wheel.V0,
                        h, n_steps=40)
        assert sol.success and np.all(np.isfinite(sol.q))
        q = sol.q
        qc, vc, ac = q[1:-1], (q[2:] - q[:-2]) / (2 * h), (q[2:] - 2 * q[1:-1] + q[:-2]) / h**2
        res = iwp_constraint(qc, vc, ac, inertia_wheel.PARAMETERS)
        # measured (4 run(s), threads 1 & unset): worst 9.56e-07 vs 0.0148, margin 1.54e+04 (loose)
        assert np.max(np.abs(res)) < 1e-6 * (1 + np.max(np.abs(inertia_wheel.lyapunov(qc, vc))))
