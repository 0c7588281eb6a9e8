"""Step linearizations of LieNonholonomicPRK (issue 20) in the retraction's coordinates.

The state (g, μ) is perturbed as (g τ(ε), μ + δμ), ε ∈ 𝔤 left-trivialized and τ the method's
retraction; A = ∂(ζ_{k+1}, δμ_{k+1})/∂(ε, δμ) comes from the converged unknowns of App. F by
the implicit function theorem. Checked against central finite differences of ``step`` in
the same chart (``_lie_fd`` of ``packages/discrete-lagrangian/tests/test_linearization.py``,
bound ``fd_rtol(h)`` derived there: (64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|A|, 1.4e-8
at h = 0.2; the continuous rule's dλ is a central difference of the closed-form multiplier,
~1e-10 relative, entering at O(h)) on:

* the vertical disc on SE(2) (§7.4) with its linear constraint and with the nonlinear
  φ = v₂ + v₂³, Cayley and exp, s = 2, 3, 4, rules continuous / carry / zero_first
  (weighted_sum: its own test, the rule is near-degenerate there);
* the same disc as a general trivialized Lagrangian with a quartic kinetic term (the
  inner-stage η unknowns of the Lagrangian form; the Hamiltonian form's numerical Fℓ⁻¹);
* the ball on a turntable on SO(3)×R² (§7.5: affine constraints depending on g).

Measured worst deviation over these cases (48 single and batched linearizations, h = 0.2;
OPENBLAS_NUM_THREADS=1 and unset): 2.0e-11 of max|A| (disc, Lobatto 2 / exp, batched),
1/700 of the bound.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from chetaev.discrete_lagrangian.testing import rounding_bound
from chetaev.nh_integrators import LieNonholonomicPRK
from chetaev.nh_integrators import testing as nt
from chetaev.nh_integrators._lie_testing import turntable_ball, vertical_disc_general
from chetaev.rktableaux import lobatto_iiia_iiib


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_UNIT = _load(Path(__file__).parents[2] / "discrete-lagrangian" / "tests"
              / "test_linearization.py", "_chetaev_nh_lie_linearization_unit")
H = _UNIT.H


def _disc(kind="linear"):
    g0, eta0 = nt.disc_initial()
    return nt.vertical_disc(constraint=kind), g0, eta0


def _general():
    g0, eta0 = nt.disc_initial()
    return vertical_disc_general(quartic=0.3), g0, eta0


def _ball():
    from chetaev.nh_integrators._lie_testing import ball_initial

    g0, eta0 = ball_initial()
    return turntable_ball(), g0, eta0


MODELS = {"disc": _disc, "disc-nonlinear": lambda: _disc("nonlinear"), "general": _general,
          "ball": _ball}
METHODS = {
    "s3-cayley": dict(pair=3, retraction="cayley"),
    "s2-exp": dict(pair=2, retraction="exp"),
    "s4-cayley": dict(pair=4, retraction="cayley"),
    "carry": dict(pair=3, retraction="cayley", multiplier_rule="carry"),
    "zero_first": dict(pair=3, retraction="exp", multiplier_rule="zero_first"),
    "hamiltonian": dict(pair=3, retraction="cayley", form="hamiltonian"),
}


def _setup(model, name, batched):
    system, g0, eta0 = MODELS[model]()
    kw = dict(METHODS[name])
    method = LieNonholonomicPRK(lobatto_iiia_iiib(kw.pop("pair")), **kw)
    if batched:  # the data and the data one step later (both on the constraint set)
        s1 = method.step(system, method.initial_state(system, g0, eta0), 0.1)
        g0, eta0 = np.stack([g0, s1.q]), np.stack([eta0, s1.v])
    return method, system, method.initial_state(system, g0, eta0)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("model", list(MODELS))
def test_linearization_matches_finite_differences(model, name, batched):
    """A against central differences of the step in the retraction's chart (module
    docstring); B has zero columns (no forces on groups yet)."""
    method, system, state = _setup(model, name, batched)
    lin = method.step_linearization(system, state, H)
    d = state.p.shape[-1]
    assert lin.coordinates == "(xi, mu)"
    assert lin.A.shape == (*state.p.shape[:-1], 2 * d, 2 * d)
    assert lin.B.shape == (*state.p.shape[:-1], 2 * d, 0)
    err = np.max(np.abs(lin.A - _UNIT._lie_fd(method, system, state, H))) / np.max(np.abs(lin.A))
    assert err <= _UNIT.fd_rtol(H), (model, name, batched, err)


@pytest.mark.parametrize("model", list(MODELS))
def test_tangent_space_is_mapped_into_tangent_space(model):
    """``basis``/``next_basis`` are orthonormal (2d − m columns) and tangent to
    {φ(g, Fℓ⁻¹(g, μ)) = 0} (central differences of φ along them in the chart, δ = 1e-6:
    truncation ≲ 1e-11, rounding eps/δ ≈ 2e-10, so 1e-8); every step ends on that set, so
    A maps into the next tangent space: |(I − E1E1ᵀ)A| ≤ 1e-10·max(1, |A|) (Newton error
    ~1e-13 times an O(1) condition; measured 4.6e-16); A_tangent = E1ᵀ A E0 to rounding."""
    from chetaev.liegroups import retraction

    method, system, state = _setup(model, "s3-cayley", True)
    lin = method.step_linearization(system, state, H)
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


def test_weighted_sum_rule():
    """``"weighted_sum"`` (Λ¹ an unknown, Σⱼ bⱼΛʲ = 0) on the disc: the rule is nearly
    degenerate off homogeneous-space lifts (its Newton matrix has a small singular value, A is
    rank deficient: cond 2.7e15), so the step map has large third derivatives and plain
    central differences deviate as C·δ² (measured 8.5e-4, 8.5e-6, 8.5e-8 at δ = 1e-3, 1e-4,
    1e-5: the linearization is their limit). Richardson's (4·D(δ) − D(2δ))/3 at δ = 1e-4
    removes the δ² term: measured 7.3e-10 of max|A|. Bound 1e-8: the rounding of the two
    differences, 64·eps/δ·max(1, 2/h)·(4 + 1/2)/3 = 2.1e-9, plus the O(δ⁴) rest (the
    measured total is 7.3e-10; margin 14)."""
    method, system, state = _setup("disc", "s3-cayley", False)
    method = LieNonholonomicPRK(lobatto_iiia_iiib(3), retraction="cayley",
                                multiplier_rule="weighted_sum")
    state = method.initial_state(system, state.q, state.v)
    lin = method.step_linearization(system, state, H)
    old = _UNIT.DELTA
    try:
        _UNIT.DELTA = 1e-4
        d1 = _UNIT._lie_fd(method, system, state, H)
        _UNIT.DELTA = 2e-4
        d2 = _UNIT._lie_fd(method, system, state, H)
    finally:
        _UNIT.DELTA = old
    err = np.max(np.abs(lin.A - (4.0 * d1 - d2) / 3.0)) / np.max(np.abs(lin.A))
    assert err <= 1e-8, err
