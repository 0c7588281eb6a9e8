"""The paper's experiments §7.2 (CVT) and §7.3 (chaotic ensemble), and the alternating
multiplier mode with its remedies (issue 6)."""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import integrate, reference_solution
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.rktableaux import lobatto_iiia_iiib

# ---------------------------------------------------------------- CVT (§7.2, paper §7.2)


@pytest.fixture(scope="module")
def cvt_runs(nh):
    """Lobatto-2, eps = 1/2, both initial conditions as one batch, T = 500."""
    system = nh.cvt_system(0.5)
    q0 = np.stack([nh.CVT_Q0, nh.CVT_Q0])
    v0 = np.stack([nh.CVT_V0_LOW, nh.CVT_V0_HIGH])
    method = NonholonomicPRK(lobatto_iiia_iiib(2), multiplier_rule="carry")
    out = {}
    for name, h in [("0.1", 0.1), ("pi/10", np.pi / 10)]:
        sol = integrate(system, method, q0, v0, h=h, n_steps=round(500.0 / h))
        assert sol.success, sol.message
        Ed, Ep, Et = nh.cvt_energies(sol.q, sol.v)
        out[name] = (sol.t, Ed - Ed[0], Ep - Ep[0], Et - Et[0])
    return out


def test_cvt_initial_energies_match_the_paper(nh):
    for v0, (et, ed, ep) in [(nh.CVT_V0_LOW, (1.8, 0.8, 1.0)), (nh.CVT_V0_HIGH, (4.0, 3.0, 1.0))]:
        Ed, Ep, Et = nh.cvt_energies(nh.CVT_Q0, v0)
        # round-off of 3-term quadratic forms of O(1) data (np.allclose's default rtol 1e-5
        # made the old bound loose)
        assert_rounding_close([Et, Ed, Ep], [et, ed, ep], n_terms=3, what="CVT energies")


def test_cvt_energies_bounded_without_drift_at_h_01(cvt_runs):
    """h = 0.1: total, driver and passenger energies bounded, no drift (paper §7.2:
    low 4.3e-3 / 1.25e-2 / 1.31e-2, high 1.3e-2 / 2.4e-2 / 2.6e-2)."""
    t, dEd, dEp, dEt = cvt_runs["0.1"]
    # The errors are the method's C h² at h = 0.1 (deterministic; the paper and an independent
    # numpy check give the same to 2-3 digits). Measured (OPENBLAS_NUM_THREADS unset)
    # max |dE| (driver, passenger, total): low 4.27e-3, 1.247e-2, 1.312e-2; high 1.264e-2,
    # 2.426e-2, 2.584e-2. The old bounds (paper x 1.3, and 0.03 for the total) left margins
    # 1.16-1.34 < 1.5; the bounds are 1.5 C h² with these measured C h².
    measured = {0: (4.27e-3, 1.247e-2, 1.312e-2), 1: (1.264e-2, 2.426e-2, 2.584e-2)}
    bounds = {j: tuple(1.5 * m for m in measured[j]) for j in (0, 1)}
    # no drift: measured second / first half = 0.99-1.00 (threshold 1.5); the fitted trend
    # x T is <= 1.4e-3 of max |dE| (threshold 0.2: margin >= 73)
    half = len(t) // 2
    for j in (0, 1):
        for k, dE in enumerate((dEd[:, j], dEp[:, j], dEt[:, j])):
            assert np.abs(dE).max() < bounds[j][k], (j, k, np.abs(dE).max())
            first, second = np.abs(dE[:half]).max(), np.abs(dE[half:]).max()
            assert second < 1.5 * first, (j, k, first, second)  # no drift
            slope = np.polyfit(t, dE, 1)[0]
            assert abs(slope) * t[-1] < 0.2 * np.abs(dE).max()
    assert np.abs(dEt).max() < 1.5 * 2.584e-2  # the total of the high regime (above)


def test_cvt_erratic_at_h_pi_over_10(cvt_runs):
    """h = pi/10 (Modin-Verdier's step): the passenger energy error is more than 10x the
    h = 0.1 one (paper §7.2: 0.53 vs 1.25e-2 low; 0.49 vs 2.4e-2 high)."""
    _, _, dEp_good, _ = cvt_runs["0.1"]
    _, _, dEp_bad, dEt_bad = cvt_runs["pi/10"]
    for j in (0, 1):
        ratio = np.abs(dEp_bad[:, j]).max() / np.abs(dEp_good[:, j]).max()
        # method (deterministic): measured ratio 42.3 / 20.1 (margin 2.0) and total max |dE|
        # 0.499 / 0.496 (margin 1.65 over 0.3), OPENBLAS_NUM_THREADS unset
        assert ratio > 10, (j, ratio)
        assert np.abs(dEt_bad[:, j]).max() > 0.3


# ---------------------------------------------------------------- chaotic ensemble (§7.3)


