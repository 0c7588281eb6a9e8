"""Step linearizations of NonholonomicPRK (issue 20): ``step_linearization``.

A = ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k) and B = ∂(q_{k+1}, p_{k+1})/∂u from the converged unknowns
of eq. (14) (App. D) by the implicit function theorem, against central finite differences of
``step`` (an independent computation: only the step map is used), on nonlinear problems:

* the Chaplygin sleigh (q-dependent constraint A(q), constant mass: the engine's per-step
  path, structured Newton matrix for batches) with F = −c(1 + |q|²)v + u·b;
* the chaotic system of paper §7.3 (m = 2, n = 5, nonlinear potential) with the same force;
* the general Lagrangian with a constraint nonlinear in v (implicit v_k^i unknowns) with
  F = −c(1 + |q|²)v + u·b;
* the multiplier rules ``"continuous"``, ``"carry"`` (in the complete state (q, p, λ),
  ``"(xi, mu, lam)"`` on a group: its step reads λ_k; the product of 5 step A's against
  central differences of 5 steps), ``"zero_first"``, the IIIB variant
  and the Hamiltonian form (the same map, eq. (15), App. E; forced too, measured worst
  3.0e-11 of max|[A B]|).

The finite-difference bound is ``chetaev.discrete_lagrangian.testing.step_fd_rtol(h)``
(derived in ``packages/discrete-lagrangian/tests/test_linearization.py``: central
differences, δ = 1e-5, of steps solved at the rounding floor: (64·eps/δ + tol)·max(1, 2/|h|) +
δ² of max|[A B]|; 1.4e-8 at h = 0.2, 5.7e-8 at h = 0.05, within the issue's ~1e-7). The
continuous rule's dΛ¹/d(q, v) is the implicit derivative of the multiplier's KKT system
(``ConstrainedSystem.multiplier_jacobian``): exact for the symbolic systems
(``test_symbolic_*``), and for these hand-written ones with the blocks they lack (∂²A/∂q²,
third derivatives of L) central differences (error ~1e-10 of |dλ|) entering at O(h): inside
that bound; ``lin.finite_differences`` names them. Measured
worst deviation over the cases below (130 single and batched linearizations, h = 0.2,
OPENBLAS_NUM_THREADS=1 and unset): 3.5e-11 of max|[A B]| (sleigh, Lobatto 3, controlled,
single), 1/410 of the bound 1.4e-8.

**LieNonholonomicPRK** (the tests named ``test_lie_*``). The state (g, μ) is perturbed as
(g τ(ε), μ + δμ), ε ∈ 𝔤 left-trivialized and τ the method's retraction;
A = ∂(ζ_{k+1}, δμ_{k+1})/∂(ε, δμ) comes from the converged unknowns of App. F by
the implicit function theorem. Checked against central finite differences of ``step`` in
the same chart (``step_finite_differences(..., coordinates="(xi, mu)")``, bound
``step_fd_rtol(h)``: (64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|A|, 1.4e-8
at h = 0.2; the continuous rule's dλ is the KKT system's implicit derivative, exact for a
symbolic system, with central differences of the blocks a hand-written one lacks, ~1e-10
relative, entering at O(h)) on:

* the vertical disc on SE(2) (§7.4) with its linear constraint and with the nonlinear
  φ = v₂ + v₂³, Cayley and exp, s = 2, 3, 4, rules continuous / carry / zero_first
  (weighted_sum: its own test, the rule is near-degenerate there);
* the same disc as a general trivialized Lagrangian with a quartic kinetic term (the
  inner-stage η unknowns of the Lagrangian form; the Hamiltonian form's numerical Fℓ⁻¹);
* the ball on a turntable on SO(3)×R² (§7.5: affine constraints depending on g);
* forced (``test_lie_forced_*``): the disc models with the g-, η- and u-dependent force
  ``_disc_force`` (a control component along the constraint, so the forced continuous Λ¹
  depends on u), every method above, A and B.

Measured worst deviation over these cases (48 single and batched linearizations, h = 0.2;
OPENBLAS_NUM_THREADS=1 and unset): 2.0e-11 of max|A| (disc, Lobatto 2 / exp, batched),
1/700 of the bound.
"""

from __future__ import annotations

import functools

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import ConstrainedSystem
from chetaev.discrete_lagrangian.testing import (
    multistep_linearization_error,
    rounding_bound,
    step_fd_rtol,
    step_finite_differences,
    step_linearization_error,
)
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
from chetaev.nh_integrators import testing as nt
from chetaev.nh_integrators._lie_testing import turntable_ball, vertical_disc_general
from chetaev.rktableaux import lobatto_iiia_iiib

