"""Structure of the NH-PRK map: constraints at the nodes, symmetry, reversibility, forms,
batching, input checks (paper eq. (14), App. D; eq. (15), App. E; Thm. 5.1, Cor. 5.2.1; the docs'
theory page items 4 and 7)."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstraintViolationError,
    ConvergenceError,
    HypothesisError,
    InputError,
    NewtonOptions,
    State,
    integrate,
)
from chetaev.discrete_lagrangian.testing import assert_rounding_close, rounding_bound
from chetaev.nh_integrators import (
    MULTIPLIER_MODE_ALIASES,
    MULTIPLIER_RULES,
    LieNonholonomicPRK,
    NonholonomicPRK,
)
from chetaev.rktableaux import (
    PartitionedTableau,
    Tableau,
    gauss,
    lobatto_iiia_iiib,
    rk4,
    symplectic_conjugate,
)


@pytest.mark.parametrize("s", [2, 3, 4])
@pytest.mark.parametrize("tol", [1e-12, 1e-14])
def test_constraint_holds_at_every_node(nh, s, tol):
    """|Phi(q_k, v_k)| <= Newton tolerance x scale at every node (chaotic ensemble, 40 steps):
    the stage-s constraint is exactly Psi(q_{k+1}, p_{k+1}) = 0 (paper eq. (14), App. D)."""
    system = nh.chaotic_system()
    q0, v0 = nh.chaotic_ensemble(4)
    method = NonholonomicPRK(lobatto_iiia_iiib(s), newton=NewtonOptions(tol=tol))
    sol = integrate(system, method, q0, v0, h=0.1, n_steps=40)
    assert sol.success, sol.message
    res = np.abs(system.residual(sol.q, sol.v))[..., 0]
    # the solver's stopping threshold of step k -> k + 1 scales with the step's input (node k)
    scale = 1.0 + np.maximum(np.abs(sol.p).max(axis=-1), np.abs(sol.v).max(axis=-1))
    thr = max(tol, 64 * np.finfo(float).eps) * scale[:-1]
    # derived: the initial data lie on the constraint to the rounding of one 7-term
    # evaluation (measured 0), and each later node to the solver's stopping threshold plus
    # that rounding (the old allowance 1e-15 was below the rounding of the evaluation)
    assert res[0].max() <= rounding_bound(scale[0].max(), n_terms=7)
    assert np.all(res[1:] <= thr + rounding_bound(1.0, n_terms=7) * scale[:-1]), res.max()
    if tol == 1e-14:
        # measured worst 3.0e-14 (s = 2, 3, 4, OPENBLAS_NUM_THREADS=1 and unset): margin 3.3
        assert res.max() < 1e-13


@pytest.mark.parametrize("s", [2, 3])
def test_nonlinear_constraint_holds_at_every_node(nh, s):
    """Nonlinear Phi, implicit v_k^i unknowns: |Phi| < 1e-13 with NewtonOptions(tol=1e-14)."""
    system = nh.general_particle_system()
    method = NonholonomicPRK(lobatto_iiia_iiib(s), newton=NewtonOptions(tol=1e-14))
    sol = integrate(system, method, nh.GEN_Q0, nh.GEN_V0, h=0.1, n_steps=40)
    # solver threshold 64 eps x scale: measured worst 1.8e-14 (s = 2, 3): margin 5.6
    assert np.abs(system.residual(sol.q, sol.v)).max() < 1e-13


def _state(q, v, p, lam, t=0.0):
    return State(t=t, q=np.array(q), v=np.array(v), p=np.array(p), lam=np.array(lam))


@pytest.mark.parametrize("s", [2, 3, 4])
@pytest.mark.parametrize("model", ["particle_system", "chaotic_system"])
def test_symmetric_with_carried_multiplier(nh, s, model):
    """Stepping (q1, p1, lambda1) with -h returns (q0, p0, lambda0) (paper Thm. 5.1, Cor. 5.2.1:
    ~1e-15)."""
    system = getattr(nh, model)()
    if model == "particle_system":
        q0, v0 = nh.PARTICLE_Q0, nh.PARTICLE_V0
    else:
        q0s, v0s = nh.chaotic_ensemble()
        q0, v0 = q0s[3], v0s[3]
    method = NonholonomicPRK(
        lobatto_iiia_iiib(s), jacobian_reuse="iteration", multiplier_rule="carry"
    )  # full Newton
    st0 = method.initial_state(system, q0, v0)
    st = st0
    for _ in range(3):
        st = method.step(system, st, 0.2)
    back = st
    for _ in range(3):
        back = method.step(system, _state(back.q, back.v, back.p, back.lam, back.t), -0.2)
    # round-off and full-Newton stops over 6 steps: measured worst 1.1e-16 (q, p), 2.2e-15 (λ)
    # over s = 2, 3, 4 and both models (OPENBLAS_NUM_THREADS=1 and unset): margins >= 45
    assert np.abs(back.q - st0.q).max() < 1e-14
    assert np.abs(back.p - st0.p).max() < 1e-14
    assert np.abs(back.lam - st0.lam).max() < 1e-13


@pytest.mark.parametrize("s", [2, 3, 4])
def test_reversible_under_momentum_flip(nh, s):
    """(q1, -p1, lambda1) stepped with +h gives (q0, -p0, lambda0) (linear constraint,
    velocity-reversible particle; paper Thm. 5.1, Cor. 5.2.1: 1e-15)."""
    system = nh.particle_system()
    method = NonholonomicPRK(
        lobatto_iiia_iiib(s), jacobian_reuse="iteration", multiplier_rule="carry"
    )  # full Newton
    st0 = method.initial_state(system, nh.PARTICLE_Q0, nh.PARTICLE_V0)
    st1 = method.step(system, st0, 0.2)
    rev = method.step(system, _state(st1.q, -st1.v, -st1.p, st1.lam), 0.2)
    # measured worst 5.6e-17 (q), 0 (p), 1.1e-15 (λ) over s = 2, 3, 4: margins >= 91
    assert np.abs(rev.q - st0.q).max() < 1e-14
    assert np.abs(rev.p + st0.p).max() < 1e-14
    assert np.abs(rev.lam - st0.lam).max() < 1e-13


@pytest.mark.parametrize(
    ("model", "s"),
    [
        ("affine_particle_system", 3),
        ("particle_system", 2),
        ("particle_system", 3),
        ("particle_system", 4),
        ("chaotic_system", 3),
        ("general_particle_system", 3),
    ],
)
def test_hamiltonian_and_lagrangian_forms_agree(nh, model, s):
    """Eq. (15) and eq. (14) give the same map (paper eq. (15), App. E), also for a non-quadratic
    L."""
    system = getattr(nh, model)()
    if model == "particle_system":
        q0, v0 = nh.PARTICLE_Q0, nh.PARTICLE_V0
    elif model == "affine_particle_system":
        q0, v0 = nh.PARTICLE_Q0, np.array([0.5, 1.0, 0.25 + 0.3 * np.sin(1.0)])
    elif model == "chaotic_system":
        q0s, v0s = nh.chaotic_ensemble()
        q0, v0 = q0s[5], v0s[5]
    else:
        q0, v0 = nh.GEN_Q0, nh.GEN_V0
    opts = NewtonOptions(tol=1e-14)
    lag = integrate(
        system, NonholonomicPRK(lobatto_iiia_iiib(s), newton=opts), q0, v0, h=0.1, n_steps=20
    )
    ham = integrate(
        system,
        NonholonomicPRK(lobatto_iiia_iiib(s), form="hamiltonian", newton=opts),
        q0,
        v0,
        h=0.1,
        n_steps=20,
    )
    assert lag.success and ham.success
    # two formulations, each solved to tol 1e-14 x scale over 20 steps: measured worst
    # 4.2e-15 (q), 1.5e-14 (p), 6.3e-13 (λ ~ residual / h) over the 6 cases
    # (OPENBLAS_NUM_THREADS=1 and unset); bounds 1e-12, 1e-12, 1e-11: margins >= 15.8
    assert np.abs(lag.q - ham.q).max() < 1e-12
    assert np.abs(lag.p - ham.p).max() < 1e-12
    assert np.abs(lag.lam - ham.lam).max() < 1e-11


def test_implicit_velocity_path_equals_explicit(nh):
    """The general path (v_k^i as unknowns) reproduces the mechanical fast path. Both
    solve with full Newton (quadratic convergence, far below the stopping threshold), so
    the comparison sees the two formulations and not where each solve stopped."""
    system = nh.chaotic_system()
    q0s, v0s = nh.chaotic_ensemble()
    opts = NewtonOptions(tol=1e-14)
    a = integrate(
        system,
        NonholonomicPRK(lobatto_iiia_iiib(3), newton=opts, jacobian_reuse="iteration"),
        q0s[2],
        v0s[2],
        h=0.1,
        n_steps=20,
    )
    b = integrate(
        system,
        NonholonomicPRK(
            lobatto_iiia_iiib(3), newton=opts, implicit_velocity=True, jacobian_reuse="iteration"
        ),
        q0s[2],
        v0s[2],
        h=0.1,
        n_steps=20,
    )
    # measured 4.4e-16 (q) and 9.3e-14 (λ): margins 225 and 10.8
    assert np.abs(a.q - b.q).max() < 1e-13 and np.abs(a.lam - b.lam).max() < 1e-12


@pytest.mark.parametrize(
    ("s", "form", "reuse"),
    [
        (2, "lagrangian", "step"),
        (3, "lagrangian", "step"),
        (3, "hamiltonian", "step"),
        (3, "lagrangian", "steps"),
        (2, "lagrangian", "structured"),
        (4, "lagrangian", "structured"),
    ],
)
def test_batched_ensemble_equals_looped_runs(nh, s, form, reuse):
    """A (10, 7) batch (the §7.3 ensemble) equals ten single runs. With the inverse
    Jacobian carried between steps ('steps') the batch refreshes it for all members at
    once, and the structured matrix is rebuilt on the rate of the whole batch, so
    batch and single runs stop at different iterates: equal to solver tolerance (run with
    tol = 1e-14 there)."""
    system = nh.chaotic_system()
    q0, v0 = nh.chaotic_ensemble(9)
    opts = NewtonOptions(tol=1e-14) if reuse in ("steps", "structured") else NewtonOptions()
    method = NonholonomicPRK(lobatto_iiia_iiib(s), form=form, jacobian_reuse=reuse, newton=opts)
    batch = integrate(system, method, q0, v0, h=0.1, n_steps=20)
    assert batch.q.shape == (21, 10, 7) and batch.lam.shape == (21, 10, 1)
    for j in range(10):
        single = integrate(system, method, q0[j], v0[j], h=0.1, n_steps=20)
        # measured worst 3.6e-15 (q; 'steps') and, for λ, 1.0e-14 ('step', bound 1e-12) and
        # 1.25e-12 ('steps', bound 1e-11) over the 6 cases and 10 members
        # (OPENBLAS_NUM_THREADS=1 and unset): margins >= 8
        assert np.abs(batch.q[:, j] - single.q).max() < 1e-13
        assert np.abs(batch.lam[:, j] - single.lam).max() < (1e-12 if reuse == "step" else 1e-11)


def test_batched_two_leading_axes(nh):
    system = nh.chaotic_system()
    q0, v0 = nh.chaotic_ensemble(5)
    method = NonholonomicPRK(lobatto_iiia_iiib(2))
    st = method.initial_state(system, q0.reshape(2, 3, 7), v0.reshape(2, 3, 7))
    st = method.step(system, st, 0.1)
    flat = method.step(system, method.initial_state(system, q0, v0), 0.1)
    assert st.q.shape == (2, 3, 7) and st.lam.shape == (2, 3, 1)
    # the same batch in two shapes: one step's rounding of s·n-term sums (measured: equal)
    assert_rounding_close(st.q.reshape(6, 7), flat.q, n_terms=2 * 7, what="two batch axes")


# ---------------------------------------------------------------- initial data and input checks


def test_initial_multiplier_is_the_continuous_one(nh):
    system = nh.particle_system()
    st = NonholonomicPRK(lobatto_iiia_iiib(3)).initial_state(system, nh.PARTICLE_Q0, nh.PARTICLE_V0)
    x, y = nh.PARTICLE_Q0[:2]
    vx, vy = nh.PARTICLE_V0[:2]
    # paper §7.1 closed form vs the solve (round-off; np.allclose's default atol 1e-8 dropped)
    # (scale: the terms vx·vy, x·y, whose difference may cancel to 0)
    assert_rounding_close(st.lam, [(vx * vy - x * y) / (1 + y**2)], n_terms=3, n_ops=2,
                          scale=max(abs(vx * vy), abs(x * y), 1.0), what="λ0")
    assert_rounding_close(st.p, nh.PARTICLE_V0, n_terms=3, what="p0 = M v0 (M = I)")
    assert st.n == 0 and st.t == 0.0


def test_rejects_data_off_the_constraint_set(nh):
    method = NonholonomicPRK(lobatto_iiia_iiib(2))
    with pytest.raises(ConstraintViolationError, match="violate the constraint"):
        method.initial_state(nh.particle_system(), nh.PARTICLE_Q0, [0.5, 1.0, 0.0])


def test_rejects_wrong_shape_and_nan(nh):
    method = NonholonomicPRK(lobatto_iiia_iiib(2))
    with pytest.raises(InputError, match=r"shape \(\.\.\., 3\)"):
        method.initial_state(nh.particle_system(), [1.0, 0.5], nh.PARTICLE_V0)
    with pytest.raises(InputError, match="finite"):
        method.initial_state(nh.particle_system(), [np.nan, 0.5, 0.0], nh.PARTICLE_V0)


def test_refuses_pairs_violating_h1_h3():
    g = gauss(2)
    with pytest.raises(HypothesisError, match="H1"):
        NonholonomicPRK(PartitionedTableau(g, symplectic_conjugate(g)))


@pytest.mark.parametrize("cls", [NonholonomicPRK, LieNonholonomicPRK])
def test_refuses_pairs_violating_h2_or_h3(cls):
    """H1 holds but H3 fails (not stiffly accurate), and RK4 (H2 and H3 fail): refused by
    both classes, the failed hypotheses named once, with the fix."""
    t = Tableau(np.array([[0.0, 0.0], [0.5, 0.5]]), np.array([0.25, 0.75]))
    with pytest.raises(HypothesisError, match=rf"^{cls.__name__} needs.*fails H3") as info:
        cls(PartitionedTableau(t, symplectic_conjugate(t)))
    assert str(info.value).count("Use ") == 1
    with pytest.raises(HypothesisError, match=r"fails H2 .*H3.*Use lobatto_iiia_iiib"):
        cls(PartitionedTableau(rk4(), symplectic_conjugate(rk4())))


@pytest.mark.parametrize("h", [0.0, np.nan, np.inf])
def test_step_rejects_zero_or_non_finite_h(nh, h):
    """h = 0 used to return the input state (singular Newton matrix unnoticed); NaN/inf
    surfaced as a ConvergenceError with a NaN residual."""
    system = nh.particle_system()
    for form in ("lagrangian", "hamiltonian"):
        method = NonholonomicPRK(lobatto_iiia_iiib(3), form=form)
        state = method.initial_state(system, nh.PARTICLE_Q0, nh.PARTICLE_V0)
        with pytest.raises(InputError, match=r"`h` must be finite and nonzero.*negative h"):
            method.step(system, state, h)


def test_rejects_unknown_options():
    with pytest.raises(InputError, match="form"):
        NonholonomicPRK(lobatto_iiia_iiib(2), form="symplectic")
    with pytest.raises(InputError, match="multiplier_mode"):
        NonholonomicPRK(lobatto_iiia_iiib(2), multiplier_mode="reset")
    with pytest.raises(InputError, match="constraint_momenta"):
        NonholonomicPRK(lobatto_iiia_iiib(2), constraint_momenta="iiib")
    with pytest.raises(InputError, match="form='lagrangian'"):
        NonholonomicPRK(
            lobatto_iiia_iiib(3), form="hamiltonian", constraint_momenta="iiib_rejected"
        )
    with pytest.raises(InputError, match="jacobian_reuse"):
        NonholonomicPRK(lobatto_iiia_iiib(2), jacobian_reuse="never")
    with pytest.raises(InputError, match="implicit_velocity=True applies to form='lagrangian'"):
        NonholonomicPRK(lobatto_iiia_iiib(2), form="hamiltonian", implicit_velocity=True)


def test_one_multiplier_rule_vocabulary():
    """Both classes take ``multiplier_rule`` from the shared ``MULTIPLIER_RULES``."""
    assert MULTIPLIER_RULES == ("carry", "zero_first", "continuous", "weighted_sum")
    pair = lobatto_iiia_iiib(2)
    assert NonholonomicPRK(pair).multiplier_rule == "continuous"  # the safe default
    assert LieNonholonomicPRK(2).multiplier_rule == "continuous"
    for rule in MULTIPLIER_RULES[:3]:
        assert NonholonomicPRK(pair, multiplier_rule=rule).multiplier_rule == rule
        assert LieNonholonomicPRK(2, multiplier_rule=rule).multiplier_rule == rule
    with pytest.raises(InputError, match=r"weighted_sum.*not offered by NonholonomicPRK"):
        NonholonomicPRK(pair, multiplier_rule="weighted_sum")
    with pytest.raises(InputError, match="multiplier_rule"):
        NonholonomicPRK(pair, multiplier_rule="carried-over")


@pytest.mark.parametrize("old", ["carried", "continuous", "zero"])
def test_multiplier_mode_alias_gives_the_same_method(nh, old):
    """The old keyword ``multiplier_mode`` maps carried -> carry, zero -> zero_first and
    gives the same (equal) method and the same trajectory bit for bit."""
    pair = lobatto_iiia_iiib(3)
    new = MULTIPLIER_MODE_ALIASES[old]
    m_old = NonholonomicPRK(pair, multiplier_mode=old)
    m_new = NonholonomicPRK(pair, multiplier_rule=new)
    assert m_old == m_new and m_old.multiplier_rule == new
    assert NonholonomicPRK(pair, multiplier_rule=old) == m_new  # old value, new keyword
    assert NonholonomicPRK(pair, multiplier_mode=old, multiplier_rule=new) == m_new
    assert attrs.evolve(m_old, multiplier_rule="carry").multiplier_rule == "carry"
    system = nh.sleigh_system()
    runs = [
        integrate(system, m, nh.SLEIGH_Q0, nh.SLEIGH_V0, h=0.1, n_steps=20) for m in (m_old, m_new)
    ]
    assert np.array_equal(runs[0].q, runs[1].q) and np.array_equal(runs[0].lam, runs[1].lam)
    if old != "carried":  # the rule is really applied (differs from the carried map)
        carried = integrate(
            system,
            NonholonomicPRK(pair, multiplier_rule="carry"),
            nh.SLEIGH_Q0,
            nh.SLEIGH_V0,
            h=0.1,
            n_steps=20,
        )
        assert not np.array_equal(carried.lam, runs[0].lam)


def test_multiplier_mode_alias_conflicts_are_refused():
    pair = lobatto_iiia_iiib(2)
    with pytest.raises(InputError, match="contradicts multiplier_rule='continuous'"):
        NonholonomicPRK(pair, multiplier_mode="zero", multiplier_rule="continuous")
    with pytest.raises(InputError, match="old spelling of `multiplier_rule`"):
        NonholonomicPRK(pair, multiplier_mode="zero_first")


def test_newton_failure_raises_convergence_error(nh):
    system = nh.chaotic_system()
    q0s, v0s = nh.chaotic_ensemble()
    method = NonholonomicPRK(lobatto_iiia_iiib(3), newton=NewtonOptions(max_iter=1))
    st = method.initial_state(system, q0s[0], v0s[0])
    with pytest.raises(ConvergenceError, match=r"Newton did not converge at step 0 .*Try: halve h"):
        method.step(system, st, 2.0)
    sol = integrate(system, method, q0s[0], v0s[0], h=2.0, n_steps=3)
    assert not sol.success and "Newton did not converge" in sol.message


def test_state_is_frozen_and_carries_diagnostics(nh):
    method = NonholonomicPRK(lobatto_iiia_iiib(2))
    system = nh.particle_system()
    st = method.step(system, method.initial_state(system, nh.PARTICLE_Q0, nh.PARTICLE_V0), 0.1)
    assert st.n == 1 and st.t == 0.1  # 0.0 + 0.1: exact in floating point (measured: equal)
    # derived: the solver's default stopping threshold 1e-12 x scale; measured 3.0e-13 (the
    # residual and the constraint, OPENBLAS_NUM_THREADS=1 and unset): margin 6.7
    scale = 1.0 + np.abs(nh.PARTICLE_V0).max()  # the step input (p_0 = v_0, unit mass)
    assert st.info["newton_iterations"] >= 1 and st.info["residual"] <= 1e-12 * scale
    # 'auto' with one trajectory: the analytic Jacobian ('step')
    assert st.info["structured_matrices"] == 0 and st.info["jacobians"] == 1
    assert np.abs(system.residual(st.q, st.v)).max() <= 1e-12 * scale
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        st.t = 3.0


def test_restart_from_saved_trajectory_is_bit_for_bit(nh, tmp_path):
    """The carry (predictor history) is saved with the trajectory: 10 + 10 steps through
    save/load equal 20 steps in one run, exactly."""
    from chetaev.discrete_lagrangian import Trajectory

    system = nh.chaotic_system()
    q0s, v0s = nh.chaotic_ensemble()
    method = NonholonomicPRK(lobatto_iiia_iiib(3))
    full = integrate(system, method, q0s[1], v0s[1], h=0.1, n_steps=20)
    first = integrate(system, method, q0s[1], v0s[1], h=0.1, n_steps=10)
    first.save(tmp_path / "run.npz")
    restart = Trajectory.load(tmp_path / "run.npz").final_state()
    second = integrate(system, method, restart, h=0.1, n_steps=10)
    assert np.array_equal(second.q[-1], full.q[-1])
    assert np.array_equal(second.lam[-1], full.lam[-1])


@pytest.mark.parametrize(
    ("cls", "opts", "field"),
    [
        (NonholonomicPRK, {"finite_differences": True}, "finite_differences=True"),
        (NonholonomicPRK, {"simplified": True}, "simplified=True"),
        (LieNonholonomicPRK, {"atol": 1e-9}, "atol=1e-09"),
        (LieNonholonomicPRK, {"max_stall": 5}, "max_stall=5"),
    ],
)
def test_refuses_newton_options_it_would_ignore(cls, opts, field):
    """A NewtonOptions field the step's solver does not read used to be accepted and
    silently ignored."""
    with pytest.raises(InputError, match=rf"reads only .* {field} would be ignored"):
        cls(lobatto_iiia_iiib(3), newton=NewtonOptions(**opts))
    cls(lobatto_iiia_iiib(3), newton=NewtonOptions(tol=1e-13, max_iter=20))  # the read fields


def test_initial_state_rejects_mis_shaped_lam0(nh):
    """lam0 of the wrong length or batch used to surface as numpy's broadcasting error."""
    system = nh.particle_system()
    method = NonholonomicPRK(lobatto_iiia_iiib(2))
    q0 = np.stack([nh.PARTICLE_Q0] * 2)
    v0 = np.stack([nh.PARTICLE_V0] * 2)
    with pytest.raises(InputError, match=r"`lam0` must have shape \(\.\.\., 1\)"):
        method.initial_state(system, q0, v0, lam0=[0.0, 0.0])
    with pytest.raises(InputError, match="does not broadcast to the batch"):
        method.initial_state(system, q0, v0, lam0=np.zeros((3, 1)))
    lie = LieNonholonomicPRK(2)
    disc = nh.vertical_disc()
    g0, eta0 = nh.disc_initial()
    with pytest.raises(InputError, match=r"`lam0` must have shape \(\.\.\., 1\)"):
        lie.initial_state(disc, g0, eta0, lam0=[0.0, 0.0])
    with pytest.raises(InputError, match="does not broadcast to the batch"):
        lie.initial_state(disc, g0, eta0, lam0=np.zeros((3, 1)))


