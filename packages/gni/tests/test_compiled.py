"""The compiled backend (issue 17) of the GNI's momentum form (paper Def. 4.1, (8)/(26)).

The compiled step solves the inverse discrete Legendre transform −D1 L_d(q_k, q_{k+1}) = p⁻_k
by the chord Newton iteration, initial guess and stopping rule of the numpy path and then
applies the closed-form multiplier of (8)/(26); with ``NewtonOptions(tol=1e-14)`` both stop
within ``max(1e-14, 64 eps)·(1 + max|p⁻|)`` of the same root, so over 100 steps they agree
to 1e-12 (the brief's bound). Measured: bitwise equal for every case below except the
batched q-dependent mass (1.1e-16 in p, 5.6e-17 in v), so the bound has a margin of ~10⁴
against a rounding-level disagreement and fails on any change of the equations (the midpoint
rule compiled as the trapezoidal rule differs by 4.7e-3 in q). The reference is the numpy
path of the same method on the same symbolic system. The models are the particles of
``chetaev.gni.testing`` (the docs' theory page: M = diag(1, 2, 1.5),
V = ½x² + ½y² + ¼z² + 0.1xz, Φ = ż − yẋ (+ the affine term −0.7(1 + 0.3x))) built by
``from_lagrangian`` (``nonholonomic_particle(symbolic=True)``), and a variant with a
q-dependent mass. Each (model, discrete
Lagrangian) is one compiled module (~10 s on first use, then cached on disk).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import (  # noqa: E402
    ConvergenceError,
    DiscreteLagrangian,
    NewtonOptions,
    integrate,
)
from chetaev.discrete_lagrangian.extending import MEMORY_KEY, BackendError  # noqa: E402
from chetaev.discrete_lagrangian.symbolic import from_lagrangian  # noqa: E402
from chetaev.discrete_lagrangian.testing import fit_order  # noqa: E402
from chetaev.gni import GNI, AlphaDiscreteLagrangian, Composition  # noqa: E402
from chetaev.gni.testing import ParticleProblem, nonholonomic_particle  # noqa: E402

AGREE = 1e-12
# λ_{k+1} = −(2/h) C⁻¹(mu G⁻¹ p⁺ + a): a 1e-12-size difference in p⁺ moves λ by up to ~2/h
# times more. Bound AGREE / h (1e-11 at h = 0.1).
AGREE_LAM = AGREE / 0.1
TIGHT = NewtonOptions(tol=1e-14)
H = 0.1
VARIANTS = ("euler_a", "euler_b", "rattle", "midpoint")


def _mass_particle() -> ParticleProblem:
    """The linear particle of ``nonholonomic_particle`` with a q-dependent metric: the mass
    entry of x is 1 + y²/4 (same V, constraint, q0 and v0)."""
    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    T = ((1 + y**2 / 4) * vx**2 + 2 * vy**2 + sp.Rational(3, 2) * vz**2) / 2
    V = x**2 / 2 + y**2 / 2 + z**2 / 4 + sp.Rational(1, 10) * x * z
    system = from_lagrangian(T - V, [x, y, z], [vx, vy, vz], nonholonomic=[vz - y * vx])
    ref = nonholonomic_particle()
    return ParticleProblem(system=system, q0=ref.q0, v0=ref.v0, affine=False)


@pytest.fixture(scope="module")
def particle():
    return nonholonomic_particle(symbolic=True)


@pytest.fixture(scope="module")
def affine_particle():
    return nonholonomic_particle(True, symbolic=True)


@pytest.fixture(scope="module")
def mass_particle():
    return _mass_particle()


def _run(problem, variant, backend, q0=None, v0=None, n=100, h=H, newton=TIGHT, **kw):
    method = GNI(variant, newton=newton, backend=backend, **kw)
    return integrate(problem.system, method, problem.q0 if q0 is None else q0,
                     problem.v0 if v0 is None else v0, h=h, n_steps=n)


def _agree(a, b):
    assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
    assert a.success and b.success
    assert a.q.shape == b.q.shape
    for f in ("t", "q", "v", "p"):
        assert np.max(np.abs(getattr(a, f) - getattr(b, f))) <= AGREE, f
    assert np.max(np.abs(a.lam - b.lam)) <= AGREE_LAM
    assert b.stats["max_constraint_residual"] == pytest.approx(
        a.stats["max_constraint_residual"], abs=AGREE)


def _batch(problem, b=5, seed=3):
    """``b`` initial states around the problem's, on the constraint (v_z solved for)."""
    rng = np.random.default_rng(seed)
    q0 = problem.q0 + 0.3 * rng.standard_normal((b, 3))
    v0 = problem.v0 + 0.3 * rng.standard_normal((b, 3))
    v0[:, 2] = q0[:, 1] * v0[:, 0] + (0.7 * (1 + 0.3 * q0[:, 0]) if problem.affine else 0.0)
    return q0, v0


