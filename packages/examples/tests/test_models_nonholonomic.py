"""Models of the high-order nonholonomic paper: parameters, initial data, exact multipliers,
invariants of the independent reference ODEs, conversions between formulations."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.examples.models import (
    chaotic,
    cvt,
    nonholonomic_particle,
    turntable_ball,
    vertical_disc,
)

RNG = np.random.default_rng(7)


def _on_constraint(sysm, q):
    """Random velocities satisfying the linear constraint A(q)v = 0 at configurations q."""
    v = RNG.normal(size=q.shape)
    A = sysm.constraint.A(q)
    rhs = np.einsum("...ij,...j->...i", A, v)[..., None]
    corr = np.linalg.solve(A @ np.swapaxes(A, -1, -2), rhs)[..., 0]
    return v - np.einsum("...ji,...j->...i", A, corr)


def test_particle_data_multiplier_and_reference() -> None:
    P = nonholonomic_particle
    sysm = P.system()
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(sysm.residual(P.Q0, P.V0)).max() < 1e-15
    q = RNG.normal(size=(5, 3))
    v = _on_constraint(sysm, q)
    assert np.allclose(P.multiplier(q, v), sysm.multiplier(q, v), atol=1e-13)
    t = np.linspace(0.0, 5.0, 11)
    qr, vr, lr = P.reference(t)
    # measured (1 run(s), threads 1 & unset): worst 1.89e-13 vs 1e-12, margin 5.3
    assert np.abs(P.energy(qr, vr) - P.energy(P.Q0, P.V0)).max() < 1e-12
    # measured (1 run(s), threads 1 & unset): worst 7.94e-14 vs 1e-12, margin 12.6
    assert np.abs(sysm.residual(qr, vr)).max() < 1e-12
    # measured (1 run(s), threads 1 & unset): worst 2.22e-14 vs 1e-12, margin 45
    assert np.abs(qr[:, 1] - P.exact_y(t)).max() < 1e-12
    assert np.allclose(lr, P.multiplier(qr, vr))


def test_cvt_initial_energies_match_the_paper() -> None:
    for v0, expected in ((cvt.V0_LOW, (0.8, 1.0, 1.8)), (cvt.V0_HIGH, (3.0, 1.0, 4.0))):
        assert np.allclose(cvt.energies(cvt.Q0, v0), expected, atol=1e-14)
        # measured (2 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
        assert abs(cvt.system().residual(cvt.Q0, v0)).max() < 1e-15


def test_cvt_multiplier_and_reference_invariants() -> None:
    sysm = cvt.system()
    q = RNG.normal(size=(5, 3))
    v = _on_constraint(sysm, q)
    assert np.allclose(cvt.multiplier(q, v), sysm.multiplier(q, v), atol=1e-13)
    qr, vr, _ = cvt.reference(np.linspace(0.0, 10.0, 21), v0=cvt.V0_HIGH)
    Ed, Ep, Et = cvt.energies(qr, vr)
    for E in (Ed, Ep, Et):  # all three are exact first integrals
        assert np.abs(E - E[0]).max() < 1e-11
    assert np.abs(sysm.residual(qr, vr)).max() < 1e-11


@pytest.mark.parametrize("m", [2, 3, 4])
def test_chaotic_multiplier_any_m(m) -> None:
    sysm = chaotic.system(m)
    assert sysm.n == 2 * m + 1
    q = RNG.normal(size=(4, 2 * m + 1))
    v = _on_constraint(sysm, q)
    assert np.allclose(chaotic.multiplier(q, v, m), sysm.multiplier(q, v), atol=1e-12)
    assert np.allclose(chaotic.energy(q, v, m), sysm.energy(q, v), atol=1e-13)


def test_chaotic_ensemble_and_reference() -> None:
    q0, v0 = chaotic.ensemble()
    assert q0.shape == (10, 7)
    assert np.allclose(chaotic.energy(q0, v0), chaotic.E0, atol=1e-14)
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert np.abs(chaotic.system().residual(q0, v0)).max() < 1e-15
    qr, vr, _ = chaotic.reference(np.linspace(0.0, 3.0, 7), q0[4], v0[4])
    # measured (1 run(s), threads 1 & unset): worst 9.29e-13 vs 1e-11, margin 10.8
    assert np.abs(chaotic.energy(qr, vr) - chaotic.E0).max() < 1e-11
    assert chaotic.mse(chaotic.energy(q0, v0)) == pytest.approx(0.0, abs=1e-28)


def test_chaotic_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="integer >= 2"):
        chaotic.system(1)
    with pytest.raises(ValueError, match="defined for m = 3"):
        chaotic.ensemble(9, m=4)
    with pytest.raises(ValueError, match="positive integer"):
        chaotic.ensemble(0)


def test_disc_formulations_describe_the_same_state() -> None:
    D = vertical_disc
    g0, eta0 = D.initial_group()
    q0, v0 = D.initial_coordinates()
    assert np.allclose(D.coordinates(g0), q0)
    assert np.allclose(D.body_velocity(q0, v0), eta0)
    lie, coords = D.lie_system(), D.coordinate_system()
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(coords.residual(q0, v0)).max() < 1e-15
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(lie.residual(g0, eta0)).max() < 1e-15
    # same energy and the same multiplier in both formulations (same constraint covector)
    assert lie.energy(g0, eta0) == pytest.approx(coords.energy(q0, v0), abs=1e-14)
    assert lie.energy(g0, eta0) == pytest.approx(D.energy(q0, v0), abs=1e-14)
    assert np.allclose(coords.multiplier(q0, v0), D.multiplier(q0, eta0), atol=1e-13)
    assert np.allclose(lie.multiplier(g0, eta0), D.multiplier(q0, eta0), atol=1e-12)


def test_disc_reference_and_conversions() -> None:
    D = vertical_disc
    t = np.linspace(0.0, 3.0, 31)
    g, eta, lam = D.reference(t)
    pose = D.coordinates(g)
    assert np.allclose(pose[:, 2], D.POSE0[2] + D.ETA0[2] * t, atol=1e-12)  # θ = θ0 + ωt
    v = D.spatial_velocity(pose, eta)
    # measured (1 run(s), threads 1 & unset): worst 3.17e-13 vs 1e-11, margin 31.6
    assert np.abs(D.energy(pose, v) - D.energy(pose[0], v[0])).max() < 1e-11
    assert np.allclose(D.group_element(pose), g, atol=1e-14)
    assert np.allclose(lam, D.multiplier(pose, eta))


def test_ball_initial_data_satisfy_both_variants() -> None:
    B = turntable_ball
    g0, eta0 = B.initial()
    assert np.allclose(eta0, [0.3, -0.2, 0.5, -0.2, 0.7])
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(B.system().residual(g0, eta0)).max() < 1e-15
    # measured (1 run(s), threads 1 & unset): worst 0 vs 1e-15, margin ∞
    assert abs(B.literal_system().residual(g0, eta0)).max() < 1e-15
    assert np.allclose(B.first_integrals(g0, eta0), B.first_integrals(g0, eta0, variant="literal"))
    with pytest.raises(ValueError, match="'physical' or 'literal'"):
        B.first_integrals(g0, eta0, variant="spatial")


def test_ball_closed_form_preserves_the_first_integrals() -> None:
    B = turntable_ball
    g, eta, lam = B.reference(np.linspace(0.0, 10.0, 41))
    I = B.first_integrals(g, eta)
    # measured (1 run(s), threads 1 & unset): worst 1.67e-13 vs 1e-11, margin 59.8
    assert np.abs(I - I[0]).max() < 1e-11
    # measured (1 run(s), threads 1 & unset): worst 9.74e-14 vs 1e-11, margin 103
    assert np.abs(B.system().residual(g, eta)).max() < 1e-11
    assert np.allclose(lam, B.multiplier(eta))
    # the centre moves on a circle of period 2π(1 + a)/(aΩ)
    p = B.position(g)
    kappa = B.A_INERTIA * B.TABLE_RATE / (1 + B.A_INERTIA)
    centre = p[0] + np.array([[0.0, -1.0], [1.0, 0.0]]) @ eta[0, 3:] / kappa
    # measured (1 run(s), threads 1 & unset): worst 1.78e-15 vs 1e-10, margin 5.63e+04 (loose)
    assert np.ptp(np.linalg.norm(p - centre, axis=-1)) < 1e-10


@pytest.mark.parametrize("module", [nonholonomic_particle, cvt, chaotic])
def test_group_rn_formulation_has_the_same_pieces(module) -> None:
    vec, lie = module.system(), module.lie_system()
    assert lie.group is not None and vec.group is None
    q = RNG.normal(size=(3, vec.n))
    v = _on_constraint(vec, q)
    assert np.allclose(lie.energy(q, v), vec.energy(q, v), atol=1e-13)
    assert np.allclose(lie.residual(q, v), vec.residual(q, v), atol=1e-13)
    assert np.allclose(lie.multiplier(q, v), vec.multiplier(q, v), atol=1e-12)


def test_disc_exact_motion_matches_the_generic_reference_of_the_coordinate_system() -> None:
    """The exact reduced ODE (via SE(2)) and discrete_lagrangian.reference_solution on the
    coordinate formulation (index-reduced DAE, DOP853) give the same motion."""
    from chetaev.discrete_lagrangian import reference_solution

    D = vertical_disc
    t = np.linspace(0.0, 3.0, 7)
    q, v, lam = D.reference_coordinates(t)
    q0, v0 = D.initial_coordinates()
    ref = reference_solution(D.coordinate_system(), q0, v0, t)
    # measured (1 run(s), threads 1 & unset): worst 3.14e-13 vs 1e-10, margin 319
    assert np.abs(ref.q - q).max() < 1e-10
    # measured (1 run(s), threads 1 & unset): worst 2.02e-13 vs 1e-10, margin 496
    assert np.abs(ref.v - v).max() < 1e-10
    assert np.allclose(lam, D.coordinate_system().multiplier(q, v), atol=1e-10)
    with pytest.raises(ValueError, match="v₂ = 0"):
        D.reference(t, *D.initial_group()[:1], np.array([0.8, 0.1, 1.2]))


def _cvt_formulas(q, v, eps):
    """The CVT written out (paper §7.2): E = ½|v|² + V, ∇V, ∇²V, λ (closed form)."""
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    V = 0.5 * (x**2 + z**2 - 2.0 * np.cos(y) + eps * np.sin(2.0 * y))
    grad = np.stack([x, np.sin(y) + eps * np.cos(2.0 * y), z], axis=-1)
    hess = np.zeros((*q.shape[:-1], 3, 3))
    hess[..., 0, 0] = hess[..., 2, 2] = 1.0
    hess[..., 1, 1] = np.cos(y) - 2.0 * eps * np.sin(2.0 * y)
    s = np.sin(y)
    lam = (x * s + z - v[..., 0] * v[..., 1] * np.cos(y)) / (1.0 + s * s)
    return 0.5 * np.sum(v * v, axis=-1) + V, grad, hess, lam[..., None]


def _chaotic_formulas(q, v, m):
    """The chaotic system written out term by term (paper §7.3, 1-based paper indices mapped to
    0-based): pairs (q_{m+2}, q_{m+3}) and (q_{1+i}, q_{m+1+i}), i = 1..m."""
    n = 2 * m + 1
    pairs = [(m + 1, m + 2)] + [(i, m + i) for i in range(1, m + 1)]
    V = 0.5 * np.sum(q * q, axis=-1)
    grad = np.array(q, copy=True)
    hess = np.zeros((*q.shape[:-1], n, n)) + np.eye(n)
    for i, j in pairs:
        V = V + 0.5 * q[..., i] ** 2 * q[..., j] ** 2
        grad[..., i] += q[..., i] * q[..., j] ** 2
        grad[..., j] += q[..., j] * q[..., i] ** 2
        hess[..., i, i] += q[..., j] ** 2
        hess[..., j, j] += q[..., i] ** 2
        hess[..., i, j] += 2.0 * q[..., i] * q[..., j]
        hess[..., j, i] += 2.0 * q[..., i] * q[..., j]
    a = np.zeros_like(q)
    a[..., 0] = 1.0
    a[..., m + 1:] = q[..., m + 1:]
    lam = (np.sum(a * grad, axis=-1) - np.sum(v[..., m + 1:] ** 2, axis=-1)) / np.sum(a * a, -1)
    return 0.5 * np.sum(v * v, axis=-1) + V, grad, hess, lam[..., None]


@pytest.mark.parametrize(
    ("build", "formulas", "params", "n"),
    [(cvt.system, _cvt_formulas, 0.5, 3), (cvt.system, _cvt_formulas, 0.2, 3),
     (cvt.lie_system, _cvt_formulas, 0.5, 3),
     (chaotic.system, _chaotic_formulas, 2, 5), (chaotic.system, _chaotic_formulas, 3, 7),
     (chaotic.system, _chaotic_formulas, 4, 9), (chaotic.lie_system, _chaotic_formulas, 3, 7)],
)
def test_wrapped_nh_testing_models_match_the_written_out_formulas(build, formulas, params, n
                                                                  ) -> None:
    """cvt/chaotic (generated from their Lagrangians by the symbolic route; their hand twins
    are ``chetaev.nh_integrators.testing``'s systems): energy, ∇V, ∇²V and the multiplier
    equal the formulas the examples implemented before, on random states."""
    sysm = build(params)
    rng = np.random.default_rng(11)
    q = rng.normal(size=(2, 4, n))
    v = _on_constraint(sysm, q)
    E, grad, hess, lam = formulas(q, v, params)
    # measured (7 run(s), threads 1 & unset): worst 2.66e-15 vs 1.61e-12, margin 604
    assert np.abs(sysm.energy(q, v) - E).max() < 1e-13 * (1.0 + np.abs(E).max())
    # measured (7 run(s), threads 1 & unset): worst 8.88e-16 vs 6.59e-13, margin 742
    assert np.abs(sysm.system.gradV(q) - grad).max() < 1e-13 * (1.0 + np.abs(grad).max())
    # measured (7 run(s), threads 1 & unset): worst 8.88e-16 vs 7.98e-13, margin 899
    assert np.abs(sysm.system.hessV(q) - hess).max() < 1e-13 * (1.0 + np.abs(hess).max())
    # measured (7 run(s), threads 1 & unset): worst 8.88e-16 vs 3.56e-11, margin 4.01e+04 (loose)
    assert np.abs(sysm.multiplier(q, v) - lam).max() < 1e-11 * (1.0 + np.abs(lam).max())
    # and the module's own closed-form multiplier / energies agree with them
    if formulas is _cvt_formulas:
        # measured (3 run(s), threads 1 & unset): worst 4.44e-16 vs 4.5e-13,
        # margin 1.01e+03 (loose)
        assert np.abs(cvt.energies(q, v, params)[2] - E).max() < 1e-13 * (1.0 + np.abs(E).max())
        assert np.allclose(cvt.multiplier(q, v, params), lam, rtol=1e-12, atol=1e-12)
    else:
        # measured (4 run(s), threads 1 & unset): worst 1.78e-15 vs 1.61e-12, margin 906
        assert np.abs(chaotic.energy(q, v, params) - E).max() < 1e-13 * (1.0 + np.abs(E).max())
        assert np.allclose(chaotic.multiplier(q, v, params), lam, rtol=1e-12, atol=1e-12)


def test_chaotic_wrapper_keeps_its_argument_checks() -> None:
    with pytest.raises(ValueError, match="integer >= 2"):
        chaotic.system(1)
    with pytest.raises(ValueError, match="defined for m = 3"):
        chaotic.ensemble(9, m=4)
    with pytest.raises(ValueError, match="positive integer"):
        chaotic.ensemble(0)


# ----------------------------------------------------------------------------- symbolic route
TWINS = [
    ("particle", nonholonomic_particle.system, nonholonomic_particle.hand_system, (), 3),
    ("cvt", cvt.system, cvt.hand_system, (0.5,), 3),
    ("cvt_eps", cvt.system, cvt.hand_system, (0.2,), 3),
    ("chaotic", chaotic.system, chaotic.hand_system, (3,), 7),
    ("chaotic_m2", chaotic.system, chaotic.hand_system, (2,), 5),
    ("disc_coordinates", vertical_disc.coordinate_system, vertical_disc.hand_coordinate_system,
     (), 3),
    ("disc_coordinates_params", vertical_disc.coordinate_system,
     vertical_disc.hand_coordinate_system, (2.0, 0.7), 3),
]


@pytest.mark.parametrize("batch", [(), (5,), (2, 3)])
@pytest.mark.parametrize(("name", "gen", "hand", "args", "n"), TWINS, ids=[t[0] for t in TWINS])
def test_generated_models_agree_with_their_hand_twins(name, gen, hand, args, n, batch) -> None:
    """The symbolic models equal their hand-written twins to 1e-13 relative: values, every
    first and second derivative, the constraint blocks and the multiplier, on random states
    (not on the constraint: the blocks are defined everywhere) and batches."""
    from chetaev.discrete_lagrangian.testing import assert_systems_agree

    a, b = gen(*args), hand(*args)
    assert type(a.system) is type(b.system) and type(a.constraint) is type(b.constraint)
    assert not a.fd_second_derivatives
    rng = np.random.default_rng(len(batch) + 31)
    q, v = rng.standard_normal((2, *batch, n))
    assert_systems_agree(a, b, q, v)


@pytest.mark.parametrize("batch", [(), (5,), (2, 3)])
@pytest.mark.parametrize("params", [(), (2.0, 0.7)])
def test_generated_disc_on_se2_agrees_with_its_hand_twin(params, batch) -> None:
    from chetaev.discrete_lagrangian.testing import assert_systems_agree
    from chetaev.liegroups import SE2

    a, b = vertical_disc.lie_system(*params), vertical_disc.hand_lie_system(*params)
    assert type(a.system) is type(b.system) and type(a.constraint) is type(b.constraint)
    rng = np.random.default_rng(len(batch) + 37)
    g, eta = SE2.random(rng, batch), rng.standard_normal((*batch, 3))
    assert_systems_agree(a, b, g, eta)
    np.testing.assert_array_equal(a.system.inertia, b.system.inertia)


def test_generated_models_are_built_once_per_parameter_set() -> None:
    assert cvt.system() is cvt.system(0.5) and cvt.system(0.2) is not cvt.system()
    assert chaotic.system() is chaotic.system(3)
    assert vertical_disc.lie_system() is vertical_disc.lie_system(1.0, 0.5)
    assert nonholonomic_particle.system() is nonholonomic_particle.system()


def test_examples_import_does_not_import_sympy() -> None:
    """sympy is imported when a model is built, never at ``import chetaev.examples``."""
    import subprocess
    import sys

    code = ("import sys, chetaev.examples, chetaev.examples.models; "
            "assert 'sympy' not in sys.modules, 'sympy imported'; "
            "from chetaev.examples.models import cvt; cvt.system(0.3); "
            "assert 'sympy' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