C = 0.3
H = 0.2  # the step of the linearized steps (as in the discrete-lagrangian tests)


def _forced(system: ConstrainedSystem, controlled: bool) -> ConstrainedSystem:
    """``system`` with F = −c(1 + |q|²)v (+ u·b, b = (1, 0.5, 0, ...)): nonlinear, velocity
    dependent, with the analytic derivatives."""
    n = int(system.system.n)
    b = np.zeros(n)
    b[:2] = (1.0, 0.5)

    def force(q, v, u):
        F = -C * (1.0 + np.sum(q * q, -1))[..., None] * v
        return F + u[..., :1] * b if controlled else F

    def derivs(q, v, u):
        w = 1.0 + np.sum(q * q, -1)
        Fq = -2.0 * C * v[..., :, None] * q[..., None, :]
        Fv = -C * w[..., None, None] * np.eye(n)
        Fu = np.broadcast_to(b[:, None], (*q.shape[:-1], n, 1 if controlled else 0))
        return Fq, Fv, (Fu if controlled else np.zeros((*q.shape[:-1], n, 0)))

    inner = attrs.evolve(system.system, force=force, force_derivatives=derivs,
                         n_controls=1 if controlled else 0)
    return attrs.evolve(system, system=inner)


def _sleigh_data():
    v = np.array(nt.SLEIGH_V0)
    return nt.sleigh_system(), np.array([0.1, -0.2, 0.0]), v  # Phi(q, v) = 0 at theta = 0


MODELS = {
    "sleigh": _sleigh_data,
    "chaotic": lambda: (nt.chaotic_system(2), np.array([0.5, 0.6, 0.4, 1.0, 1.0]),
                        np.array([-0.3, 0.8, 0.3, 0.3, 0.0])),
    "general": lambda: (nt.general_particle_system(), np.array(nt.GEN_Q0),
                        np.array(nt.GEN_V0)),
}
METHODS = {
    "lobatto3": lambda: NonholonomicPRK(lobatto_iiia_iiib(3)),
    "lobatto2": lambda: NonholonomicPRK(lobatto_iiia_iiib(2)),
    "lobatto4-iteration": lambda: NonholonomicPRK(lobatto_iiia_iiib(4), jacobian_reuse="iteration"),
    "carry": lambda: NonholonomicPRK(lobatto_iiia_iiib(3), multiplier_rule="carry"),
    "carry-hamiltonian": lambda: NonholonomicPRK(lobatto_iiia_iiib(2), multiplier_rule="carry",
                                                 form="hamiltonian"),
    "zero_first": lambda: NonholonomicPRK(lobatto_iiia_iiib(3), multiplier_rule="zero_first"),
    "iiib": lambda: NonholonomicPRK(lobatto_iiia_iiib(3), constraint_momenta="iiib_rejected"),
    "implicit": lambda: NonholonomicPRK(lobatto_iiia_iiib(3), implicit_velocity=True),
    "hamiltonian": lambda: NonholonomicPRK(lobatto_iiia_iiib(3), form="hamiltonian"),
}
KINDS = ("unforced", "dissipative", "controlled")


def _setup(model, method_name, kind, batched):
    system, q0, v0 = MODELS[model]()
    method = METHODS[method_name]()
    if kind != "unforced":
        system = _forced(system, kind == "controlled")
    if batched:  # two members: the data and the data one step later (both on the set)
        u1 = np.array([0.7]) if kind == "controlled" else None
        s0 = method.initial_state(system, q0, v0, u=u1)
        s1 = method.step(system, s0, 0.1, u=u1)
        q0, v0 = np.stack([q0, s1.q]), np.stack([v0, s1.v])
    u = None
    if kind == "controlled":
        u = np.array([[0.7], [-0.4]]) if batched else np.array([0.7])
    state = method.initial_state(system, q0, v0, u=u)
    return method, system, state, u