@pytest.mark.parametrize("variant", VARIANTS)
def test_compiled_agrees_with_numpy_single(particle, variant):
    """Every named discrete Lagrangian, 100 steps."""
    _agree(_run(particle, variant, "numpy"), _run(particle, variant, "numba"))


@pytest.mark.parametrize("kind", [("trapezoidal", 0.5), ("alpha", 0.25)])
def test_compiled_agrees_discrete_lagrangian_objects(particle, kind):
    """``chetaev.discrete_lagrangian.DiscreteLagrangian`` as the variant: the trapezoidal rule
    (the endpoint family at α = ½, the module of ``"rattle"``) and the quadrature point
    (1 − α)q0 + αq1 at α = ¼."""
    dl = DiscreteLagrangian(*kind)
    _agree(_run(particle, dl, "numpy"), _run(particle, dl, "numba"))


def test_compiled_agrees_affine(affine_particle):
    """The affine GNI (Def. 6.1, (26)): affine SHAKE/RATTLE."""
    _agree(_run(affine_particle, "rattle", "numpy"), _run(affine_particle, "rattle", "numba"))


def test_compiled_agrees_q_dependent_mass(mass_particle):
    """A q-dependent metric G(q) = M(q): several chord iterations per step."""
    a, b = _run(mass_particle, "rattle", "numpy"), _run(mass_particle, "rattle", "numba")
    _agree(a, b)
    assert b.stats["max_newton_iterations"] >= 2  # the chord iteration is exercised
    assert b.stats["newton_iterations"] == a.stats["newton_iterations"]


@pytest.mark.parametrize("name", ["particle", "affine_particle", "mass_particle"])
def test_compiled_agrees_with_numpy_batched(name, request):
    problem = request.getfixturevalue(name)
    q0, v0 = _batch(problem)
    a = _run(problem, "rattle", "numpy", q0, v0)
    b = _run(problem, "rattle", "numba", q0, v0)
    assert b.q.shape == a.q.shape == (101, 5, 3) and b.lam.shape == (101, 5, 1)
    _agree(a, b)


# The local form (9)/(27): Newton on (q_{k+2}, λ_{k+1}) from the look-ahead point; the numpy
# batch solves all members in one stacked LAPACK call, so batched results differ at rounding
# level. Measured over 100 steps, single/batched, full/simplified Newton: ≤ 1.2e-14 in q, v, p
# (margin 85) and ≤ 3.6e-13 in λ (margin 28).
@pytest.mark.parametrize("simplified", [False, True])
@pytest.mark.parametrize("name", ["particle", "mass_particle"])
def test_two_step_form_agrees_with_numpy(name, simplified, request):
    problem = request.getfixturevalue(name)
    newton = NewtonOptions(tol=1e-14, simplified=simplified)
    for q0, v0 in ((None, None), _batch(problem)):
        a = _run(problem, "rattle", "numpy", q0, v0, newton=newton, form="two_step")
        b = _run(problem, "rattle", "numba", q0, v0, newton=newton, form="two_step")
        _agree(a, b)
        assert b.stats["newton_iterations"] == a.stats["newton_iterations"]


