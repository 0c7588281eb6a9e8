"""Step linearizations of NonholonomicPRK (issue 20): ``step_linearization``.

A = ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k) and B = ∂(q_{k+1}, p_{k+1})/∂u from the converged unknowns
of eq. (14) (App. D) by the implicit function theorem, against central finite differences of
``step`` (an independent computation: only the step map is used), on nonlinear problems:

* the Chaplygin sleigh (q-dependent constraint A(q), constant mass: the engine's per-step
  path, structured Newton matrix for batches) with F = −c(1 + |q|²)v + u·b;
* the chaotic system of paper §7.3 (m = 2, n = 5, nonlinear potential) with the same force;
* the general Lagrangian with a constraint nonlinear in v (implicit v_k^i unknowns) with
  F = −c(1 + |q|²)v + u·b;
* the multiplier rules ``"continuous"``, ``"carry"``, ``"zero_first"``, the IIIB variant
  and the Hamiltonian form (the same map, eq. (15), App. E).

The finite-difference bound is ``fd_rtol(h)`` of ``packages/discrete-lagrangian/tests/
test_linearization.py`` (central differences, δ = 1e-5, of steps solved at the rounding
floor: (64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|[A B]|; 1.4e-8 at h = 0.2, 5.7e-8 at
h = 0.05, within the issue's ~1e-7). The continuous rule's dΛ¹/d(q, v) is itself a central
difference of the closed-form multiplier (δ = eps^(1/3)·max(1, |x|), error ≤ ~1e-10 of
|dλ|) entering at O(h): inside that bound. Measured worst deviation over the cases below
(130 single and batched linearizations, h = 0.2, OPENBLAS_NUM_THREADS=1 and unset): 3.5e-11
of max|[A B]| (sleigh, Lobatto 3, controlled, single), 1/410 of the bound 1.4e-8.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import ConstrainedSystem
from chetaev.discrete_lagrangian.testing import rounding_bound
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.nh_integrators import testing as nt
from chetaev.rktableaux import lobatto_iiia_iiib


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the finite differences of the step and their bound (derived there)
_UNIT = _load(Path(__file__).parents[2] / "discrete-lagrangian" / "tests"
              / "test_linearization.py", "_chetaev_nh_linearization_unit")
C = 0.3


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
                if name == "hamiltonian" and kind != "unforced":
                    continue  # the Hamiltonian form takes no forces (ForcesNotSupportedError)
                if model == "general" and name in ("hamiltonian",):
                    continue  # needs an explicit FL^-1 in its own residual: covered below
                yield model, name, kind


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize(("model", "name", "kind"), list(_cases()))
def test_linearization_matches_finite_differences(model, name, kind, batched):
    """A and B against central differences of the step (module docstring), h = 0.2."""
    h = _UNIT.H
    method, system, state, u = _setup(model, name, kind, batched)
    lin = method.step_linearization(system, state, h, u=u)
    n = state.q.shape[-1]
    assert lin.A.shape == (*state.q.shape[:-1], 2 * n, 2 * n)
    assert lin.B.shape == (*state.q.shape[:-1], 2 * n, 1 if kind == "controlled" else 0)
    AB = np.concatenate([lin.A, lin.B], -1)
    err = np.max(np.abs(AB - _UNIT._fd(method, system, state, h, u))) / np.max(np.abs(AB))
    assert err <= _UNIT.fd_rtol(h), (model, name, kind, batched, err)


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
    lin = method.step_linearization(system, state, _UNIT.H, u=u)
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
        lins.append(method.step_linearization(system, state, _UNIT.H))
    np.testing.assert_allclose(lins[0].A, lins[1].A, rtol=0, atol=1e-9)