def _cases():
    for model in MODELS:
        for name in METHODS:
            for kind in KINDS:
                if model == "general" and name in ("hamiltonian", "carry-hamiltonian"):
                    continue  # needs an explicit FL^-1 in its own residual: covered below
                yield model, name, kind


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize(("model", "name", "kind"), list(_cases()))
def test_linearization_matches_finite_differences(model, name, kind, batched):
    """A and B against central differences of the step (module docstring), h = 0.2; the
    ``"carry"`` rule in the complete state (q, p, λ) (its step reads λ_k: Λ¹ = λ_k)."""
    h = H
    method, system, state, u = _setup(model, name, kind, batched)
    lin, err = step_linearization_error(method, system, state, h, u)
    n = state.q.shape[-1]
    k = 2 * n + (state.lam.shape[-1] if name.startswith("carry") else 0)
    assert lin.coordinates == ("(q, p, lam)" if name.startswith("carry") else "(q, p)")
    assert lin.A.shape == (*state.q.shape[:-1], k, k)
    assert lin.B.shape == (*state.q.shape[:-1], k, 1 if kind == "controlled" else 0)
    assert err <= step_fd_rtol(h), (model, name, kind, batched, err)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("model", list(MODELS))
def test_tangent_space_is_mapped_into_tangent_space(model, kind):
    """``basis``/``next_basis`` are orthonormal and tangent to {Φ(q, FL⁻¹(q, p)) = 0} (checked
    by central differences of Φ along them, δ = 1e-6: truncation δ²|Φ'''| ≲ 1e-11, rounding
    eps/δ ≈ 2e-10, so 1e-8); every step ends on that set (its last stage is the node, eq.
    (14e)), so A and B map into the next tangent space: |(I − E1E1ᵀ)[A B]| is the Newton
    error at tol = 1e-12 times the O(1) condition of the step's Jacobian, bound 1e-10
    (measured: 4.3e-16); A_tangent = E1ᵀ A E0 to rounding."""
    method, system, state, u = _setup(model, "lobatto3", kind, True)
    lin = method.step_linearization(system, state, H, u=u)
    E0, E1 = lin.basis, lin.next_basis
    n, m = state.q.shape[-1], state.lam.shape[-1]
    d = 2 * n - m
    assert E0.shape == E1.shape == (2, 2 * n, d)
    assert lin.A_tangent.shape == (2, d, d)
    assert lin.B_tangent.shape == (2, d, lin.B.shape[-1])
    for E, st in ((E0, state), (E1, lin.state)):
        assert np.max(np.abs(np.swapaxes(E, -1, -2) @ E - np.eye(d))) <= rounding_bound(1.0, 2 * n)
        delta = 1e-6
        for j in range(d):
            dq, dp = delta * E[..., :n, j], delta * E[..., n:, j]

            def phi(sign, st=st, dq=dq, dp=dp):
                q, p = st.q + sign * dq, st.p + sign * dp
                return system.constraint.residual(q, system.legendre_inv(q, p))

            assert np.max(np.abs(phi(1.0) - phi(-1.0)) / (2 * delta)) <= 1e-8
    P1 = np.eye(2 * n) - E1 @ np.swapaxes(E1, -1, -2)
    AB = np.concatenate([lin.A, lin.B], -1)
    assert np.max(np.abs(P1 @ AB)) <= 1e-10 * max(1.0, np.max(np.abs(AB)))
    np.testing.assert_allclose(lin.A_tangent, np.swapaxes(E1, -1, -2) @ lin.A @ E0, rtol=0,
                               atol=rounding_bound(np.max(np.abs(lin.A)), 4 * n))


def test_hamiltonian_form_equals_lagrangian_form():
    """The two forms are the same map (eq. (15), App. E): their linearizations agree to the
    Newton tolerance (1e-12) times the O(1) condition of the step: bound 1e-9."""
    system, q0, v0 = MODELS["sleigh"]()
    lins = []
    for form in ("lagrangian", "hamiltonian"):
        method = NonholonomicPRK(lobatto_iiia_iiib(3), form=form)
        state = method.initial_state(system, q0, v0)
        lins.append(method.step_linearization(system, state, H))
    np.testing.assert_allclose(lins[0].A, lins[1].A, rtol=0, atol=1e-9)


# -- LieNonholonomicPRK in the tangent coordinates of its retraction ------------------------------
H_LIE = H


def _lie_disc(kind="linear"):
    g0, eta0 = nt.disc_initial()
    return nt.vertical_disc(constraint=kind), g0, eta0


def _lie_general():
    g0, eta0 = nt.disc_initial()
    return vertical_disc_general(quartic=0.3), g0, eta0


def _lie_ball():
    from chetaev.nh_integrators._lie_testing import ball_initial

    g0, eta0 = ball_initial()
    return turntable_ball(), g0, eta0


