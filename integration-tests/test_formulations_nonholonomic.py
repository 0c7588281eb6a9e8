"""Formulations of the nonholonomic models agree on TRAJECTORIES (chetaev.examples models).

* Lagrangian (eq. 14) and Hamiltonian (eq. 15) NonholonomicPRK give the same map: q, p, λ at
  every node to solver tolerance (particle, CVT, chaotic system); the same models on the group
  Rⁿ with LieNonholonomicPRK reproduce it to round-off.
* Each discrete trajectory follows the model's independent reference ODE at every node, and a
  control (time-reversed initial velocity / mis-scaled time) is far from it: the comparison
  would catch a time-reversed or mis-scaled formulation.
* The vertical disc on SE(2) (LieNonholonomicPRK) and in coordinates (x, y, θ)
  (NonholonomicPRK) agree at every node within the methods' error, and both with the exact
  reduced ODE; λ agrees (same constraint covector).
* The turntable ball: physical and literal constraints give the same centre motion; the
  physical one follows the closed form.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("chetaev.examples")

from chetaev.discrete_lagrangian import NewtonOptions, integrate
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.examples.models import (
    chaotic,
    cvt,
    nonholonomic_particle,
    turntable_ball,
    vertical_disc,
)
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
from chetaev.rktableaux import lobatto_iiia_iiib

TIGHT = NewtonOptions(tol=1e-14)


def _vector_cases():
    q0c, v0c = chaotic.ensemble()
    return {
        "particle": (nonholonomic_particle.system(), nonholonomic_particle.Q0,
                     nonholonomic_particle.V0,
                     lambda t, q0, v0: nonholonomic_particle.reference(t, q0, v0)),
        "cvt": (cvt.system(), cvt.Q0, cvt.V0_HIGH, lambda t, q0, v0: cvt.reference(t, q0, v0)),
        "chaotic": (chaotic.system(), q0c[3], v0c[3],
                    lambda t, q0, v0: chaotic.reference(t, q0, v0)),
        "disc-coordinates": (vertical_disc.coordinate_system(),
                             *vertical_disc.initial_coordinates(),
                             lambda t, q0, v0: vertical_disc.reference_coordinates(t, q0, v0)),
    }


CASES = _vector_cases()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("s", [2, 3])
def test_lagrangian_and_hamiltonian_forms_give_the_same_trajectory(name, s) -> None:
    sysm, q0, v0, _ = CASES[name]
    runs = [integrate(sysm, NonholonomicPRK(lobatto_iiia_iiib(s), form=f, newton=TIGHT), q0, v0,
                      h=0.1, n_steps=30) for f in ("lagrangian", "hamiltonian")]
    assert all(r.success for r in runs)
    lag, ham = runs
    # measured (8 run(s), threads 1 & unset): worst 1.15e-14 vs 1e-11, margin 866
    assert np.abs(lag.q - ham.q).max() < 1e-11
    # measured (8 run(s), threads 1 & unset): worst 4.32e-14 vs 1e-11, margin 232
    assert np.abs(lag.p - ham.p).max() < 1e-11
    # measured (8 run(s), threads 1 & unset): worst 4.32e-14 vs 1e-11, margin 232
    assert np.abs(lag.v - ham.v).max() < 1e-11
    # measured (8 run(s), threads 1 & unset): worst 1.82e-12 vs 1e-10, margin 55
    assert np.abs(lag.lam - ham.lam).max() < 1e-10


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("form", ["lagrangian", "hamiltonian"])
def test_discrete_trajectory_follows_the_reference_ode(name, form) -> None:
    sysm, q0, v0, ref = CASES[name]
    tr = integrate(sysm, NonholonomicPRK(lobatto_iiia_iiib(3), form=form), q0, v0, h=0.05,
                   n_steps=60)
    qr, vr, lr = ref(tr.t, q0, v0)
    scale = np.abs(qr).max()
    err = np.abs(tr.q - qr).max() / scale
    # measured (8 run(s), threads 1 & unset): worst 3.23e-07 vs 1e-05, margin 31
    assert err < 1e-5, err
    # measured (8 run(s), threads 1 & unset): worst 2.87e-07 vs 1e-05, margin 34.9
    assert np.abs(tr.v - vr).max() / np.abs(vr).max() < 1e-5
    # measured (8 run(s), threads 1 & unset): worst 0.000698 vs 0.01, margin 14.3
    assert np.abs(tr.lam - lr).max() / np.abs(lr).max() < 1e-2  # λ: order 2 for s = 3
    # controls: the comparison detects time reversal and a mis-scaled time
    qb, _, _ = ref(tr.t, q0, -v0)
    # measured (8 run(s), threads 1 & unset): worst 2.01 vs 0.000323, margin 6.22e+03
    assert np.abs(qb - qr).max() / scale > 1e3 * err
    qs, _, _ = ref(1.1 * tr.t, q0, v0)
    # measured (8 run(s), threads 1 & unset): worst 0.102 vs 0.000323, margin 317
    assert np.abs(qs - qr).max() / scale > 1e3 * err


LIE_RN = {"particle": nonholonomic_particle.lie_system, "cvt": cvt.lie_system,
          "chaotic": chaotic.lie_system}


@pytest.mark.parametrize("name", sorted(LIE_RN))
@pytest.mark.parametrize("s", [2, 3])
def test_group_rn_formulation_reproduces_the_vector_space_method(name, s) -> None:
    """The model on the abelian group Rⁿ with LieNonholonomicPRK is the vector-space
    NonholonomicPRK (τ = id): same trajectory to round-off."""
    sysm, q0, v0, _ = CASES[name]
    h, n_steps, tab = 0.1, 20, lobatto_iiia_iiib(s)
    vec = integrate(sysm, NonholonomicPRK(tab, newton=NewtonOptions(tol=1e-16)),
                    q0, v0, h=h, n_steps=n_steps)
    lie = integrate(LIE_RN[name](), LieNonholonomicPRK(s), q0, v0, h=h, n_steps=n_steps)
    assert vec.success and lie.success
    # Same mathematics, two code paths: sums of n terms per step, n_steps steps (the
    # difference does not grow faster than the step count). Measured over the 6 cases
    # (OPENBLAS_NUM_THREADS=1 and unset alike): |Δq|, |Δv| ≤ 9.7, 89 eps·scale against the
    # bound 16·n·n_steps ≥ 960 eps·scale (margin ≥ 10.8; the former fixed 1e-13 left 1.8 on v).
    n = np.shape(q0)[-1]
    assert_rounding_close(vec.q, lie.q, n_terms=n, n_ops=n_steps, what="q")
    assert_rounding_close(vec.v, lie.v, n_terms=n, n_ops=n_steps, what="v")
    # λ enters through h bₛ Aᵀλ: its rounding is that of v amplified by 1/(h bₛ); measured
    # |Δλ| ≤ 99 eps·max|v|/(h bₛ) (cvt, s = 2), margin ≥ 9.7.
    lam_scale = max(np.abs(vec.v).max(), np.abs(lie.v).max()) / (h * tab.first.b[-1])
    assert_rounding_close(vec.lam, lie.lam, n_terms=n, n_ops=n_steps, scale=lam_scale, what="λ")


def test_disc_on_se2_and_in_coordinates_agree() -> None:
    D = vertical_disc
    g0, eta0 = D.initial_group()
    q0, v0 = D.initial_coordinates()
    lie = integrate(D.lie_system(), LieNonholonomicPRK(3, retraction="cayley"), g0, eta0,
                    h=0.05, n_steps=60)
    crd = integrate(D.coordinate_system(), NonholonomicPRK(lobatto_iiia_iiib(3)), q0, v0,
                    h=0.05, n_steps=60)
    assert lie.success and crd.success
    pose = D.coordinates(lie.q)
    gr, er, lr = D.reference(lie.t)
    pr = D.coordinates(gr)
    # both within their O(h^4) error of the exact motion, hence of each other. Deterministic
    # method errors (round-off ~1e-14): measured 4.0e-7, 1.1e-7, 3.5e-7, 4.0e-7, 2.8e-7, 4.3e-7
    # for the six comparisons below; 1e-6 leaves margin ≥ 2.3 (≥ 1.5 required).
    assert np.abs(pose - pr).max() < 1e-6
    assert np.abs(lie.v - er).max() < 1e-6
    assert np.abs(crd.q - pr).max() < 1e-6
    assert np.abs(pose - crd.q).max() < 1e-6
    # measured (1 run(s), threads 1 & unset): worst 2.84e-07 vs 1e-06, margin 3.52
    assert np.abs(D.body_velocity(crd.q, crd.v) - lie.v).max() < 1e-6
    # measured (1 run(s), threads 1 & unset): worst 4.32e-07 vs 1e-06, margin 2.32 (< 3)
    assert np.abs(D.spatial_velocity(pose, lie.v) - crd.v).max() < 1e-6
    assert np.abs(lie.lam - crd.lam).max() < 3e-3  # λ: order 2 (1.3e-3 measured)
    assert np.abs(lie.lam - lr).max() < 3e-3
    # the motion is not trivial: a reversed run is far away
    back = integrate(D.coordinate_system(), NonholonomicPRK(lobatto_iiia_iiib(3)), q0, -v0,
                     h=0.05, n_steps=60)
    # measured (1 run(s), threads 1 & unset): worst 7.2 vs 0.5, margin 14.4
    assert np.abs(back.q - crd.q).max() > 0.5


def test_disc_formulations_converge_to_each_other() -> None:
    """The SE(2)–coordinate gap shrinks like h^{2s−2} (s = 2): not an O(1) mismatch."""
    D = vertical_disc
    g0, eta0 = D.initial_group()
    q0, v0 = D.initial_coordinates()
    gaps = []
    for h in (0.1, 0.05):
        n = round(1.0 / h)
        lie = integrate(D.lie_system(), LieNonholonomicPRK(2), g0, eta0, h=h, n_steps=n)
        crd = integrate(D.coordinate_system(), NonholonomicPRK(lobatto_iiia_iiib(2)), q0, v0,
                        h=h, n_steps=n)
        gaps.append(np.abs(D.coordinates(lie.q)[-1] - crd.q[-1]).max())
    assert 3.0 < gaps[0] / gaps[1] < 5.0, gaps  # 2^(2s−2) = 4 ± 1; measured 4.05


def test_ball_physical_literal_and_closed_form_agree() -> None:
    B = turntable_ball
    g0, eta0 = B.initial()
    phys = integrate(B.system(), LieNonholonomicPRK(3), g0, eta0, h=0.1, n_steps=40)
    lit = integrate(B.literal_system(), LieNonholonomicPRK(3), g0, eta0, h=0.1, n_steps=40)
    assert phys.success and lit.success
    gr, er, lr = B.reference(phys.t)
    # measured (1 run(s), threads 1 & unset): worst 3.99e-09 vs 1e-05, margin 2.51e+03 (loose)
    assert np.abs(B.position(phys.q) - B.position(gr)).max() < 1e-5
    # measured (1 run(s), threads 1 & unset): worst 1.14e-09 vs 1e-05, margin 8.77e+03 (loose)
    assert np.abs(phys.v[:, 3:] - er[:, 3:]).max() < 1e-5
    # measured (1 run(s), threads 1 & unset): worst 4.89e-06 vs 1e-05, margin 2.05 (< 3)
    assert np.abs(phys.q[:, :3, :3] - gr[:, :3, :3]).max() < 1e-5  # 4.9e-6 at T = 4
    # measured (1 run(s), threads 1 & unset): worst 2e-07 vs 0.001, margin 5.01e+03 (loose)
    assert np.abs(phys.lam - lr).max() < 1e-3
    # measured (1 run(s), threads 1 & unset): worst 5.66e-08 vs 1e-05, margin 177
    assert np.abs(B.position(lit.q) - B.position(gr)).max() < 1e-5
    # measured (1 run(s), threads 1 & unset): worst 1.62e-08 vs 1e-05, margin 618
    assert np.abs(lit.v[:, 3:] - er[:, 3:]).max() < 1e-5
    # the centre really moves (on a circle of radius |v0|/κ ≈ 2.6): not a vacuous comparison
    # measured (1 run(s), threads 1 & unset): worst 2.07 vs 1, margin 2.07 (< 3)
    assert np.ptp(B.position(gr)[:, 0]) > 1.0
    # measured (1 run(s), threads 1 & unset): worst 1.96 vs 0.5, margin 3.93
    assert np.abs(gr[-1, :3, :3] - np.eye(3)).max() > 0.5
