"""Step linearizations of the discretization-map family and of Composition (issue 20).

Checked against central finite differences of ``step`` (an independent computation that uses
only the step map, ``chetaev.discrete_lagrangian.testing.step_linearization_error``), with the
bound ``step_fd_rtol(h)`` derived in ``test_linearization.py`` ((64 eps/δ + tol)·max(1, 2/|h|)
+ δ² of max|[A B]|: 1.4e-8 at h = 0.2, 2.9e-8 at h = 0.1), unforced, forced with a nonlinear
configuration- and velocity-dependent force and a control (B checked), single and batched:

* vector space (the spherical pendulum, |q| = 1, q ∈ R³; the force
  F = −c(1 + q_z²)v + u·b, its Jacobians the system's central differences):
  ``DiscretizationMapMethod`` θ = 0, ½, 1, 0.3 (multiplier and null-space forms),
  ``Rattle`` (both forms), the compositions ``euler_ba``, ``triple_jump(rattle())`` and an
  unequal two-member ``compose``, ``ExtrinsicEulerBA`` and ``StageConstrainedBaseline``
  (coordinates (q, p));
* on groups (the heavy top of ``test_discretization_maps_lie`` on SO(3), and on SO(3)×R³ with
  the pivot constraint x = Rχ; the torque of ``test_dmaps_lie_forces``):
  ``LieDiscretizationMapMethod`` Euler A, Euler B, lobatto2 and RATTLE with the exp and
  Cayley retractions, in the retraction's tangent coordinates (ε, δα).

Measured worst deviation over these cases (96 linearizations; h = 0.2 vector space, 0.1 on
groups; OPENBLAS_NUM_THREADS=1 and unset, identical): 6.5e-11 of max|[A B]| on the vector space
(the unequal composition, forced), 1/220 of its bound; 1.5e-9 on groups (lobatto2 / Cayley on
SO(3)×R³, unforced), 1/19 of its bound.

Structure: every constrained step ends on the invariant set {φ = 0, G M⁻¹p = 0}, so A maps
the tangent space at the current node into that at the next: |(I − E₁E₁ᵀ) A E₀| is rounding
(measured worst 6.5e-16·max|A| over all the constrained cases above), bound 1e-12·max|A|
(margin 1500). The literal composition ``euler_ba`` and ``ExtrinsicEulerBA`` are the same
map (Lemma 4.3); their linearizations (chain rule of two IFTs / one joint IFT) agree to
1.1e-15·max|A| unforced and 7.3e-13 forced (the force's Jacobians are central differences
of the system, ~1e-10 relative, evaluated in different sums by the two computations), bound
1e-11·max|A| (margin 14 forced). The unforced maps are symplectic on T*N (Thm. 4.5) in the
tangent bases, to rounding.
"""

import importlib.util
from pathlib import Path

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    LinearizationNotSupportedError,
    MechanicalSystem,
    NewtonOptions,
)
from chetaev.discrete_lagrangian import discretization_maps as dm
from chetaev.discrete_lagrangian.testing import (
    spherical_pendulum,
    step_fd_rtol,
    step_linearization_error,
)

# the forced heavy tops of the Lie forces' test (it loads its own sibling, the Lie test module);
# the suite runs with --import-mode=importlib, hence by path
_SPEC = importlib.util.spec_from_file_location(
    "_chetaev_dmaps_lin_lie_forces", Path(__file__).with_name("test_dmaps_lie_forces.py"))
LF = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(LF)
LIE = LF.LIE
C = 0.3
B_DIR = np.array([1.0, 0.5, 0.0])
E3 = np.array([0.0, 0.0, 1.0])
H = 0.2
H_LIE = 0.1


def _force(q, v, u):
    """Nonlinear in q and v, with the control along B_DIR."""
    return -C * (1.0 + q[..., 2:3] ** 2) * v + u[..., :1] * B_DIR


def _sp(forced: bool):
    base = spherical_pendulum()
    if not forced:
        return base
    sysm = MechanicalSystem(np.eye(3), lambda q: q @ E3,
                            lambda q: np.broadcast_to(E3, np.shape(q)),
                            lambda q: np.zeros((*np.shape(q), 3)), force=_force, n_controls=1)
    return ConstrainedSystem(sysm, base.constraint)


def _sp_data(batched: bool):
    th = np.array([1.0, 0.6, 1.3]) if batched else np.array(1.0)
    ph = np.array([0.0, 0.7, -0.4]) if batched else np.array(0.0)
    q0 = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), -np.cos(th)], -1)
    v0 = np.cross(q0, np.array([0.2, 0.8, -0.3]))  # tangent: q·v = 0
    return q0, v0