LIE_MODELS = {"disc": _lie_disc, "disc-nonlinear": lambda: _lie_disc("nonlinear"),
              "general": _lie_general, "ball": _lie_ball}
LIE_METHODS = {
    "s3-cayley": dict(pair=3, retraction="cayley"),
    "s2-exp": dict(pair=2, retraction="exp"),
    "s4-cayley": dict(pair=4, retraction="cayley"),
    "carry": dict(pair=3, retraction="cayley", multiplier_rule="carry"),
    "zero_first": dict(pair=3, retraction="exp", multiplier_rule="zero_first"),
    "hamiltonian": dict(pair=3, retraction="cayley", form="hamiltonian"),
}


def _lie_setup(model, name, batched):
    system, g0, eta0 = LIE_MODELS[model]()
    kw = dict(LIE_METHODS[name])
    method = LieNonholonomicPRK(lobatto_iiia_iiib(kw.pop("pair")), **kw)
    if batched:  # the data and the data one step later (both on the constraint set)
        s1 = method.step(system, method.initial_state(system, g0, eta0), 0.1)
        g0, eta0 = np.stack([g0, s1.q]), np.stack([eta0, s1.v])
    return method, system, method.initial_state(system, g0, eta0)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", list(LIE_METHODS))
@pytest.mark.parametrize("model", list(LIE_MODELS))
def test_lie_linearization_matches_finite_differences(model, name, batched):
    """A against central differences of the step in the retraction's chart (module
    docstring), the ``"carry"`` rule in the complete state (ε, δμ, λ); B has zero columns
    (an unforced system)."""
    method, system, state = _lie_setup(model, name, batched)
    lin, err = step_linearization_error(method, system, state, H_LIE)
    d = state.p.shape[-1]
    k = 2 * d + (state.lam.shape[-1] if name == "carry" else 0)
    assert lin.coordinates == ("(xi, mu, lam)" if name == "carry" else "(xi, mu)")
    assert lin.A.shape == (*state.p.shape[:-1], k, k)
    assert lin.B.shape == (*state.p.shape[:-1], k, 0)
    assert err <= step_fd_rtol(H_LIE), (model, name, batched, err)


KAPPA = 0.8  # the control's lateral component: the forced continuous Λ¹ moves with u


def _disc_force(g, eta, u):
    """F(g, η, u) = (−c(1 + x² + y²)v₁ + u, κu, −cω + u/2) on SE(2): configuration- and
    velocity-dependent, and with a control component along the constraint (v₂ = 0), so the
    multiplier of the forced equations depends on u."""
    x, y = g[..., 0, 2], g[..., 1, 2]
    w = 1.0 + x * x + y * y
    u0 = u[..., 0]
    return np.stack(np.broadcast_arrays(-C * w * eta[..., 0] + u0, KAPPA * u0,
                                        -C * eta[..., 2] + 0.5 * u0), axis=-1)


def _disc_force_derivatives(g, eta, u):
    """Left-trivialized: g exp(ε) moves (x, y) by R(θ)(ε₁, ε₂), so
    ∂(x² + y²)/∂ε = 2(x cos θ + y sin θ, −x sin θ + y cos θ, 0)."""
    x, y, c, sn = g[..., 0, 2], g[..., 1, 2], g[..., 0, 0], g[..., 1, 0]
    w = 1.0 + x * x + y * y
    batch = np.broadcast_shapes(w.shape, eta.shape[:-1], u.shape[:-1])
    Fg = np.zeros((*batch, 3, 3))
    Fg[..., 0, 0] = -2.0 * C * eta[..., 0] * (x * c + y * sn)
    Fg[..., 0, 1] = -2.0 * C * eta[..., 0] * (-x * sn + y * c)
    Fv = np.zeros((*batch, 3, 3))
    Fv[..., 0, 0] = -C * w
    Fv[..., 2, 2] = -C
    Fu = np.broadcast_to(np.array([[1.0], [KAPPA], [0.5]]), (*batch, 3, 1))
    return Fg, Fv, Fu


