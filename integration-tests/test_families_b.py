"""Every integrator family runs on every nonholonomic / homogeneous-space model it applies to
(short runs): NonholonomicPRK s = 2, 3 (both forms) and the GNI on the vector-space models,
LieNonholonomicPRK with both retractions on the Lie-group models. Checks: success, finite
states, constraint residual at the nodes at solver tolerance, energy (or first integral)
close to its initial value."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("chetaev.examples")

from chetaev.discrete_lagrangian import integrate
from chetaev.examples.models import (
    chaotic,
    cvt,
    nonholonomic_particle,
    sphere_pendulum,
    spherical_kepler,
    turntable_ball,
    vertical_disc,
)
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
from chetaev.rktableaux import lobatto_iiia_iiib

VECTOR_MODELS = {
    "particle": lambda: (nonholonomic_particle.system(), nonholonomic_particle.Q0,
                         nonholonomic_particle.V0),
    "cvt": lambda: (cvt.system(), cvt.Q0, cvt.V0_LOW),
    "chaotic-ensemble": lambda: (chaotic.system(), *chaotic.ensemble()),
    "chaotic-m2": lambda: (chaotic.system(2), np.array([0.5, 0.6, 0.4, 1.0, 1.0]),
                           np.array([-0.3, 0.2, 0.1, 0.3, 0.0])),
    "disc-coordinates": lambda: (vertical_disc.coordinate_system(),
                                 *vertical_disc.initial_coordinates()),
}

LIE_MODELS = {
    "particle-rn": lambda: (nonholonomic_particle.lie_system(), nonholonomic_particle.Q0,
                            nonholonomic_particle.V0),
    "cvt-rn": lambda: (cvt.lie_system(), cvt.Q0, cvt.V0_HIGH),
    "chaotic-rn-ensemble": lambda: (chaotic.lie_system(), *chaotic.ensemble()),
    "disc-se2": lambda: (vertical_disc.lie_system(), *vertical_disc.initial_group()),
    "ball-physical": lambda: (turntable_ball.system(), *turntable_ball.initial()),
    "ball-literal": lambda: (turntable_ball.literal_system(), *turntable_ball.initial()),
    "sphere-pendulum": lambda: (sphere_pendulum.lift_system(), sphere_pendulum.G0,
                                sphere_pendulum.ETA0),
    "spherical-kepler": lambda: (spherical_kepler.lift_system(), spherical_kepler.G0,
                                 spherical_kepler.ETA0),
}


def _check(sysm, tr, energy_tol):
    assert tr.success, tr.message
    for a in (tr.q, tr.v, tr.lam):
        assert np.all(np.isfinite(a))
    # measured (62 run(s), threads 1 & unset): worst 1.68e-12 vs 1e-11, margin 5.97
    assert np.abs(sysm.residual(tr.q, tr.v)).max() < 1e-11  # Newton tol 1e-12 × scale
    if energy_tol is not None:
        E = sysm.energy(tr.q, tr.v)
        # measured (54 run(s), threads 1 & unset): worst 0.212 vs 0.5, margin 2.36 (< 3)
        assert np.abs(E - E[0]).max() < energy_tol


@pytest.mark.parametrize("name", sorted(VECTOR_MODELS))
@pytest.mark.parametrize(("s", "form"), [(2, "lagrangian"), (3, "lagrangian"), (3, "hamiltonian")])
def test_nonholonomic_prk_on_vector_models(name, s, form) -> None:
    sysm, q0, v0 = VECTOR_MODELS[name]()
    tr = integrate(sysm, NonholonomicPRK(lobatto_iiia_iiib(s), form=form), q0, v0, h=0.05,
                   n_steps=20)
    _check(sysm, tr, 1e-2)
    assert tr.q.shape == (21, *np.shape(q0))


@pytest.mark.parametrize("name", sorted(VECTOR_MODELS))
@pytest.mark.parametrize("variant", ["rattle", "midpoint", "euler_a"])
def test_gni_on_vector_models(name, variant) -> None:
    gni = pytest.importorskip("chetaev.gni")
    sysm, q0, v0 = VECTOR_MODELS[name]()
    tr = integrate(sysm, gni.GNI(variant), q0, v0, h=0.05, n_steps=20)
    _check(sysm, tr, 0.5 if variant == "euler_a" else 5e-2)  # Euler A: first order


@pytest.mark.parametrize("name", sorted(LIE_MODELS))
@pytest.mark.parametrize("kind", ["cayley", "exp"])
@pytest.mark.parametrize("s", [2, 3])
def test_lie_nonholonomic_prk_on_group_models(name, kind, s) -> None:
    sysm, g0, eta0 = LIE_MODELS[name]()
    tr = integrate(sysm, LieNonholonomicPRK(s, retraction=kind), g0, eta0, h=0.05, n_steps=20)
    # the ball's energy is not conserved (affine constraint): check its first integrals
    _check(sysm, tr, None if name.startswith("ball") else 1e-2)
    R = tr.q[..., :3, :3]
    if name.startswith(("ball", "sphere", "spherical")):  # SO(3): orthogonal, no projection
        # measured (16 run(s), threads 1 & unset): worst 1.78e-15 vs 1e-13, margin 56.3
        assert np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max() < 1e-13
    if name.startswith("ball"):
        variant = name.split("-")[1]
        I = turntable_ball.first_integrals(tr.q, tr.v, variant=variant)
        # measured (8 run(s), threads 1 & unset): worst 4.44e-16 vs 1e-12, margin 2.25e+03 (loose)
        assert np.abs(I[:, :3] - I[0, :3]).max() < 1e-12
        # measured (8 run(s), threads 1 & unset): worst 1.93e-07 vs 1e-05, margin 51.8
        assert np.abs(I[:, 3] - I[0, 3]).max() < 1e-5


@pytest.mark.parametrize("model", [sphere_pendulum, spherical_kepler])
@pytest.mark.parametrize("s", [2, 3])
def test_holonomic_constrained_prk_on_cartesian_sphere_models(model, s) -> None:
    from chetaev.discrete_lagrangian import ConstrainedPRK

    sysm = model.cartesian_system()
    x0, v0 = model.initial_ambient()
    tr = integrate(sysm, ConstrainedPRK(lobatto_iiia_iiib(s)), x0, v0, h=0.05, n_steps=20)
    assert tr.success, tr.message
    assert np.all(np.isfinite(tr.q)) and np.all(np.isfinite(tr.v))
    # measured (4 run(s), threads 1 & unset): worst 1.77e-13 vs 1e-12, margin 5.64
    assert np.abs(np.linalg.norm(tr.q, axis=-1) - 1.0).max() < 1e-12
    # measured (4 run(s), threads 1 & unset): worst 1.16e-13 vs 1e-12, margin 8.62
    assert np.abs(np.sum(tr.q * tr.v, axis=-1)).max() < 1e-12
    E = model.energy(tr.q, tr.v)
    # measured (4 run(s), threads 1 & unset): worst 0.00031 vs 0.01, margin 32.3
    assert np.abs(E - E[0]).max() < 1e-2