@pytest.mark.parametrize("s", [2, 3])
def test_chaotic_energy_mse_scales_like_h_to_twice_the_order(nh, s):
    """mu(E, k) / h^{2(2s-2)} collapses between h = 0.1 and 0.05 at t = 20 (paper §7.3:
    ratio 1.04 for s = 2, 1.01 for s = 3; the paper's h^10 for s = 3 is a typo for h^8)."""
    system = nh.chaotic_system()
    q0, v0 = nh.chaotic_ensemble(9)
    E0 = system.energy(q0, v0)
    # round-off of a 7-term quadratic form (np.allclose's default rtol 1e-5 is dropped)
    assert_rounding_close(E0, np.full_like(E0, 3.06), n_terms=7, what="E0 = 3.06")
    method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry")
    p = 2 * (2 * s - 2)
    scaled = {}
    for h in (0.1, 0.05):
        sol = integrate(system, method, q0, v0, h=h, n_steps=round(20.0 / h))
        mu = np.mean((system.energy(sol.q[-1], sol.v[-1]) - E0) ** 2)
        scaled[h] = mu / h**p
    ratio = scaled[0.1] / scaled[0.05]
    # method (deterministic at t = 20, before chaos amplifies round-off): measured ratio 1.037
    # (s = 2) and 1.006 (s = 3), identical with OPENBLAS_NUM_THREADS=1 and unset (1.007 and
    # 1.002 one halving further); the band allows a deviation 0.3 / 0.4 from 1: margin >= 8
    assert 0.7 <= ratio <= 1.4, (ratio, scaled)


# ---------------------------------------------------------------- alternating multiplier mode


@pytest.fixture(scope="module")
def sleigh_runs(nh):
    system = nh.sleigh_system()
    runs = {}
    for s in (2, 3):
        for mode in ("carry", "continuous", "zero_first"):
            method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule=mode)
            sol = integrate(system, method, nh.SLEIGH_Q0, nh.SLEIGH_V0, h=0.1, n_steps=400)
            assert sol.success, sol.message
            E = system.energy(sol.q, sol.v)
            lam_c = system.multiplier(sol.q, sol.v)
            runs[s, mode] = (sol, E - E[0], sol.lam - lam_c)
    return runs


@pytest.mark.parametrize("s", [2, 3])
def test_carried_multiplier_develops_growing_mode_on_the_sleigh(sleigh_runs, s):
    """Chaplygin sleigh (straightens out forward in time, unstable backward): with the
    carried lambda the parasitic multiplier mode grows (alternating sign for s = 2,
    R_A(inf) = -1; same sign for s = 3, R_A(inf) = +1) until the energy collapses.

    Measured (h = 0.1, E_0 = 0.585): s=2: |lambda - lambda(q, v)| 0.04 at t = 5 -> 17 at
    t = 15, energy 0.585 -> 0.043; s=3: 0.03 at t = 15 -> 30 at t = 35, energy -> 0.30."""
    _, dE, dlam = sleigh_runs[s, "carry"]
    early = np.abs(dlam[:50]).max()
    # the mode the test must see (method, deterministic): measured growth >= 9.6 x the
    # threshold 100 x early, energy loss 0.585 (margin 2.9 over 0.2), OPENBLAS unset
    assert np.abs(dlam).max() > 100 * early, (early, np.abs(dlam).max())
    assert np.abs(dE).max() > 0.2  # the energy (0.585) collapses
    if s == 2:  # alternating: consecutive deviations have opposite signs once grown
        k = int(np.argmax(np.abs(dlam[:, 0])))
        assert dlam[k, 0] * dlam[k - 1, 0] < 0


@pytest.mark.parametrize("s", [2, 3])
def test_continuous_reinitialisation_removes_the_mode(sleigh_runs, s):
    """multiplier_rule='continuous': energy error 2.9e-4 (s=2) / 8.5e-8 (s=3) over 400
    steps instead of collapse; 'zero_first' (Lambda^1 = 0): 2.8e-2 / 8.9e-5."""
    _, dE, _ = sleigh_runs[s, "continuous"]
    # method (deterministic): measured 2.93e-4 / 8.53e-8 (continuous, margins 1.7 / 2.3) and
    # 2.78e-2 / 8.89e-5 (zero_first, margins 1.8 / 2.2), OPENBLAS_NUM_THREADS unset
    assert np.abs(dE).max() < (5e-4 if s == 2 else 2e-7)
    _, dEz, _ = sleigh_runs[s, "zero_first"]
    assert np.abs(dEz).max() < (5e-2 if s == 2 else 2e-4)