def _lie_forced_setup(model, name, batched):
    """The disc models with :func:`_disc_force` (exact derivatives, one control) and the
    control 0.7 (batched: 0.7 and −0.4, the second member one step later)."""
    system, g0, eta0 = LIE_MODELS[model]()
    system = attrs.evolve(system, system=attrs.evolve(
        system.system, force=_disc_force, force_derivatives=_disc_force_derivatives,
        n_controls=1))
    kw = dict(LIE_METHODS[name])
    method = LieNonholonomicPRK(lobatto_iiia_iiib(kw.pop("pair")), **kw)
    u = np.array([0.7])
    if batched:
        s1 = method.step(system, method.initial_state(system, g0, eta0, u=u), 0.1, u=u)
        g0, eta0 = np.stack([g0, s1.q]), np.stack([eta0, s1.v])
        u = np.array([[0.7], [-0.4]])
    return method, system, method.initial_state(system, g0, eta0, u=u), u


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", list(LIE_METHODS))
@pytest.mark.parametrize("model", ["disc", "disc-nonlinear", "general"])
def test_lie_forced_linearization_matches_finite_differences(model, name, batched):
    """Forced LieNonholonomicPRK (issue 20): the IFT runs with the step's forced hooks (the
    force's left-trivialized g- and η-derivatives in the Newton matrix, B from F_u), and the
    ``"continuous"`` Λ¹ is the multiplier of the forced equations, whose exact u-derivative
    −C⁻¹φ_η G⁻¹F_u enters B. [A B] against central differences of the step in the
    retraction's chart (bound ``step_fd_rtol(h)``, 1.4e-8; measured worst 1.9e-11 of
    max|[A B]|, disc-nonlinear, s = 3 / Cayley, batched (OPENBLAS_NUM_THREADS=1 and unset),
    1/740 of the bound). With the IFT blind to the force the deviation was 0.058 (Lobatto 3
    / Cayley on the forced disc of ``test_lie_forces``); without Λ¹'s u-derivative it is
    0.018 (general ℓ, s = 2 / exp)."""
    method, system, state, u = _lie_forced_setup(model, name, batched)
    lin, err = step_linearization_error(method, system, state, H_LIE, u)
    d, m = state.p.shape[-1], (state.lam.shape[-1] if name == "carry" else 0)
    assert lin.A.shape == (*state.p.shape[:-1], 2 * d + m, 2 * d + m)
    assert lin.B.shape == (*state.p.shape[:-1], 2 * d + m, 1)
    assert lin.B_tangent.shape == (*state.p.shape[:-1], 2 * d - 1 + m, 1)
    assert err <= step_fd_rtol(H_LIE), (model, name, batched, err)


@pytest.mark.parametrize("model", list(LIE_MODELS))
def test_lie_tangent_space_is_mapped_into_tangent_space(model):
    """``basis``/``next_basis`` are orthonormal (2d − m columns) and tangent to
    {φ(g, Fℓ⁻¹(g, μ)) = 0} (central differences of φ along them in the chart, δ = 1e-6:
    truncation ≲ 1e-11, rounding eps/δ ≈ 2e-10, so 1e-8); every step ends on that set, so
    A maps into the next tangent space: |(I − E1E1ᵀ)A| ≤ 1e-10·max(1, |A|) (Newton error
    ~1e-13 times an O(1) condition; measured 4.6e-16); A_tangent = E1ᵀ A E0 to rounding."""
    from chetaev.liegroups import retraction

    method, system, state = _lie_setup(model, "s3-cayley", True)
    lin = method.step_linearization(system, state, H_LIE)
    d, m = state.p.shape[-1], state.lam.shape[-1]
    k = 2 * d - m
    E0, E1 = lin.basis, lin.next_basis
    assert E0.shape == E1.shape == (2, 2 * d, k) and lin.A_tangent.shape == (2, k, k)
    group = system.group
    tau = retraction(group, method.retraction)
    delta = 1e-6
    for E, st in ((E0, state), (E1, lin.state)):
        assert np.max(np.abs(np.swapaxes(E, -1, -2) @ E - np.eye(k))) <= rounding_bound(1.0, 2 * d)
        for j in range(k):
            def phi(sign, st=st, col=E[..., j]):
                g = group.compose(st.q, tau(sign * delta * col[..., :d]))
                mu = st.p + sign * delta * col[..., d:]
                return system.constraint.residual(g, system.legendre_inv(g, mu))

            assert np.max(np.abs(phi(1.0) - phi(-1.0)) / (2 * delta)) <= 1e-8
    P1 = np.eye(2 * d) - E1 @ np.swapaxes(E1, -1, -2)
    assert np.max(np.abs(P1 @ lin.A)) <= 1e-10 * max(1.0, np.max(np.abs(lin.A)))
    np.testing.assert_allclose(lin.A_tangent, np.swapaxes(E1, -1, -2) @ lin.A @ E0, rtol=0,
                               atol=rounding_bound(np.max(np.abs(lin.A)), 4 * d))


