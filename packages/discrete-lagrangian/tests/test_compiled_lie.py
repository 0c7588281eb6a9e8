"""The compiled Lie backend (issue 17): LieVPRK compiled with numba against its numpy path.

The compiled step solves the same equations (paper Thm. 6.1, eqs. (24)–(27), inverse-free
form of (26)) with the same unknowns, guess and Newton rule as the numpy path
(``core._lie_prk``), so with ``NewtonOptions(tol=1e-14)`` both stop within
``max(1e-14, 64 eps)·(1 + |μ|)`` of the same root: over 100 steps they agree to 1e-12 (the
brief's bound; measured 6.3e-15 single, 6.9e-15 batched, 6.3e-15 Gauss(2) on the heavy
top). The compiled group maps are the formulas of ``chetaev.liegroups`` (same expressions,
other evaluation order), so they agree with it to a few ulps: bound 1e-14 relative to
max(1, |entry|) (measured 2.2e-16 over the sample below, all three groups; exp, whose
f_n use liegroups' series thresholds and coefficients: 3.3e-15 at θ² across every
threshold). The emitted
kernels are exact derivatives (sympy) of the hand-written model's closed forms: bound 1e-14
as well.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import (  # noqa: E402
    ConvergenceError,
    LieVPRK,
    NewtonOptions,
    integrate,
    reference_solution,
)
from chetaev.discrete_lagrangian.core._backend import BackendError  # noqa: E402
from chetaev.discrete_lagrangian.core._compiled_lie import (  # noqa: E402
    LINALG,
    LieKernelSet,
    group_source,
    group_support,
)
from chetaev.discrete_lagrangian.core._interface import interface_of  # noqa: E402
from chetaev.discrete_lagrangian.core._kernels import load_module  # noqa: E402
from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian  # noqa: E402
from chetaev.discrete_lagrangian.testing import fit_order, heavy_top  # noqa: E402
from chetaev.liegroups import (  # noqa: E402
    S2,
    SE2,
    SE3,
    SERIES_THETA_SQ,
    SO2,
    SO3,
    Product,
    Rn,
    retraction,
)
from chetaev.rktableaux import gauss, lobatto_iiia_iiib  # noqa: E402

AGREE = 1e-12  # the brief's bound for tol = 1e-14 over 100 steps
ULPS = 1e-14  # compiled vs liegroups formulas, relative to max(1, |entry|)
TIGHT = NewtonOptions(tol=1e-14)
INERTIA = (1.0, 1.5, 2.5)
CHI = (0.1, 0.2, 1.0)
R0 = SO3.exp(np.array([0.3, -0.2, 0.4]))
W0 = np.array([0.5, -1.0, 2.0])
SO3xR3 = Product(SO3, Rn(3))


@pytest.fixture(scope="module")
def top():
    """``testing.heavy_top()`` (ℓ = ½ηᵀ𝕀η − e₃·Rχ) from its symbolic Lagrangian."""
    return heavy_top(INERTIA, 1.0, CHI, symbolic=True)


@pytest.fixture(scope="module")
def top_r3():
    """A rigid body and a particle under gravity on SO(3)×R³ (the Rⁿ factor of the product
    in every group map), coupled through V = e₃·Rχ·x₃ (a configuration-dependent force on
    both factors)."""
    g = sp.MatrixSymbol("g", 7, 7)
    e = sp.symbols("e0:6")
    ell = (sum(0.5 * INERTIA[i] * e[i] ** 2 for i in range(3))
           + sum(0.75 * e[i] ** 2 for i in range(3, 6))
           - sum(g[2, j] * CHI[j] for j in range(3)) * (1 + 0.1 * g[5, 6]) - 9.81 * g[5, 6])
    return from_trivialized_lagrangian(SO3xR3, ell, e, g=g)


def _max_rel(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def _piece_error(mod, k, view, X, E, P, g=None) -> float:
    """The largest relative error of the compiled group pieces of ``mod`` against the
    liegroups kernels ``k`` (and ``view``'s coadjoint matrix) at ``(X, E, P)``; with ``g``,
    the composition ``g · tau(X)`` too."""
    d, K = len(X), view.group.shape[0]
    T = np.empty(K * K)
    mod.grp_tau(X, T)
    Dm, Ad, Ai = np.empty((d, d)), np.empty((d, d)), np.empty((d, d))
    mod.grp_dL(X, Dm)
    mod.grp_Ad_pair(T, Ad, Ai)
    Tn = np.empty((d, d, d))
    mod.grp_tensor(X, Tn)
    S = np.empty((d, d))
    mod.grp_S(X, E, P, S)
    C = np.empty((d, d))
    mod.grp_coad(P, C)
    tau = k.tau(X)
    ad_pair = k.Ad_pair(tau)
    pairs = [(T.reshape(K, K), tau), (Dm, k.dL(X)), (Ad, ad_pair[0]), (Ai, ad_pair[1]),
             (Tn, k.dL_tensor(X)), (S, k.dL_deriv_T_deriv(X, E, P)),
             (C, view.coadjoint_matrix(P))]
    if g is not None:
        out = np.empty(K * K)
        mod.grp_compose(g.ravel().copy(), T, out)
        pairs.append((out.reshape(K, K), k.compose(g, tau)))
    return max(_max_rel(got, ref) for got, ref in pairs)


# ----------------------------------------------------------------------------- group pieces
@pytest.mark.parametrize("group", [SO3, Product(SO3, Rn(2)), SO3xR3, SE2, SE3,
                                   Product(SE2, Rn(1))],
                         ids=["SO3", "SO3xR2", "SO3xR3", "SE2", "SE3", "SE2xR1"])
def test_group_piece_agrees_with_liegroups(group):
    """Every compiled group map against the liegroups kernel it mirrors, on |ξ| up to 4."""
    mod = _piece_module(group, "cayley")
    from chetaev.discrete_lagrangian.core._interface import SystemInterface

    k = retraction(group, "cayley").kernels
    d = group.dim
    view = SystemInterface(n=d, group=group, system=None, D1L=None, D2L=None)
    rng = np.random.default_rng(17)
    worst = 0.0
    for scale in (1e-8, 0.1, 1.0, 4.0):
        for _ in range(10):
            X, E, P = scale * rng.standard_normal(d), rng.standard_normal(d), \
                rng.standard_normal(d)
            g = group.random(rng)
            worst = max(worst, _piece_error(mod, k, view, X, E, P, g))
    assert worst <= ULPS


def _piece_module(group, kind):
    return load_module("import math\nimport numpy as np\nfrom numba import njit\n" + LINALG
                       + group_source(group, kind))


#: θ² just below and just above every series threshold of ``chetaev.liegroups`` (the f_n
#: switch from their power series to the closed forms there), and generic angles up to 3
#: (θ² = 9: f_5.. still series, f_3, f_4 closed forms) and 5 (θ² = 25: all closed forms)
THETA_SQ = sorted({t * (1.0 + d) for t, _n in SERIES_THETA_SQ.values() for d in (-1e-9, 1e-9)}
                  | {0.0, 1e-12, 0.01, 0.49, 2.25, 9.0, 25.0})
#: the rotation coordinates of each group's algebra vector (θ = their norm)
ROTATION = {"SO3": slice(0, 3), "SE2": slice(2, 3), "SE3": slice(3, 6), "SO2": slice(0, 1)}


@pytest.mark.parametrize("group", [SO3, SE2, SE3, SO2, Product(SO3, Rn(2)),
                                   Product(SE2, SO2, Rn(1))],
                         ids=["SO3", "SE2", "SE3", "SO2", "SO3xR2", "SE2xSO2xR1"])
def test_exp_group_piece_agrees_with_liegroups(group):
    """The compiled exp pieces (Rodrigues, the trivialized tangent and its first and second
    derivatives through the f_n of ``chetaev.liegroups``, with its series thresholds and
    coefficients) against liegroups' exp retraction, at θ² across every series threshold
    and at generic angles: the same bound as Cayley (measured 3.3e-15, SE(3); SO(3) 3.3e-16)."""
    mod = _piece_module(group, "exp")
    from chetaev.discrete_lagrangian.core._interface import SystemInterface

    k = retraction(group, "exp").kernels
    d = group.dim
    view = SystemInterface(n=d, group=group, system=None, D1L=None, D2L=None)
    factors = group.factors if hasattr(group, "factors") else (group,)
    rng = np.random.default_rng(23)
    worst = 0.0
    for s in THETA_SQ:
        for _ in range(3):
            X, E, P = (rng.standard_normal(d) for _ in range(3))
            o = 0
            for f in factors:  # every rotation part at θ² = s
                rot = ROTATION.get(f.name)
                if rot is not None:
                    w = X[o + rot.start:o + rot.stop]
                    w *= math.sqrt(s) / np.linalg.norm(w)
                o += f.dim
            worst = max(worst, _piece_error(mod, k, view, X, E, P))
    assert worst <= ULPS


def test_group_support():
    for kind in ("cayley", "exp"):
        assert group_support(SO3, kind) == ""
        assert group_support(SE2, kind) == group_support(Product(SE3, Rn(2)), kind) == ""
        assert "S2" in group_support(S2, kind)  # S² runs compiled as its lift to SO(3)
        assert group_support(Rn(3), kind)  # a vector space: the vector engine's job
        with pytest.raises(ValueError, match="S2"):
            group_source(S2, kind)
    assert group_support(SO2, "exp") == group_support(Product(SE2, SO2, Rn(1)), "exp") == ""
    assert "retraction" in group_support(SO3, "pade")


# ----------------------------------------------------------------------------- kernels
def _kernels_namespace(k) -> dict:
    ns = {"math": math}
    exec(k.source, ns)  # plain Python: the kernels need no numba to run
    return ns


def test_kernels_of_the_heavy_top(top):
    """The emitted left-trivialized force and its derivative equal the hand-written model's
    −∇V = −χ × Γ and −χ̂ Γ̂ (``testing.heavy_top``)."""
    k = interface_of(top).kernels
    assert isinstance(k, LieKernelSet) and k.group == SO3 and k.mechanical
    assert k.n == 3 and k.m == 0 and k.constraint is None and not k.forced
    assert np.array_equal(np.array(k.mass), np.diag(INERTIA))
    ns = _kernels_namespace(k)
    ref = heavy_top(INERTIA, 1.0, CHI)
    rng = np.random.default_rng(3)
    worst = 0.0
    for R in SO3.random(rng, (20,)):
        f, fj = np.empty(3), np.empty((3, 3))
        ns["lt_force"](R.ravel(), np.zeros(3), f)
        ns["lt_force_jac"](R.ravel(), np.zeros(3), fj)
        worst = max(worst, _max_rel(f, -ref.gradV(R)), _max_rel(fj, -ref.hessV(R)))
    assert worst <= ULPS


def test_no_kernels_for_array_params_or_forces():
    g = sp.MatrixSymbol("g", 3, 3)
    e = sp.symbols("e0:3")
    c = sp.Symbol("c")
    ell = sum(0.5 * e[i] ** 2 for i in range(3)) - c * g[2, 2]
    assert interface_of(from_trivialized_lagrangian(
        SO3, ell, e, g=g, params={c: np.array([1.0, 2.0])})).kernels is None
    u = sp.Symbol("u")
    forced = from_trivialized_lagrangian(SO3, ell.subs(c, 1.0), e, g=g, force=[u, 0, 0],
                                         controls=[u])
    assert interface_of(forced).kernels.forced
    method = LieVPRK(lobatto_iiia_iiib(3), backend="numba")
    with pytest.raises(BackendError, match="forced"):
        integrate(forced, method, R0, W0, h=0.05, n_steps=2, controls=np.zeros((2, 1)))


# ----------------------------------------------------------------------------- LieVPRK
def _run(system, backend, q0=R0, v0=W0, n=100, h=0.05, pair=None, newton=TIGHT,
         kind="cayley"):
    method = LieVPRK(pair or lobatto_iiia_iiib(3), retraction=kind, newton=newton,
                     backend=backend)
    return integrate(system, method, q0, v0, h=h, n_steps=n)


def _agree(a, b) -> float:
    return max(float(np.max(np.abs(getattr(a, f) - getattr(b, f)))) for f in ("t", "q", "v", "p"))


@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_heavy_top_agrees_single(top, kind):
    """(exp: measured 4.2e-15 single, 7.4e-15 batched.)"""
    a, b = _run(top, "numpy", kind=kind), _run(top, "numba", kind=kind)
    assert a.stats["backend"] == "numpy" and b.stats["backend"] == "numba"
    assert a.success and b.success and b.final_state().n == 100
    assert _agree(a, b) <= AGREE
    # and the symbolic twin is the hand-written heavy top (same numpy map)
    c = _run(heavy_top(INERTIA, 1.0, CHI), "numpy", kind=kind)
    assert _agree(c, b) <= AGREE


@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_heavy_top_agrees_batched(top, kind):
    rng = np.random.default_rng(5)
    q0 = SO3.random(rng, (5,))
    v0 = W0 + 0.5 * rng.standard_normal((5, 3))
    a, b = _run(top, "numpy", q0, v0, kind=kind), _run(top, "numba", q0, v0, kind=kind)
    assert b.q.shape == a.q.shape == (101, 5, 3, 3)
    assert _agree(a, b) <= AGREE
    mn, mc = (LieVPRK(lobatto_iiia_iiib(3), retraction=kind, newton=TIGHT, backend=be)
              for be in ("numpy", "numba"))
    s0 = mn.initial_state(top, q0, v0)
    x, y = mn.step(top, s0, 0.05), mc.step(top, s0, 0.05)  # Method.step on a batch
    assert y.q.shape == (5, 3, 3) and y.info["backend"] == "numba"
    assert max(np.max(np.abs(x.q - y.q)), np.max(np.abs(x.p - y.p))) <= AGREE


def test_pair_not_stiffly_accurate_agrees(top):
    """Gauss(2) with its symplectic conjugate: ξ = h Σ bⱼHʲ is not a stage, so τ(ξ), dLτ(ξ)
    and its tensor are evaluated on their own (the engine's S + 1-th retraction argument)."""
    a, b = _run(top, "numpy", pair=gauss(2)), _run(top, "numba", pair=gauss(2))
    assert b.stats["backend"] == "numba"
    assert _agree(a, b) <= AGREE


def test_product_with_rn_agrees(top_r3):
    rng = np.random.default_rng(11)
    g0 = SO3xR3.from_parts([R0, np.array([0.1, -0.2, 0.3])])
    v0 = rng.standard_normal(6)
    a, b = _run(top_r3, "numpy", g0, v0), _run(top_r3, "numba", g0, v0)
    assert b.stats["backend"] == "numba" and b.q.shape == (101, 7, 7)
    assert _agree(a, b) <= AGREE
    g0b = np.stack([g0, SO3xR3.from_parts([SO3.exp(np.array([0.1, 0.2, 0.0])),
                                           np.zeros(3)])])
    a, b = _run(top_r3, "numpy", g0b, v0), _run(top_r3, "numba", g0b, v0)
    assert _agree(a, b) <= AGREE


def test_save_every_and_step(top):
    a = _run(top, "numpy", n=7)
    b = integrate(top, LieVPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numba"), R0, W0,
                  h=0.05, n_steps=7, save_every=3)
    assert b.q.shape == (4, 3, 3)  # nodes 0, 3, 6 and the last one, 7
    assert np.max(np.abs(b.q - a.q[[0, 3, 6, 7]])) <= AGREE
    m = LieVPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numba")
    mn = LieVPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numpy")
    s0 = m.initial_state(top, R0, W0)
    s1, r1 = m.step(top, s0, 0.05), mn.step(top, s0, 0.05)
    assert s1.info["backend"] == "numba" and s1.n == 1 and s1.t == pytest.approx(0.05)
    assert max(np.max(np.abs(s1.q - r1.q)), np.max(np.abs(s1.p - r1.p))) <= AGREE
    assert s1.info["newton_iterations"] == r1.info["newton_iterations"]


def test_convergence_failure_raises(top):
    m = LieVPRK(lobatto_iiia_iiib(3), newton=NewtonOptions(tol=1e-14, max_iter=1),
                backend="numba")
    with pytest.raises(ConvergenceError):
        m.step(top, m.initial_state(top, R0, W0), 0.2)
    tr = integrate(top, m, R0, W0, h=0.2, n_steps=3)
    assert not tr.success and "converge" in tr.message.lower()


def test_backend_choice(top, monkeypatch):
    assert _run(top, "auto", n=2).stats["backend"] == "numba"
    plain = heavy_top(INERTIA, 1.0, CHI)
    assert _run(plain, "auto", n=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="from_trivialized_lagrangian"):
        _run(plain, "numba", n=2)
    auto_exp = LieVPRK(lobatto_iiia_iiib(3), retraction="exp")
    assert integrate(top, auto_exp, R0, W0, h=0.05, n_steps=2).stats["backend"] == "numba"
    # what is still not compiled: a general ℓ (here quartic in η), refused with the reason
    g, e = sp.MatrixSymbol("g", 3, 3), sp.symbols("e0:3")
    quartic = from_trivialized_lagrangian(
        SO3, sum(0.5 * e[i] ** 2 + 0.1 * e[i] ** 4 for i in range(3)) - g[2, 2], e, g=g)
    for kind in ("cayley", "exp"):
        m = LieVPRK(lobatto_iiia_iiib(3), retraction=kind, backend="numba")
        with pytest.raises(BackendError, match="not ½ηᵀ𝕀η"):
            integrate(quartic, m, R0, W0, h=0.05, n_steps=2)
        m = LieVPRK(lobatto_iiia_iiib(3), retraction=kind)
        assert integrate(quartic, m, R0, W0, h=0.05, n_steps=2).stats["backend"] == "numpy"
    from chetaev.discrete_lagrangian.core import _kernels

    monkeypatch.setattr(_kernels, "numba_available", lambda: False)
    assert _run(top, "auto", n=2).stats["backend"] == "numpy"


@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_se2_agrees(kind):
    """A planar rigid body in an anisotropic harmonic well on SE(2) (the generic
    matrix-Cayley group piece, non-abelian with a translation part; the left-trivialized
    gradient of the well depends on the orientation); same bound (measured 4.9e-14; the
    compiled residual and Jacobian equal the numpy ones to 2.8e-16 at a random point, the
    rest is the trajectory's growth of round-off)."""
    g = sp.MatrixSymbol("g", 3, 3)
    e = sp.symbols("e0:3")
    ell = (0.5 * (e[0] ** 2 + 2.0 * e[1] ** 2 + 0.5 * e[2] ** 2)
           - (g[0, 2] ** 2 + 2.0 * g[1, 2] ** 2) / 2)
    body = from_trivialized_lagrangian(SE2, ell, e, g=g)
    g0 = SE2.exp(np.array([1.0, 0.5, 0.3]))
    v0 = np.array([0.8, -0.4, 1.2])
    a, b = _run(body, "numpy", g0, v0, kind=kind), _run(body, "numba", g0, v0, kind=kind)
    assert b.stats["backend"] == "numba"
    assert _agree(a, b) <= AGREE


def test_method_pickles_after_a_compiled_run(top):
    """The plan in the method's cache holds no module (it is kept beside the plan)."""
    import pickle

    m = LieVPRK(lobatto_iiia_iiib(3), newton=TIGHT, backend="numba")
    a = integrate(top, m, R0, W0, h=0.05, n_steps=5)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.backend == "numba"
    b = integrate(top, m2, R0, W0, h=0.05, n_steps=5)
    assert np.array_equal(a.q, b.q) and b.stats["backend"] == "numba"


@pytest.fixture(scope="module")
def se3_body():
    """A rigid body on SE(3) in an anisotropic harmonic well whose left-trivialized gradient
    depends on the orientation (V = ½ pᵀ diag(1, 2, 3) p + e₃·R e₁: both parts of the
    algebra, the SE(3) exp pieces' translation-rotation coupling)."""
    g = sp.MatrixSymbol("g", 4, 4)
    e = sp.symbols("e0:6")
    ell = (0.5 * (e[0] ** 2 + 1.5 * e[1] ** 2 + 2.0 * e[2] ** 2)
           + 0.5 * (1.0 * e[3] ** 2 + 1.5 * e[4] ** 2 + 2.5 * e[5] ** 2)
           - 0.5 * (g[0, 3] ** 2 + 2.0 * g[1, 3] ** 2 + 3.0 * g[2, 3] ** 2) - g[2, 0])
    return from_trivialized_lagrangian(SE3, ell, e, g=g)


def test_se3_exp_agrees(se3_body):
    """SE(3) with the exp retraction, single and batched: measured 1.1e-13 (100 steps; the
    Cayley run of the same model: 1.3e-13, the trajectory's growth of round-off, 1.1e-16
    after one step) and 2.5e-14 (30 steps)."""
    g0 = SE3.exp(np.array([1.0, 0.5, -0.3, 0.3, -0.2, 0.4]))
    v0 = np.array([0.8, -0.4, 0.2, 0.5, -1.0, 2.0])
    a = _run(se3_body, "numpy", g0, v0, kind="exp")
    b = _run(se3_body, "numba", g0, v0, kind="exp")
    assert b.stats["backend"] == "numba" and b.q.shape == (101, 4, 4)
    assert _agree(a, b) <= AGREE
    rng = np.random.default_rng(8)
    g0b, v0b = SE3.random(rng, (3,)), v0 + 0.3 * rng.standard_normal((3, 6))
    a = _run(se3_body, "numpy", g0b, v0b, kind="exp", n=30)
    b = _run(se3_body, "numba", g0b, v0b, kind="exp", n=30)
    assert _agree(a, b) <= AGREE


def test_exp_order_compiled(top):
    """Order 4 of LieVPRK(3) (Lobatto IIIA–IIIB, 2s − 2) with the exp retraction on the
    compiled backend, in q and p against DOP853 (``reference_solution``), T = 2: measured
    slope 4.003 (errors 5.0e-4, 3.1e-5, 1.9e-6)."""
    T = 2.0
    ref = reference_solution(top, R0, W0, [0.0, T])
    hs = [0.2, 0.1, 0.05]
    errs = []
    for h in hs:
        tr = _run(top, "numba", n=round(T / h), h=h, kind="exp", newton=NewtonOptions())
        assert tr.stats["backend"] == "numba"
        errs.append(max(np.max(np.abs(tr.q[-1] - ref.q[-1])),
                        np.max(np.abs(tr.p[-1] - ref.p[-1]))))
    assert abs(fit_order(hs, errs, 1e-11) - 4) <= 0.25, errs
