"""Global orders of NH-PRK (Cor. 5.2.1; paper Thm. 5.1, Cor. 5.2.1; §7.1) against DOP853
references."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import integrate, reference_solution
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.rktableaux import lobatto_iiia_iiib

T = 2.0
# step sizes per s: errors stay above the round-off floor (1e-11) and in the asymptotic range
H_VALUES = {
    2: [0.2, 0.1, 0.05],
    3: [0.2, 0.1, 0.05],
    4: [0.2, 0.125, 0.1, 0.05],
    5: [1 / 3, 0.25, 0.2, 0.125],  # at h = 0.1 the p error (6e-14) is at round-off
}
FLOOR = 5e-13  # ~20x the observed round-off floor (~3e-14 at T = 2)


def _errors(system, method, q0, v0, hs, ref):
    out = []
    for h in hs:
        sol = integrate(system, method, q0, v0, h=h, n_steps=round(T / h))
        assert sol.success, sol.message
        out.append(
            [
                np.max(np.abs(sol.q[-1] - ref.q[-1])),
                np.max(np.abs(sol.p[-1] - system.D2L(ref.q[-1], ref.v[-1]))),
                np.max(np.abs(sol.lam[-1] - ref.lam[-1])),
            ]
        )
    return np.array(out)


@pytest.fixture(scope="module")
def particle_ref(nh):
    system = nh.particle_system()
    return system, reference_solution(system, nh.PARTICLE_Q0, nh.PARTICLE_V0, np.array([0.0, T]))


@pytest.mark.parametrize("s", [2, 3, 4, 5])
def test_particle_orders(nh, particle_ref, s):
    """q, p of order 2s-2; lambda of order s (even s) or s-1 (odd s).

    Measured (T = 2, max-norm): s=2: 2.01, 2.00, 1.96; s=3: 4.03, 4.03, 2.03;
    s=4: ~6.0, ~6.0, ~4.0; s=5 (h = 1/3 .. 1/8): ~7.9, ~8.0, ~4.1.
    """
    system, ref = particle_ref
    method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry")
    hs = H_VALUES[s]
    err = _errors(system, method, nh.PARTICLE_Q0, nh.PARTICLE_V0, hs, ref)
    order_q = nh.fit_order(hs, err[:, 0], FLOOR)
    order_p = nh.fit_order(hs, err[:, 1], FLOOR)
    order_l = nh.fit_order(hs, err[:, 2], FLOOR)
    lam_theory = s if s % 2 == 0 else s - 1
    assert method.order == 2 * s - 2 and method.multiplier_order == lam_theory
    # method (deterministic; OPENBLAS_NUM_THREADS unset): measured worst |slope - p| in q
    # 6.6e-3, 0.028, 0.083, 0.136 (s = 2..5: margins 38, 8.9, 3.0, 1.8), in p <= 0.034
    # (margin 7.3), in λ <= 0.105 (margin 2.4)
    assert abs(order_q - (2 * s - 2)) <= 0.25, (order_q, err)
    assert abs(order_p - (2 * s - 2)) <= 0.25, (order_p, err)
    assert abs(order_l - lam_theory) <= 0.25, (order_l, err)


def test_particle_error_magnitudes_match_spec(nh, particle_ref):
    """An independent numpy check on the paper's §7.1 particle (2-norm, h = 0.1): s=2 |dq|
    2.06e-3, s=3 5.87e-7 (within a factor 2)."""
    system, ref = particle_ref
    for s, expected in [(2, 2.06e-3), (3, 5.87e-7)]:
        sol = integrate(
            system,
            NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry"),
            nh.PARTICLE_Q0,
            nh.PARTICLE_V0,
            h=0.1,
            n_steps=20,
        )
        e = np.linalg.norm(sol.q[-1] - ref.q[-1])
        # deterministic: measured e / expected = 0.998 and 0.9995 (the expected values are the
        # independent check's, to 3 digits); the factor 2 is the claim: margin 2
        assert expected / 2 < e < 2 * expected, (s, e)


@pytest.mark.parametrize("s", [2, 3])
def test_general_lagrangian_nonlinear_constraint_orders(nh, s):
    """Implicit v = FL^{-1}(p) unknowns and a nonlinear Phi: orders 2s-2 in q and p."""
    system = nh.general_particle_system()
    ref = reference_solution(system, nh.GEN_Q0, nh.GEN_V0, np.array([0.0, T]))
    method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry")
    hs = [0.2, 0.1, 0.05]
    err = _errors(system, method, nh.GEN_Q0, nh.GEN_V0, hs, ref)
    # method: measured worst |slope - p| 0.017 (q), 0.036 (p), 0.013 (λ): margins >= 6.9
    assert abs(nh.fit_order(hs, err[:, 0], FLOOR) - (2 * s - 2)) <= 0.25, err
    assert abs(nh.fit_order(hs, err[:, 1], FLOOR) - (2 * s - 2)) <= 0.25, err
    assert abs(nh.fit_order(hs, err[:, 2], FLOOR) - 2) <= 0.25, err


@pytest.mark.parametrize("s", [2, 3])
def test_sleigh_orders(nh, s):
    """A second nonlinear problem (Chaplygin sleigh, T = 2): q, p orders 2s-2."""
    system = nh.sleigh_system()
    ref = reference_solution(system, nh.SLEIGH_Q0, nh.SLEIGH_V0, np.array([0.0, T]))
    hs = [0.2, 0.1, 0.05]
    err = _errors(
        system,
        NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry"),
        nh.SLEIGH_Q0,
        nh.SLEIGH_V0,
        hs,
        ref,
    )
    # method: measured worst |slope - p| 0.079 (q), 0.066 (p): margins >= 3.2
    assert abs(nh.fit_order(hs, err[:, 0], FLOOR) - (2 * s - 2)) <= 0.25, err
    assert abs(nh.fit_order(hs, err[:, 1], FLOOR) - (2 * s - 2)) <= 0.25, err


@pytest.mark.parametrize("s", [2, 3])
def test_affine_constraint_orders(nh, s):
    """Affine constraint Phi = v_z - y v_x - 0.3 sin x: q, p orders 2s - 2, lambda order 2."""
    system = nh.affine_particle_system()
    q0 = nh.PARTICLE_Q0
    v0 = np.array([0.5, 1.0, 0.25 + 0.3 * np.sin(1.0)])  # on the affine constraint
    ref = reference_solution(system, q0, v0, np.array([0.0, T]))
    # s = 2: λ is pre-asymptotic at h = 0.2 (measured λ slope 2.205 on (0.2, 0.1, 0.05):
    # margin 1.2 against the band 0.25); on (0.1, 0.05, 0.025) it is 2.058 (margin 4.3)
    hs = [0.1, 0.05, 0.025] if s == 2 else [0.2, 0.1, 0.05]
    err = _errors(
        system, NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry"), q0, v0, hs, ref
    )
    # method (deterministic): measured worst |slope - p| 2.3e-2 (q), 3.1e-2 (p), 5.8e-2 (λ):
    # margins >= 4.3
    assert abs(nh.fit_order(hs, err[:, 0], FLOOR) - (2 * s - 2)) <= 0.25, err
    assert abs(nh.fit_order(hs, err[:, 1], FLOOR) - (2 * s - 2)) <= 0.25, err
    assert abs(nh.fit_order(hs, err[:, 2], FLOOR) - 2) <= 0.25, err
    sol = integrate(
        system,
        NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry"),
        q0,
        v0,
        h=0.1,
        n_steps=20,
    )
    # Newton tolerance 1e-12 x scale: measured worst 1.7e-12 (margin 5.7)
    assert np.abs(system.residual(sol.q, sol.v)).max() < 1e-11