def test_lie_weighted_sum_rule():
    """``"weighted_sum"`` (Λ¹ an unknown, Σⱼ bⱼΛʲ = 0) on the disc: the rule is nearly
    degenerate off homogeneous-space lifts (its Newton matrix has a small singular value, A is
    rank deficient: cond 2.7e15), so the step map has large third derivatives and plain
    central differences deviate as C·δ² (measured 8.5e-4, 8.5e-6, 8.5e-8 at δ = 1e-3, 1e-4,
    1e-5: the linearization is their limit). Richardson's (4·D(δ) − D(2δ))/3 at δ = 1e-4
    removes the δ² term: measured 7.3e-10 of max|A|. Bound 1e-8: the rounding of the two
    differences, 64·eps/δ·max(1, 2/h)·(4 + 1/2)/3 = 2.1e-9, plus the O(δ⁴) rest (the
    measured total is 7.3e-10; margin 14)."""
    method, system, state = _lie_setup("disc", "s3-cayley", False)
    method = LieNonholonomicPRK(lobatto_iiia_iiib(3), retraction="cayley",
                                multiplier_rule="weighted_sum")
    state = method.initial_state(system, state.q, state.v)
    lin = method.step_linearization(system, state, H_LIE)
    d1, d2 = (step_finite_differences(method, system, state, H_LIE, coordinates="(xi, mu)",
                                      delta=delta) for delta in (1e-4, 2e-4))
    err = np.max(np.abs(lin.A - (4.0 * d1 - d2) / 3.0)) / np.max(np.abs(lin.A))
    assert err <= 1e-8, err


# -- the continuous rule's dΛ¹/d(q, v) exact (symbolic systems) -------------------------------
def _sym_sleigh():
    """The Chaplygin sleigh (paper §7) from sympy: its A(q) and ∂²A/∂q² generated."""
    sp = pytest.importorskip("sympy")
    from chetaev.discrete_lagrangian.symbolic import from_lagrangian

    q, v = sp.symbols("x y th"), sp.symbols("vx vy w")
    return from_lagrangian((v[0] ** 2 + v[1] ** 2) / 2 + v[2] ** 2 / 4, q, v, nonholonomic=[
        -sp.sin(q[2]) * v[0] + sp.cos(q[2]) * v[1] - v[2] / 2]), *_sleigh_data()[1:]


def _sym_controlled():
    """A q-dependent mass, an affine constraint and F = (−c(1 + x²)v_x + u, −c v_y + u/2, 0):
    every block of the KKT derivative (dG, df with F_q, F_v, dc) and ∂Λ¹/∂u."""
    sp = pytest.importorskip("sympy")
    from chetaev.discrete_lagrangian.symbolic import from_lagrangian

    (x, y, z), (vx, vy, vz), u = sp.symbols("x y z"), sp.symbols("vx vy vz"), sp.Symbol("u")
    kinetic = ((2 + sp.cos(y)) * vx**2 + (1 + x**2 / 4) * vy**2 + vz**2) / 2
    system = from_lagrangian(kinetic - (x**2 + y**2) / 2, [x, y, z], [vx, vy, vz],
                             nonholonomic=[vz - y * vx - sp.sin(x) / 3],
                             force=[-C * (1 + x**2) * vx + u, -C * vy + u / 2, 0], controls=[u])
    q0, v0 = np.array([0.3, -0.4, 0.1]), np.array([0.5, 0.8, 0.0])
    v0[2] = q0[1] * v0[0] + np.sin(q0[0]) / 3  # on the constraint set
    return system, q0, v0


def _sym_general():
    """The general particle (non-mechanical L, constraint nonlinear in v) from sympy."""
    sp = pytest.importorskip("sympy")
    from chetaev.discrete_lagrangian.symbolic import from_lagrangian

    q, v = sp.symbols("x y z"), sp.symbols("v0:3")
    v2 = sum(vi**2 for vi in v)
    system = from_lagrangian(v2 / 2 + nt.GEN_KAPPA * v2**2 / 4 - (q[0] ** 2 + q[1] ** 2) / 2,
                             q, v, nonholonomic=[v[2] - q[1] * v[0] + nt.GEN_GAMMA * v[2] ** 2 / 2])
    return system, np.array(nt.GEN_Q0), np.array(nt.GEN_V0)