@pytest.mark.parametrize("s", [2, 3, 4])
def test_remedies_effect_on_order(nh, s):
    """'continuous' keeps the orders 2s - 2 in q (measured on the sleigh, T = 2: 1.87 / 4.0 /
    6.0); 'zero_first' loses them (~1 for s = 2, ~2 for s = 3, 4) and lambda does not converge
    (fitted order < 0.1)."""
    system = nh.sleigh_system()
    T = 2.0
    ref = reference_solution(system, nh.SLEIGH_Q0, nh.SLEIGH_V0, np.array([0.0, T]))
    hs = [0.1, 0.05, 0.025] if s == 2 else [0.2, 0.1, 0.05]
    orders = {}
    for mode in ("continuous", "zero_first"):
        errs = []
        for h in hs:
            method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule=mode)
            sol = integrate(system, method, nh.SLEIGH_Q0, nh.SLEIGH_V0, h=h, n_steps=round(T / h))
            errs.append(
                [np.abs(sol.q[-1] - ref.q[-1]).max(), np.abs(sol.lam[-1] - ref.lam[-1]).max()]
            )
        errs = np.array(errs)
        orders[mode] = (nh.fit_order(hs, errs[:, 0], 5e-13), nh.fit_order(hs, errs[:, 1], 5e-13))
    # method (deterministic): measured worst |slope - p| 0.13 (continuous, s = 2: margin 1.9),
    # 0.11 (zero_first q: 2.2), |λ slope| 0.097 (zero_first: 2.6), OPENBLAS_NUM_THREADS unset
    assert abs(orders["continuous"][0] - (2 * s - 2)) <= 0.25, orders
    zero_q_order = 1.0 if s == 2 else 2.0
    assert abs(orders["zero_first"][0] - zero_q_order) <= 0.25, orders
    assert abs(orders["zero_first"][1]) < 0.25, orders


# ---------------------------------------------------------------- 10^5 steps


@pytest.fixture(scope="module")
def long_run(nh):
    """10^5 Lobatto-2 steps of h = 0.1 (T = 10^4) of the particle and the CVT (eps = 1/2,
    both initial conditions), run as one decoupled product system particle x CVT x CVT
    (n = 9, m = 3): one unbatched trajectory, so each subsystem is integrated once and
    the step takes the single-trajectory path."""
    system = nh.particle_cvt_system(0.5, n_cvt=2)
    q0 = np.r_[nh.PARTICLE_Q0, nh.CVT_Q0, nh.CVT_Q0]
    v0 = np.r_[nh.PARTICLE_V0, nh.CVT_V0_LOW, nh.CVT_V0_HIGH]
    sol = integrate(
        system,
        NonholonomicPRK(lobatto_iiia_iiib(2), multiplier_rule="carry"),
        q0,
        v0,
        h=0.1,
        n_steps=100_000,
        save_every=10,
    )
    assert sol.success, sol.message
    res = np.abs(system.residual(sol.q, sol.v)).max()
    qa, va = sol.q[..., :3], sol.v[..., :3]
    Epart = 0.5 * np.sum(va**2, -1) + 0.5 * (qa[..., 0] ** 2 + qa[..., 1] ** 2)
    Ecvt = np.stack(
        [nh.cvt_energies(sol.q[..., k : k + 3], sol.v[..., k : k + 3])[2] for k in (3, 6)], -1
    )
    return sol.t, (Epart - Epart[0])[:, None], Ecvt - Ecvt[0], res


def test_energy_bounded_without_drift_over_1e5_steps(long_run):
    """Measured max |dE| on the first / second half of T = 10^4: particle 3.636e-3 /
    3.637e-3; CVT total low 1.309e-2 / 1.318e-2, high 2.514e-2 / 2.498e-2 (the T = 500
    values of paper §7.2); fitted linear trend x T: 5e-7, 3e-6, 5e-6 -- no drift.
    Checked: bounds 1.5x the measured maxima (1.52x for the low CVT), second half < 1.2x
    first half, trend < 5%."""
    t, dEp, dEc, res = long_run
    # Newton tolerance 1e-12 x scale (|v| ~ 3, so <= 4e-12): derived bound 1e-11
    assert res < 1e-11
    # method (deterministic): with the maxima measured above, the old bounds 5e-3 and 0.035
    # left margins 1.37 and 1.39 < 1.5; they are now 1.5 C h² with C h² = 3.637e-3 and
    # 2.514e-2 (0.02 for the low CVT leaves 1.52). The no-drift ratios m2 / m1 = 1.000, 1.007,
    # 0.994 against the threshold 1.2; the trends are <= 2.3e-4 of the maxima (threshold 0.05).
    half = len(t) // 2
    for dE, bound in [(dEp[:, 0], 1.5 * 3.637e-3), (dEc[:, 0], 0.02), (dEc[:, 1], 1.5 * 2.514e-2)]:
        m1, m2 = np.abs(dE[:half]).max(), np.abs(dE[half:]).max()
        assert max(m1, m2) < bound, (m1, m2)
        assert m2 < 1.2 * m1, (m1, m2)
        assert abs(np.polyfit(t, dE, 1)[0]) * t[-1] < 0.05 * max(m1, m2)
