"""Step linearizations of the GNI (issue 20): ``GNI.step_linearization``.

The momentum form (paper Def. 4.1, (8)/(26)) maps the node state (q_k, v_k, λ_k) to
(q_{k+1}, v_{k+1}, λ_{k+1}); A = ∂(q_{k+1}, v_{k+1}, λ_{k+1})/∂(q_k, v_k, λ_k) in the complete
state comes from the step's Newton matrix ∂(D1 L_d)/∂q1 and the node's KKT projection by the
implicit function theorem. Checked against central finite differences of ``step`` in the
complete state (``chetaev.discrete_lagrangian.testing.step_finite_differences``,
``coordinates="(q, v, lam)"``, λ_k perturbed too;
bound ``step_fd_rtol(h)``, derived in ``packages/discrete-lagrangian/tests/
test_linearization.py``: (64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|A|, 1.4e-8 at h = 0.2)
on the particle of the docs' theory page (linear and affine constraint with q-dependent mu(q),
nonlinear potential) and on the same constraint with a q-dependent mass matrix M(q), for the
four variants, single and batched, unforced and forced (F = −c(1 + |q|²)v + u·b: A and B);
the two-step form (the momentum form's map, its look-ahead point a function of the node).
Measured worst deviation over the 24 unforced cases, in (q, v, λ): 1.1e-10 of max|A| (1/130
of the bound); forced 9.5e-11.
The point of the complete state: a product of step A's is the Jacobian of several steps
(``test_product_of_step_jacobians_is_the_multistep_jacobian``).
"""

import functools

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearizationNotSupportedError,
    MechanicalSystem,
)
from chetaev.discrete_lagrangian.testing import (
    multistep_linearization_error,
    rounding_bound,
    step_fd_rtol,
    step_linearization_error,
)
from chetaev.gni import GNI
from chetaev.gni.testing import nonholonomic_particle

H = 0.2  # the step of the linearized steps (as in the discrete-lagrangian tests)
VARIANTS = ("euler_a", "euler_b", "rattle", "midpoint")


def _varying_mass(affine):
    """The particle's constraint and potential with M(q) = diag(1 + 0.3 sin²x, 1 + 0.2 z², 1)."""
    p = nonholonomic_particle(affine)
    base = p.system.system

    def M(q):
        out = np.zeros((*q.shape[:-1], 3, 3))
        out[..., 0, 0] = 1.0 + 0.3 * np.sin(q[..., 0]) ** 2
        out[..., 1, 1] = 1.0 + 0.2 * q[..., 2] ** 2
        out[..., 2, 2] = 1.0
        return out

    def dM(q):  # [i, j, k] = ∂M_ij/∂q_k
        out = np.zeros((*q.shape[:-1], 3, 3, 3))
        out[..., 0, 0, 0] = 0.3 * np.sin(2.0 * q[..., 0])
        out[..., 1, 1, 2] = 0.4 * q[..., 2]
        return out

    mech = MechanicalSystem(M, base.V, base.gradV, base.hessV, dM, n=3)
    return ConstrainedSystem(mech, p.system.constraint), p.q0, p.v0


def _problem(model):
    if model == "varying-mass":
        return _varying_mass(False)
    p = nonholonomic_particle(model == "affine")
    return p.system, p.q0, p.v0


def _setup(model, variant, batched):
    system, q0, v0 = _problem(model)
    method = GNI(variant)
    s0 = method.initial_state(system, q0, v0)
    s1 = method.step(system, s0, 0.1)  # a node with λ_k from a step (not the continuous one)
    if batched:
        s2 = method.step(system, s1, 0.1)
        lam = np.stack([s1.lam, s2.lam])
        s1 = attrs.evolve(method.initial_state(system, np.stack([s1.q, s2.q]),
                                               np.stack([s1.v, s2.v])), lam=lam)
    return method, system, s1


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("model", ["linear", "affine", "varying-mass"])
def test_linearization_matches_finite_differences(model, variant, batched):
    """A against central differences of the step in (q, v, λ) (module docstring)."""
    method, system, state = _setup(model, variant, batched)
    lin, err = step_linearization_error(method, system, state, H)
    assert (lin.coordinates, lin.A.shape, lin.B.shape[-1]) == (
        "(q, v, lam)", (*state.q.shape[:-1], 7, 7), 0)
    assert err <= step_fd_rtol(H), (model, variant, batched, err)