SYM_MODELS = {"sleigh": _sym_sleigh, "controlled": _sym_controlled, "general": _sym_general}
SYM_METHODS = {"lobatto3": {}, "lobatto2-hamiltonian": {"form": "hamiltonian"},
               "implicit": {"implicit_velocity": True}}


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize(("model", "name"), [  # the general L has no explicit FL⁻¹ (Ham. form)
    (m, k) for m in SYM_MODELS for k in SYM_METHODS
    if (m, k) != ("general", "lobatto2-hamiltonian")])
def test_symbolic_continuous_rule_is_exact(model, name, batched):
    """The default ``"continuous"`` rule on systems from ``symbolic.from_lagrangian``: dΛ¹/d(q, v)
    from the KKT system's generated derivatives (``ConstrainedSystem.multiplier_jacobian``),
    nothing a finite difference (``lin.finite_differences == ()``); [A B] against central
    differences of the step, bound ``step_fd_rtol(h)`` (1.4e-8 at h = 0.2). Measured worst
    over these and the Lie cases below (20 linearizations, OPENBLAS_NUM_THREADS=1 and unset):
    2.6e-11 of max|[A B]|, 1/550 of the bound."""
    system, q0, v0 = SYM_MODELS[model]()
    method = NonholonomicPRK(lobatto_iiia_iiib(2 if name.startswith("lobatto2") else 3),
                             **SYM_METHODS[name])
    u = np.array([0.7]) if system.has_force else None
    if batched:
        s1 = method.step(system, method.initial_state(system, q0, v0, u=u), 0.1, u=u)
        q0, v0 = np.stack([q0, s1.q]), np.stack([v0, s1.v])
        u = None if u is None else np.array([[0.7], [-0.4]])
    state = method.initial_state(system, q0, v0, u=u)
    lin, err = step_linearization_error(method, system, state, H, u)
    assert lin.finite_differences == ()
    assert err <= step_fd_rtol(H), (model, name, batched, err)


def test_plain_callables_report_the_finite_difference_fallback():
    """The hand-written sleigh (A(q) and ∂A/∂q given, ∂²A/∂q² not) linearizes with the
    central-difference block ``"multiplier:dc"`` named in ``finite_differences``; the
    ``"carry"`` rule needs no multiplier derivative; the hand-written general particle (a
    general L with its second derivatives, no third) names ∂D22L and ∂f too. The values
    agree with the symbolic twin's to the fallback's error entering at O(h) (bound 1e-9:
    eps^(2/3) ≈ 4e-11 of O(1) derivatives; measured 6.1e-15)."""
    plain, q0, v0 = _sleigh_data()
    sym = _sym_sleigh()[0]
    method = NonholonomicPRK(lobatto_iiia_iiib(3))
    lins = [method.step_linearization(s, method.initial_state(s, q0, v0), H) for s in (plain, sym)]
    assert lins[0].finite_differences == ("multiplier:dc",) and lins[1].finite_differences == ()
    np.testing.assert_allclose(lins[0].A, lins[1].A, rtol=0, atol=1e-9)
    carry = NonholonomicPRK(lobatto_iiia_iiib(3), multiplier_rule="carry")
    assert carry.step_linearization(plain, carry.initial_state(plain, q0, v0),
                                    H).finite_differences == ()
    general = nt.general_particle_system()
    lin = method.step_linearization(general, method.initial_state(
        general, np.array(nt.GEN_Q0), np.array(nt.GEN_V0)), H)
    assert lin.finite_differences == ("multiplier:dG", "multiplier:df", "multiplier:dc")


def _sym_disc():
    """The vertical disc on SE(2) (paper §7.4) with the nonlinear φ = η₂ + η₂³, from
    ``symbolic.from_trivialized_lagrangian``."""
    sp = pytest.importorskip("sympy")
    from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian
    from chetaev.liegroups import SE2

    g, eta = sp.MatrixSymbol("g", 3, 3), sp.symbols("e0:3")
    ell = (eta[0] ** 2 + eta[1] ** 2 + eta[2] ** 2 / 2) / 2 - (g[0, 2] ** 2 + g[1, 2] ** 2) / 2
    system = from_trivialized_lagrangian(SE2, ell, eta, g=g,
                                         nonholonomic=[eta[1] + eta[1] ** 3])
    return (system, *nt.disc_initial())


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", ["s3-cayley", "s2-exp"])
def test_lie_symbolic_continuous_rule_is_exact(name, batched):
    """LieNonholonomicPRK's ``"continuous"`` rule on a symbolic trivialized system: dΛ¹/d(g, η)
    exact (left-trivialized, the Euler–Poincaré KKT system), ``finite_differences == ()``; A
    against central differences of the step in the retraction's chart (bound
    ``step_fd_rtol(h)``). The hand-written nonlinear disc names ``"multiplier:dc"``."""
    system, g0, eta0 = _sym_disc()
    kw = dict(LIE_METHODS[name])
    method = LieNonholonomicPRK(lobatto_iiia_iiib(kw.pop("pair")), **kw)
    if batched:
        s1 = method.step(system, method.initial_state(system, g0, eta0), 0.1)
        g0, eta0 = np.stack([g0, s1.q]), np.stack([eta0, s1.v])
    state = method.initial_state(system, g0, eta0)
    lin, err = step_linearization_error(method, system, state, H_LIE)
    assert lin.finite_differences == ()
    assert err <= step_fd_rtol(H_LIE), (name, batched, err)
    hand = LIE_MODELS["disc-nonlinear"]()[0]
    lin = method.step_linearization(hand, method.initial_state(hand, g0, eta0), H_LIE)
    assert "multiplier:dc" in lin.finite_differences