def test_two_step_compiled_step(mass_particle):
    """A compiled two-step ``step`` keeps its look-ahead node (and its h) in the compiled
    memory of the carry (``MEMORY_KEY``), as the numpy step keeps ``q_next``: the nodes of
    the numpy steps to the Newton tolerance after 20 steps (measured: q and v equal, λ
    1.1e-15; it was 3.3e-14 in q when the compiled step recomputed the look-ahead)."""
    sys_ = mass_particle.system
    m = GNI("rattle", form="two_step", newton=TIGHT, backend="numba")
    mn = GNI("rattle", form="two_step", newton=TIGHT, backend="numpy")
    s = sn = m.initial_state(sys_, mass_particle.q0, mass_particle.v0)
    for _ in range(20):
        s, sn = m.step(sys_, s, H), mn.step(sys_, sn, H)
    assert s.info["backend"] == "numba" and set(s.carry) == {MEMORY_KEY}
    assert np.max(np.abs(s.q - sn.q)) <= AGREE
    assert np.max(np.abs(s.v - sn.v)) <= AGREE
    assert np.max(np.abs(s.lam - sn.lam)) <= AGREE_LAM


def test_compiled_step(particle):
    """``GNI.step`` runs the compiled step (``info["backend"]``) and gives the nodes of
    ``integrate`` on numpy."""
    m = GNI("rattle", newton=TIGHT, backend="numba")
    ref = _run(particle, "rattle", "numpy", n=5)
    st = m.initial_state(particle.system, particle.q0, particle.v0)
    for _ in range(5):
        st = m.step(particle.system, st, H)
    assert st.info["backend"] == "numba"
    assert np.max(np.abs(st.q - ref.q[-1])) <= AGREE
    assert np.max(np.abs(st.v - ref.v[-1])) <= AGREE
    assert np.max(np.abs(st.lam - ref.lam[-1])) <= AGREE_LAM


@pytest.mark.parametrize(("variant", "order"), [("euler_a", 1), ("rattle", 2)])
def test_order_compiled(particle, variant, order):
    """Orders 1 (Euler A) and 2 (RATTLE) in q, v and λ on the compiled backend against
    DOP853 (rtol = atol = 1e-13) on the continuous equations, T = 5, as ``test_orders``
    (same band 0.25; measured here |slope − order| ≤ 2.7e-2 (v of RATTLE), margin 9)."""
    T = 5.0
    q_ref, v_ref, lam_ref = particle.reference([T])
    ns = (50, 100, 200, 400)
    errs = []
    for n in ns:
        tr = _run(particle, variant, "numba", n=n, h=T / n, newton=NewtonOptions())
        assert tr.stats["backend"] == "numba" and tr.success
        errs.append([np.linalg.norm(tr.q[-1] - q_ref[-1]), np.linalg.norm(tr.v[-1] - v_ref[-1]),
                     np.linalg.norm(tr.lam[-1] - lam_ref[-1])])
    errs = np.array(errs)
    for j in range(3):
        assert abs(fit_order([T / n for n in ns], errs[:, j]) - order) < 0.25, errs


def test_backend_selection(particle):
    assert _run(particle, "rattle", "auto", n=2).stats["backend"] == "numba"
    plain = nonholonomic_particle()
    assert _run(plain, "rattle", "auto", n=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="from_lagrangian"):
        _run(plain, "rattle", "numba", n=2)
    # configurations without a compiled path: numpy under "auto", an error under "numba"
    class Custom:
        """A discrete Lagrangian of the user's (not compiled)."""

        def D1(self, system, q0, q1, h):
            return GNI().discrete_lagrangian.D1(system, q0, q1, h)

        def D2(self, system, q0, q1, h):
            return GNI().discrete_lagrangian.D2(system, q0, q1, h)

        def D1_dq1(self, system, q0, q1, h):
            return GNI().discrete_lagrangian.D1_dq1(system, q0, q1, h)

    assert _run(particle, Custom(), "auto", n=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="discrete Lagrangian"):
        _run(particle, Custom(), "numba", n=2)

    class Sub(AlphaDiscreteLagrangian):
        """A subclass may override the formulas: not compiled."""

    assert _run(particle, Sub(0.5), "auto", n=2).stats["backend"] == "numpy"

    def metric(q):
        return np.broadcast_to(np.diag([1.0, 2.0, 1.5]), (*np.shape(q)[:-1], 3, 3))

    assert _run(particle, "rattle", "auto", n=2, metric=metric).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="metric"):
        _run(particle, "rattle", "numba", n=2, metric=metric)