def test_batched_newton_failure_names_the_failed_entries(nh):
    """A batched Newton failure names the failed trajectories (here, with max_iter = 1 and
    h = 2, all three members of a (3, 1) batch fail) and reports their worst residual."""
    system = nh.chaotic_system()
    q0s, v0s = nh.chaotic_ensemble()
    method = NonholonomicPRK(lobatto_iiia_iiib(3), newton=NewtonOptions(max_iter=1))
    st = method.initial_state(system, q0s[:3].reshape(3, 1, 7), v0s[:3].reshape(3, 1, 7))
    with pytest.raises(
        ConvergenceError, match=r"failed batch entries: \[\(0, 0\), \(1, 0\), \(2, 0\)\]\)"
    ):
        method.step(system, st, 2.0)


def test_s2_is_the_nonholonomic_trapezoidal_scheme(nh):
    """Paper §5.1: for s = 2 (constant mass, linear Phi) eq. (14) is the two-step nonholonomic
    RATTLE with L_d trapezoidal, qbar_k = (q_{k+1} - q_k)/h:
    D2L_d(q_{k-1}, q_k) + D1L_d(q_k, q_{k+1}) = -h A(q_k)^T lambda_k, the discrete Legendre
    transform p_k = D2L_d(q_{k-1}, q_k) + (h/2) A(q_k)^T lambda_k, and Phi(q_k, v_k) = 0."""
    system = nh.particle_system()
    h = 0.1
    method = NonholonomicPRK(
        lobatto_iiia_iiib(2), newton=NewtonOptions(tol=1e-15), multiplier_rule="carry"
    )
    sol = integrate(system, method, nh.PARTICLE_Q0, nh.PARTICLE_V0, h=h, n_steps=30)
    q, p, lam = sol.q, sol.p, sol.lam
    grad_v = np.array(q, copy=True)
    grad_v[:, 2] = 0.0  # V = (x^2 + y^2)/2
    qbar = np.diff(q, axis=0) / h
    d2 = qbar[:-1] - 0.5 * h * grad_v[1:-1]  # D2L_d(q_{k-1}, q_k)
    d1 = -qbar[1:] - 0.5 * h * grad_v[1:-1]  # D1L_d(q_k, q_{k+1})
    At = np.swapaxes(system.constraint.A(q[1:-1]), -1, -2)  # (K, 3, 1)
    force = (At @ lam[1:-1, :, None])[..., 0]
    # round-off of the recomputed equations (terms |q̄| ~ 1): measured 1.8e-15 and 1.0e-15
    # (OPENBLAS_NUM_THREADS=1 and unset): margins 5.5 and 9.7
    assert np.abs(d2 + d1 + h * force).max() < 1e-14
    assert np.abs(p[1:-1] - (d2 + 0.5 * h * force)).max() < 1e-14
    # derived: the solver stops at 64 eps x (1 + max(|p_k|, |v_k|)) (measured max 2.8e-14),
    # plus the rounding of evaluating the 3-term constraint
    scale = 1.0 + np.maximum(np.abs(p).max(axis=-1), np.abs(sol.v).max(axis=-1))
    thr = (64 * np.finfo(float).eps + rounding_bound(1.0, n_terms=3)) * scale[:-1]
    assert np.all(np.abs(system.residual(q, sol.v))[1:, 0] <= thr)