STEPS = 5


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("kind", ["unforced", "controlled"])
@pytest.mark.parametrize("model", ["sleigh", "chaotic", "general"])
def test_carry_product_of_step_jacobians_is_the_multistep_jacobian(model, kind, batched):
    """The ``"carry"`` rule's step reads λ_k (Λ¹ = λ_k) and returns λ_{k+1} = Λˢ: in the
    complete state (q, p, λ) the product A_5 ⋯ A_1 (and Σ_j A_5 ⋯ A_{j+1} B_j, u held) is
    the Jacobian of 5 steps, against central differences of 5 steps
    (``step_finite_differences(..., n_steps=5)``). Bound ``STEPS · step_fd_rtol(H)`` (each
    step's evaluation error propagates through at most 5 steps of O(1) Jacobians; measured
    worst 1.0e-10 of max|[A B]| over these 12 cases, margin 700). The product of the (q, p)
    blocks (the former fixed-λ_k linearization) misses ∂λ_{k+1}/∂(q_k, p_k): off by 9.3e-4
    to 2.4e-3 of max|[A B]| here, asserted to exceed 10 times the bound (so this test fails
    without the λ rows)."""
    method, system, state, u = _setup(model, "carry", kind, batched)
    lins, fd, err = multistep_linearization_error(method, system, state, H, u, STEPS)
    assert lins[0].coordinates == "(q, p, lam)"
    assert err <= STEPS * step_fd_rtol(H), err
    qp = np.s_[..., : 2 * state.q.shape[-1], : 2 * state.q.shape[-1]]
    Aqp = functools.reduce(lambda P, lin: lin.A[qp] @ P, lins[1:], lins[0].A[qp])
    gap = np.max(np.abs(Aqp - fd[qp])) / np.max(np.abs(fd))
    assert gap > 10 * STEPS * step_fd_rtol(H), gap


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("model", ["disc-nonlinear", "general"])
def test_lie_carry_product_of_step_jacobians_is_the_multistep_jacobian(model, forced,
                                                                      batched):
    """LieNonholonomicPRK with ``"carry"`` in the complete state (ε, δμ, λ): the product of
    5 step A's (and the B sum, u held) against central differences of 5 steps in the
    retraction's chart (``multistep_linearization_error``), bound
    ``STEPS · step_fd_rtol(H_LIE)`` (as for the vector-space test above); the product of
    the (ε, δμ) blocks alone exceeds 10 times that bound (so the test fails without the λ
    rows). Measured over the 8 cases: worst 3.3e-10 of max|[A B]| (disc-nonlinear, forced),
    the fixed-λ product off by 2.1e-3 to 2.5e-3."""
    if forced:
        method, system, state, u = _lie_forced_setup(model, "carry", batched)
    else:
        (method, system, state), u = _lie_setup(model, "carry", batched), None
    lins, fd, err = multistep_linearization_error(method, system, state, H_LIE, u, STEPS)
    assert lins[0].coordinates == "(xi, mu, lam)"
    assert err <= STEPS * step_fd_rtol(H_LIE), err
    k = 2 * state.p.shape[-1]
    b = np.s_[..., :k, :k]
    Ab = functools.reduce(lambda P, lin: lin.A[b] @ P, lins[1:], lins[0].A[b])
    gap = np.max(np.abs(Ab - fd[b])) / np.max(np.abs(fd))
    assert gap > 10 * STEPS * step_fd_rtol(H_LIE), gap
