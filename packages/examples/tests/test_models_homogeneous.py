"""Models of the homogeneous-spaces paper on S²: the paper's data, the lift ↔ ambient
conversions, energies, and the ambient reference ODE."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.examples.models import sphere_pendulum, spherical_kepler


def test_pendulum_initial_data() -> None:
    x0, v0 = sphere_pendulum.initial_ambient()
    assert np.allclose(x0, [np.sin(np.pi / 3), 0.0, 0.5], atol=1e-15)
    assert np.allclose(v0, [0.0, -1.0 / 3.0, 0.0], atol=1e-15)
    assert sphere_pendulum.energy(x0, v0) == pytest.approx(5.0 / 9.0, abs=1e-15)
    sysm = sphere_pendulum.lift_system()
    assert sysm.energy(sphere_pendulum.G0, sphere_pendulum.ETA0) == pytest.approx(5 / 9, abs=1e-15)


def test_kepler_initial_data_match_the_inferred_centre() -> None:
    x0, v0 = spherical_kepler.initial_ambient()
    assert np.arccos(x0[2]) == pytest.approx(1.1, abs=1e-12)  # ϑ0 about X = e3
    assert np.arctan2(x0[1], x0[0]) == pytest.approx(1.0, abs=1e-12)  # φ0
    assert np.linalg.norm(v0) == pytest.approx(spherical_kepler.ETA0[0], abs=1e-14)
    assert spherical_kepler.energy(x0, v0) == pytest.approx(spherical_kepler.E0, abs=1e-14)
    sysm = spherical_kepler.lift_system()
    assert sysm.energy(spherical_kepler.G0, spherical_kepler.ETA0) == pytest.approx(
        spherical_kepler.E0, abs=1e-14)


@pytest.mark.parametrize("model", [sphere_pendulum, spherical_kepler])
def test_lift_state_inverts_to_ambient(model) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 3))
    x[:, 2] = np.abs(x[:, 2])  # away from the antipode of e3
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    v = rng.normal(size=(6, 3))
    v -= np.sum(v * x, axis=-1, keepdims=True) * x
    g, eta = model.lift_state(x, v)
    # measured (2 run(s), threads 1 & unset): worst 2.22e-16 vs 1e-14, margin 45
    assert np.abs(g @ np.swapaxes(g, -1, -2) - np.eye(3)).max() < 1e-14
    # measured (2 run(s), threads 1 & unset): worst 2.22e-16 vs 1e-14, margin 45
    assert np.abs(np.linalg.det(g) - 1.0).max() < 1e-14
    # measured (2 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert np.abs(eta[:, 2]).max() < 1e-15  # 𝔪-constraint
    xb, vb = model.to_ambient(g, eta)
    assert np.allclose(xb, x, atol=1e-14) and np.allclose(vb, v, atol=1e-14)
    sysm = model.lift_system()
    assert np.allclose(sysm.energy(g, eta), model.energy(x, v), atol=1e-13)


def test_lift_state_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="unit sphere"):
        sphere_pendulum.lift_state([0.0, 0.0, 2.0], [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="tangent"):
        sphere_pendulum.lift_state([0.0, 0.0, 1.0], [0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="antipode"):
        sphere_pendulum.lift_state([0.0, 0.0, -1.0], [1.0, 0.0, 0.0])


@pytest.mark.parametrize("model", [sphere_pendulum, spherical_kepler])
def test_ambient_reference_stays_on_the_sphere_and_conserves_energy(model) -> None:
    x, v = model.reference(np.linspace(0.0, 4.0, 41))
    # measured (2 run(s), threads 1 & unset): worst 5.98e-13 vs 1e-11, margin 16.7
    assert np.abs(np.linalg.norm(x, axis=-1) - 1.0).max() < 1e-11
    # measured (2 run(s), threads 1 & unset): worst 6.84e-13 vs 1e-11, margin 14.6
    assert np.abs(np.sum(x * v, axis=-1)).max() < 1e-11
    E = model.energy(x, v)
    # measured (2 run(s), threads 1 & unset): worst 1.75e-12 vs 1e-11, margin 5.7
    assert np.abs(E - E[0]).max() < 1e-11


def test_reference_rejects_bad_times() -> None:
    with pytest.raises(ValueError, match="increasing"):
        sphere_pendulum.reference(np.array([1.0, 0.0]))


@pytest.mark.parametrize("model", [sphere_pendulum, spherical_kepler])
def test_cartesian_formulation_matches_the_model(model) -> None:
    sysm = model.cartesian_system()
    x0, v0 = model.initial_ambient()
    # measured (2 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert np.abs(sysm.residual(x0, v0)).max() < 1e-15
    # measured (2 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert np.abs(sysm.velocity_residual(x0, v0)).max() < 1e-15
    assert sysm.energy(x0, v0) == pytest.approx(model.energy(x0, v0), abs=1e-15)
    # the ambient reference ODE's acceleration is the constrained Cartesian acceleration
    rhs = model.ambient_rhs()(0.0, np.concatenate([x0, v0]))
    assert np.allclose(sysm.acceleration(x0, v0), rhs[3:], atol=1e-12)