METHODS = {
    "euler-a": lambda: dm.DiscretizationMapMethod(0.0),
    "euler-b": lambda: dm.DiscretizationMapMethod(1.0),
    "midpoint": lambda: dm.DiscretizationMapMethod(0.5),
    "midpoint-nullspace": lambda: dm.DiscretizationMapMethod(0.5, nullspace=True),
    "theta-0.3-nullspace": lambda: dm.DiscretizationMapMethod(0.3, nullspace=True),
    "rattle": dm.rattle,
    "rattle-nullspace": lambda: dm.Rattle(nullspace=True),
    "euler-ba": dm.euler_ba,
    "triple-jump": lambda: dm.triple_jump(dm.rattle()),
    "compose-unequal": lambda: dm.compose(dm.DiscretizationMapMethod(1.0), dm.rattle(),
                                          weights=(0.3, 0.7)),
    "extrinsic-euler-ba": dm.ExtrinsicEulerBA,
    "baseline": dm.StageConstrainedBaseline,
}


def _setup(name: str, forced: bool, batched: bool):
    method, system = METHODS[name](), _sp(forced)
    q0, v0 = _sp_data(batched)
    u = None
    if forced:
        u = np.array([[0.7], [-0.4], [1.1]]) if batched else np.array([0.7])
    return method, system, method.initial_state(system, q0, v0, u=u), u


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("name", list(METHODS))
def test_vector_space_linearization_matches_finite_differences(name, forced, batched):
    """[A B] against central differences of the step (module docstring)."""
    method, system, state, u = _setup(name, forced, batched)
    lin, err = step_linearization_error(method, system, state, H, u)
    assert lin.coordinates == "(q, p)"
    assert lin.A.shape == (*state.q.shape[:-1], 6, 6)
    assert lin.B.shape == (*state.q.shape[:-1], 6, 1 if forced else 0)
    if forced:
        assert np.max(np.abs(lin.B)) > 0.0
    assert err <= step_fd_rtol(H), (name, forced, batched, err)


@pytest.mark.parametrize("name", [n for n in METHODS if n != "baseline"])
def test_tangent_space_is_mapped_into_the_next(name):
    """A E₀ lies in span E₁ (the step ends on the invariant set; rounding bound in the
    module docstring); ``A_tangent`` is E₁ᵀ A E₀ with 2n − 2m = 4 columns."""
    method, system, state, u = _setup(name, True, True)
    lin = method.step_linearization(system, state, H, u=u)
    E0, E1 = lin.basis, lin.next_basis
    assert E0.shape == E1.shape == (3, 6, 4)
    leak = lin.A @ E0 - E1 @ (np.swapaxes(E1, -1, -2) @ lin.A @ E0)
    assert np.max(np.abs(leak)) <= 1e-12 * np.max(np.abs(lin.A))
    np.testing.assert_allclose(lin.A_tangent, np.swapaxes(E1, -1, -2) @ lin.A @ E0,
                               rtol=0, atol=1e-14 * np.max(np.abs(lin.A)))
    assert lin.B_tangent.shape == (3, 4, 1)


@pytest.mark.parametrize("name", [n for n in METHODS if n != "baseline"])
def test_unforced_linearization_is_symplectic_on_the_constraint_manifold(name):
    """Thm. 4.5: the unforced maps are symplectic on Leg(TN) ≅ T*N, so on the tangent bases
    (A E₀)ᵀ Ω (A E₀) = E₀ᵀ Ω E₀ for the canonical Ω of R⁶ (A E₀ ⊂ span E₁, previous test).
    Measured worst deviation 4.6e-16·max|A|² (euler_ba, batched); bound 1e-13·max|A|²
    (margin 200). With the dissipative force the deviation is O(c h) (measured 6.5e-2, checked
    > 1e-2): the check can fail."""
    n = 3
    omega = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    for forced in (False, True):
        method, system, state, u = _setup(name, forced, True)
        lin = method.step_linearization(system, state, H, u=u)
        AE, E0 = lin.A @ lin.basis, lin.basis
        dev = np.max(np.abs(np.swapaxes(AE, -1, -2) @ omega @ AE
                            - np.swapaxes(E0, -1, -2) @ omega @ E0))
        scale = np.max(np.abs(lin.A)) ** 2
        if forced:
            assert dev > 1e-2 * scale
        else:
            assert dev <= 1e-13 * scale, (name, dev / scale)


def test_baseline_has_no_tangent_basis():
    """The baseline's nodes leave the constraint set: no basis is claimed."""
    method, system, state, _ = _setup("baseline", False, False)
    lin = method.step_linearization(system, state, H)
    assert lin.basis is None and lin.A_tangent is None


@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
def test_literal_and_extrinsic_euler_ba_have_one_linearization(forced):
    """Lemma 4.3: ``euler_ba`` (chain rule over two IFTs) and ``ExtrinsicEulerBA`` (one joint
    IFT) are the same map; their (A, B) agree to rounding (module docstring)."""
    _, system, state, u = _setup("euler-ba", forced, True)
    a = dm.euler_ba().step_linearization(system, state, H, u=u)
    b = dm.ExtrinsicEulerBA().step_linearization(system, state, H, u=u)
    scale = np.max(np.abs(a.A))
    assert np.max(np.abs(a.A - b.A)) <= 1e-11 * scale
    assert np.max(np.abs(a.B - b.B), initial=0.0) <= 1e-11 * scale