C = 0.3
B_DIR = np.array([1.0, 0.5, -0.2])


def _force(q, v, u):
    """F = −c(1 + |q|²)v + u·b: configuration-, velocity- and control-dependent."""
    return -C * (1.0 + np.sum(q * q, -1))[..., None] * v + u[..., :1] * B_DIR


def _force_derivatives(q, v, u):
    w = 1.0 + np.sum(q * q, -1)
    Fq = -2.0 * C * v[..., :, None] * q[..., None, :]
    Fv = -C * w[..., None, None] * np.eye(3)
    return Fq, Fv, np.broadcast_to(B_DIR[:, None], (*w.shape, 3, 1))


def _forced_setup(model, variant, batched):
    """The models with :func:`_force` (exact derivatives, one control), control 0.7
    (batched: 0.7 and −0.4 at two nodes with λ_k from steps)."""
    system, q0, v0 = _problem(model)
    system = attrs.evolve(system, system=attrs.evolve(
        system.system, force=_force, force_derivatives=_force_derivatives, n_controls=1))
    method = GNI(variant)
    u = np.array([0.7])
    s1 = method.step(system, method.initial_state(system, q0, v0, u=u), 0.1, u=u)
    if batched:
        s2 = method.step(system, s1, 0.1, u=u)
        lam = np.stack([s1.lam, s2.lam])
        s1 = attrs.evolve(method.initial_state(system, np.stack([s1.q, s2.q]),
                                               np.stack([s1.v, s2.v])), lam=lam)
        u = np.array([[0.7], [-0.4]])
    return method, system, s1, u


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("model", ["linear", "affine", "varying-mass"])
def test_forced_linearization_matches_finite_differences(model, variant, batched):
    """The forced GNI (issue 20): the discrete forces' partials in q_k, q_{k+1} and u enter
    the IFT (∂f_d⁻/∂q_{k+1} with the step's Newton matrix, ∂f_d⁺ with p⁺), B = ∂(q_{k+1},
    v_{k+1}, λ_{k+1})/∂u. [A B] against central differences in (q, v, λ) (bound ``step_fd_rtol``,
    1.4e-8; measured worst 9.5e-11 of max|[A B]| in (q, v, λ), 1/150 of the bound; 1.5e-10
    in (q, v) before). With the force left out of the
    IFT the deviation was 0.025 (the registry's midpoint-affine problem)."""
    method, system, state, u = _forced_setup(model, variant, batched)
    lin, err = step_linearization_error(method, system, state, H, u)
    assert (lin.A.shape, lin.B.shape) == ((*state.q.shape[:-1], 7, 7),
                                          (*state.q.shape[:-1], 7, 1))
    assert lin.B_tangent.shape == (*state.q.shape[:-1], 6, 1)
    assert err <= step_fd_rtol(H), (model, variant, batched, err)


@pytest.mark.parametrize("model", ["linear", "affine", "varying-mass"])
def test_tangent_space_is_mapped_into_tangent_space(model):
    """The bases (2n − m columns for (q, v), and the m free multiplier directions: 2n in
    all) are orthonormal and tangent to {mu(q)v + a(q) = 0} × Rᵐ
    (central differences of the constraint along them, δ = 1e-6: bound 1e-8 as in the nh
    tests); every node satisfies the constraint exactly, so A maps into the next tangent
    space: |(I − E1E1ᵀ)A| ≤ 1e-10·max(1, |A|) (Newton error ~1e-12 times an O(1) condition;
    measured 5.5e-16); A_tangent = E1ᵀ A E0 to rounding."""
    method, system, state = _setup(model, "rattle", True)
    lin = method.step_linearization(system, state, H)
    n, m = 3, 1
    k = 2 * n
    E0, E1 = lin.basis, lin.next_basis
    assert E0.shape == E1.shape == (2, 2 * n + m, k) and lin.A_tangent.shape == (2, k, k)
    delta = 1e-6
    for E, st in ((E0, state), (E1, lin.state)):
        assert np.max(np.abs(np.swapaxes(E, -1, -2) @ E - np.eye(k))) <= rounding_bound(1.0, 2 * n)
        for j in range(k):
            dq, dv = delta * E[..., :n, j], delta * E[..., n: 2 * n, j]
            d = (system.constraint.residual(st.q + dq, st.v + dv)
                 - system.constraint.residual(st.q - dq, st.v - dv)) / (2 * delta)
            assert np.max(np.abs(d)) <= 1e-8
    P1 = np.eye(2 * n + m) - E1 @ np.swapaxes(E1, -1, -2)
    assert np.max(np.abs(P1 @ lin.A)) <= 1e-10 * max(1.0, np.max(np.abs(lin.A)))
    np.testing.assert_allclose(lin.A_tangent, np.swapaxes(E1, -1, -2) @ lin.A @ E0, rtol=0,
                               atol=rounding_bound(np.max(np.abs(lin.A)), 4 * n))