def test_newton_failure_is_reported_like_numpy(mass_particle):
    """A Newton failure (one chord iteration allowed where the q-dependent metric needs more)
    stops ``integrate`` at the same step with the same message on both backends; ``step``
    raises ``ConvergenceError``."""
    one = NewtonOptions(tol=1e-14, max_iter=1)
    a = _run(mass_particle, "rattle", "numpy", newton=one)
    b = _run(mass_particle, "rattle", "numba", newton=one)
    assert not a.success and not b.success
    assert a.stats["n_steps"] == b.stats["n_steps"]
    assert a.message.split(":")[0] == b.message.split(":")[0]
    m = GNI("rattle", newton=one, backend="numba")
    st = m.initial_state(mass_particle.system, mass_particle.q0, mass_particle.v0)
    with pytest.raises(ConvergenceError):
        m.step(mass_particle.system, st, H)


def test_step_linearization_of_a_compiled_gni(particle):
    """``step_linearization`` takes its step on the numpy path: the same linearization as
    ``backend="numpy"``, against central differences within ``step_fd_rtol``."""
    from chetaev.discrete_lagrangian.testing import step_fd_rtol, step_linearization_error

    method = GNI("rattle", backend="numba")
    state = method.initial_state(particle.system, particle.q0, particle.v0)
    assert method.step(particle.system, state, H).info["backend"] == "numba"
    lin, err = step_linearization_error(method, particle.system, state, H)
    assert err <= step_fd_rtol(H)
    ref = GNI("rattle", backend="numpy").step_linearization(particle.system, state, H)
    assert np.array_equal(lin.A, ref.A)


def test_composition_reports_the_backend_of_its_members(particle):
    """A composition has no compiled loop of its own; its sub-steps run compiled when its
    members do, and ``integrate`` reports ``stats["backend"] == "numba"`` exactly when every
    sub-step of every step ran compiled (it used to report "numpy" under "auto")."""
    def comp(b, a):
        return Composition((GNI("euler_b", newton=TIGHT, backend=b),
                            GNI("euler_a", newton=TIGHT, backend=a)))

    def run(method, n=10):
        return integrate(particle.system, method, particle.q0, particle.v0, h=H, n_steps=n)

    ref = run(comp("numpy", "numpy"))
    assert ref.stats["backend"] == "numpy"
    for backends, reported in ((("numba", "numba"), "numba"), (("auto", "auto"), "numba"),
                               (("numba", "numpy"), "numpy"), (("numpy", "numba"), "numpy")):
        sol = run(comp(*backends))
        assert sol.success and sol.stats["backend"] == reported, backends
        assert np.max(np.abs(sol.q - ref.q)) <= AGREE
    s0 = comp("numpy", "numpy").initial_state(particle.system, particle.q0, particle.v0)
    assert comp("numba", "numba").step(particle.system, s0, H).info["backend"] == "numba"
    assert "backend" not in comp("numpy", "numba").step(particle.system, s0, H).info
    # the composition's `newton` keeps each member's backend (it used to reset it to "auto")
    numpy_members = Composition((GNI("euler_b", backend="numpy"),
                                 GNI("euler_a", backend="numpy")), newton=TIGHT)
    assert [m.backend for m, _ in numpy_members._factors()] == ["numpy", "numpy"]
    assert run(numpy_members).stats["backend"] == "numpy"