def test_composition_is_the_product_of_its_members():
    """The chain rule A = A₂A₁, B = A₂B₁ + B₂ of ``Composition`` on its sub-steps."""
    method, system, state, u = _setup("compose-unequal", True, False)
    lin = method.step_linearization(system, state, H, u=u)
    first, second = method.methods
    l1 = first.step_linearization(system, state, 0.3 * H, u=u)
    l2 = second.step_linearization(system, l1.state, 0.7 * H, u=u)
    np.testing.assert_allclose(lin.A, l2.A @ l1.A, rtol=0, atol=1e-13 * np.max(np.abs(lin.A)))
    np.testing.assert_allclose(lin.B, l2.A @ l1.B + l2.B, rtol=0,
                               atol=1e-13 * np.max(np.abs(lin.A)))
    np.testing.assert_array_equal(lin.basis, l1.basis)
    np.testing.assert_allclose(lin.state.q, l2.state.q, rtol=0, atol=1e-14)


def test_composition_newton_options():
    """``newton=`` replaces every member's options (the finite differences' tight solve
    rebuilds the composition this way); a wrong type is an InputError naming it."""
    comp = dm.compose(dm.rattle(), dm.rattle())
    tight = attrs.evolve(comp, newton=NewtonOptions(tol=1e-16))
    assert all(m.newton.tol == 1e-16 for m, _ in tight._factors())
    assert all(m.newton.tol != 1e-16 for m, _ in comp._factors())
    with pytest.raises(InputError, match="newton"):
        dm.Composition((dm.rattle(),), (1.0,), newton=1e-12)


def test_composition_of_different_coordinates_refuses():
    """Members linearizing in different coordinates cannot be chained."""
    from chetaev.discrete_lagrangian import ConstrainedPRK
    from chetaev.discrete_lagrangian.extending import StepLinearization

    class _QV(ConstrainedPRK):
        def _step_linearization_impl(self, system, state, h, u, new):
            lin = super()._step_linearization_impl(system, state, h, u, new)
            return StepLinearization(state=new, A=lin.A, B=lin.B, coordinates="(q, v)")

    from chetaev.rktableaux import lobatto_iiia_iiib

    comp = dm.compose(dm.rattle(), _QV(lobatto_iiia_iiib(2)))
    _, system, state, _ = _setup("rattle", False, False)
    with pytest.raises(LinearizationNotSupportedError, match="different coordinates"):
        comp.step_linearization(system, state, H)


# --- groups ------------------------------------------------------------------------------------
LIE_CASES = [(k, r) for k in LIE.KINDS for r in ("exp", "cayley")]


def _lie_problem(which: str, batched: bool):
    forced = which.startswith("forced")
    if which.endswith("top6"):
        system = LF.forced_top6() if forced else LIE.TOP6
        q0, v0 = LIE.G0, LIE.XI0
    else:
        system = LF.forced_top() if forced else LIE.TOP
        q0, v0 = LIE.R0, LIE.W0
    if batched:
        q0, v0 = np.stack([q0, q0]), np.stack([v0, 0.5 * v0])
    u = None
    if forced:
        u = np.array([[0.2], [-0.3]]) if batched else np.array([0.2])
    return system, q0, v0, u


@pytest.mark.parametrize("which", ["top", "top6", "forced-top", "forced-top6"])
@pytest.mark.parametrize(("kind", "ret"), LIE_CASES, ids=[f"{k}-{r}" for k, r in LIE_CASES])
def test_lie_linearization_matches_finite_differences(kind, ret, which):
    """[A B] in (ε, δα) against central differences (module docstring), single and batched;
    with the constraint, A maps the tangent space of the invariant set into the next."""
    method = dm.LieDiscretizationMapMethod(kind, retraction=ret)
    for batched in (False, True):
        system, q0, v0, u = _lie_problem(which, batched)
        state = method.initial_state(system, q0, v0, u=u)
        lin, err = step_linearization_error(method, system, state, H_LIE, u)
        assert lin.coordinates == "(xi, mu)"
        assert err <= step_fd_rtol(H_LIE), (kind, ret, which, batched, err)
        if u is not None:
            assert lin.B.shape[-1] == 1 and np.max(np.abs(lin.B)) > 0.0
        if which.endswith("top6"):
            E0, E1 = lin.basis, lin.next_basis
            leak = lin.A @ E0 - E1 @ (np.swapaxes(E1, -1, -2) @ lin.A @ E0)
            assert np.max(np.abs(leak)) <= 1e-12 * np.max(np.abs(lin.A))
        else:
            assert lin.basis is None