def test_unsupported_configurations_raise():
    """A metric override is refused (LinearizationNotSupportedError, an InputError naming
    what to use)."""
    system, q0, v0 = _problem("linear")
    method = GNI("rattle", metric=lambda q: np.eye(3))
    state = method.initial_state(system, q0, v0)
    with pytest.raises(LinearizationNotSupportedError, match="no metric= override"):
        method.step_linearization(system, state, H)


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("model", ["affine", "varying-mass"])
def test_two_step_form_linearization(model, forced, batched):
    """The two-step form (its state carries the look-ahead point, a function of the node):
    [A B] in (q, v, λ) against central differences of its step (bound
    ``step_fd_rtol``, 1.4e-8; measured worst 1.2e-10, margin 120) from a state whose
    look-ahead point was carried from the previous step, and equal to the momentum form's
    linearization of the same node up to the two solves' Newton tolerance (1e-12 each, times
    an O(1) condition: bound 1e-10·max|[A B]|; measured worst 1.2e-12 relative,
    varying-mass, forced; margin 86; OPENBLAS_NUM_THREADS=1 and unset)."""
    method, system, state, u = (_forced_setup(model, "rattle", batched) if forced
                                else (*_setup(model, "rattle", batched), None))
    two = GNI("rattle", form="two_step")
    kw = {} if u is None else {"u": u}
    s0 = two.initial_state(system, state.q, state.v, **kw)
    s0 = attrs.evolve(s0, lam=state.lam)
    s1 = two.step(system, s0, H, **kw)  # a node whose carry holds the look-ahead point
    assert s1.carry.get("q_next") is not None
    lin, err = step_linearization_error(two, system, s1, H, u)
    assert lin.coordinates == "(q, v, lam)" and err <= step_fd_rtol(H), err
    ref = method.step_linearization(system, attrs.evolve(s1, carry={}), H, u)
    AB = np.concatenate([lin.A, lin.B], -1)
    gap = np.max(np.abs(AB - np.concatenate([ref.A, ref.B], -1)))
    assert gap <= 1e-10 * np.max(np.abs(AB)), gap


STEPS = 5


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("variant", ["euler_a", "rattle"])
def test_product_of_step_jacobians_is_the_multistep_jacobian(variant, forced, batched):
    """Issue 20's use (LQR over a horizon, adjoints): A_5 ⋯ A_1 (and Σ_j A_5 ⋯ A_{j+1} B_j,
    u held) in (q, v, λ) against central differences of 5 steps
    (``step_finite_differences(..., n_steps=5)``), affine particle. Bound
    ``STEPS · step_fd_rtol(H)`` (each step's evaluation error propagates through at most 5
    steps of O(1) Jacobians, and the truncation term is that of the composed map; measured
    worst 1.4e-10 of max|[A B]| over the 4 variants × 3 models × forced/unforced ×
    single/batched, margin 500). The product of the (q, v) blocks alone (what a fixed-λ_k
    linearization gives) misses ∂λ_{k+1}/∂(q_k, v_k): off by 7.5e-3 to 1.9e-2 of max|A|
    on the same cases, asserted > 1e-3."""
    if forced:
        method, system, state, u = _forced_setup("affine", variant, batched)
    else:
        method, system, state = _setup("affine", variant, batched)
        u = None
    lins, fd, err = multistep_linearization_error(method, system, state, H, u, STEPS)
    assert lins[0].coordinates == "(q, v, lam)"
    assert err <= STEPS * step_fd_rtol(H), err
    qv = np.s_[..., :6, :6]
    Aqv = functools.reduce(lambda P, lin: lin.A[qv] @ P, lins[1:], lins[0].A[qv])
    assert np.max(np.abs(Aqv - fd[qv])) > 1e-3 * np.max(np.abs(fd))
