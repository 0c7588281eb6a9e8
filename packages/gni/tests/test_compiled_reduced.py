"""The compiled backend (issue 17) of the reduced GNI (paper Def. 7.1, (29)/(30)/(38)).

The compiled step solves ``F l_d^−(x_k, w) = p⁻_k`` with the warm start, chord Newton
iteration (matrix at the warm start), stopping rule and extra correction of the numpy step,
then the closed-form node map of (30b)/(38b) and ``W_{k+1} = W_k τ(σ_k)``; with
``NewtonOptions(tol=1e-14)`` both paths agree to round-off over 100 steps (the brief's bound
1e-12; λ: 1e-12/h, since ``h λ_{k+1} = −2C⁻¹(…)`` amplifies a round-off difference of ``p⁺``
by ~2/h). Measured (BALL_EXPERIMENT_1 and _2, h = 0.1, 100 steps, both retractions, single
and batched): worst 3.7e-15 in q, v, p and 2.6e-13 in λ (Exp. 1, batched), so the bounds
have margins of ~270 and ~40, and fail on any change of the equations (the exp step run
for a Cayley one differs by 1.0e-4 in q). The
reference is the numpy path of the same method on the same system. Each (system, retraction)
is one compiled module (~10 s on first use, then cached on disk).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", exc_type=ImportError)

from chetaev.discrete_lagrangian import ConvergenceError, InputError, NewtonOptions, integrate
from chetaev.discrete_lagrangian.extending import BackendError
from chetaev.gni import (
    BALL_EXPERIMENT_1,
    BALL_EXPERIMENT_2,
    ReducedGNI,
    ReducedSystem,
    rolling_ball,
)
from chetaev.liegroups import SO3, Rn

AGREE = 1e-12
H = 0.1
TIGHT = NewtonOptions(tol=1e-14)
EXPERIMENTS = {"exp1": BALL_EXPERIMENT_1, "exp2": BALL_EXPERIMENT_2}


def _ball(exp, **over):
    kw = {k: exp[k] for k in ("inertia", "mass", "radius", "table_rate")}
    kw.update(over)
    return rolling_ball(**kw)


def _rel(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape
    return float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(a))))


def _agree(a, b, h=H) -> None:
    assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
    assert a.success and b.success, (a.message, b.message)
    for field in ("t", "q", "v", "p"):
        assert _rel(getattr(a, field), getattr(b, field)) <= AGREE, field
    assert _rel(a.lam, b.lam) <= AGREE / h


def _batch(exp, b=4, seed=5):
    """``b`` initial states around the experiment's, on its constraints."""
    rng = np.random.default_rng(seed)
    r, om = exp["radius"], exp["table_rate"]
    x = np.array(exp["x0"]) + 0.3 * rng.standard_normal((b, 2))
    v = np.array(exp["v0"]) + 0.3 * rng.standard_normal((b, 5))
    v[:, 0] = r * v[:, 3] - om * x[:, 1]
    v[:, 1] = -r * v[:, 2] + om * x[:, 0]
    return x, v


@pytest.mark.parametrize("retr", ["cayley", "exp"])
@pytest.mark.parametrize("which", sorted(EXPERIMENTS))
@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_compiled_agrees_with_numpy(retr, which, batched):
    exp = EXPERIMENTS[which]
    system = _ball(exp)
    x0, v0 = _batch(exp) if batched else (np.array(exp["x0"]), np.array(exp["v0"]))
    runs = [integrate(system, ReducedGNI(retr, newton=TIGHT, backend=b), x0, v0, h=H,
                      n_steps=100) for b in ("numpy", "numba")]
    _agree(*runs)
    assert runs[1].q.shape == (101, *x0.shape)


def test_the_bound_detects_another_retraction():
    """The check is not vacuous: the exp step run for a Cayley one differs far above it."""
    exp = BALL_EXPERIMENT_2
    system = _ball(exp)
    a = integrate(system, ReducedGNI("cayley", newton=TIGHT, backend="numpy"), exp["x0"],
                  exp["v0"], h=H, n_steps=100)
    b = integrate(system, ReducedGNI("exp", newton=TIGHT, backend="numba"), exp["x0"],
                  exp["v0"], h=H, n_steps=100)
    assert _rel(a.q, b.q) > 1e3 * AGREE


@pytest.mark.parametrize("retr", ["cayley", "exp"])
def test_compiled_steps_carry_the_group_element(retr):
    """``Method.step`` compiled: the same nodes, group element W_k and increment ξ_{k−1}
    (``carry``) as the numpy step, step after step (the warm start reads ξ_{k−1})."""
    exp = BALL_EXPERIMENT_2
    system = _ball(exp)
    ref, fast = (ReducedGNI(retr, newton=TIGHT, backend=b) for b in ("numpy", "numba"))
    g0 = SO3.exp(np.array([0.1, -0.2, 0.3]))
    s = ref.initial_state(system, exp["x0"], exp["v0"], g0=g0)
    c = fast.initial_state(system, exp["x0"], exp["v0"], g0=g0)
    for _ in range(20):
        s, c = ref.step(system, s, H), fast.step(system, c, H)
    assert c.info["backend"] == "numba" and "backend" not in s.info
    assert c.n == s.n == 20 and c.t == pytest.approx(s.t, rel=1e-15)
    for a, b in ((s.q, c.q), (s.v, c.v), (s.p, c.p), (s.carry["g"], c.carry["g"]),
                 (s.carry["xi"], c.carry["xi"])):
        assert _rel(a, b) <= AGREE
    assert _rel(s.lam, c.lam) <= AGREE / H
    assert np.allclose(c.carry["g"] @ c.carry["g"].T, np.eye(3), atol=1e-13)


def test_auto_and_numpy_backend_selection():
    exp = BALL_EXPERIMENT_1
    system = _ball(exp)
    auto = integrate(system, ReducedGNI(), exp["x0"], exp["v0"], h=H, n_steps=3)
    assert auto.success and auto.stats["backend"] == "numba"
    plain = integrate(system, ReducedGNI(backend="numpy"), exp["x0"], exp["v0"], h=H,
                      n_steps=3)
    assert plain.success and plain.stats["backend"] == "numpy"


def test_a_system_of_data_needs_no_kernel_source():
    """The fixed table: constant K, no potential, linear constraints: compiled as it is."""
    exp = BALL_EXPERIMENT_1
    system = _ball(exp, table_rate=0.0)
    assert system.compiled_kernels is None
    v0 = np.array([2.0, 0.0, 0.0, 2.0, 0.5])
    runs = [integrate(system, ReducedGNI(newton=TIGHT, backend=b), exp["x0"], v0, h=H,
                      n_steps=100) for b in ("numpy", "numba")]
    _agree(*runs)


def _plain_ball(**kw):
    """The ball of Exp. 2 with the affine term as a plain callable and no kernels."""
    ref = _ball(BALL_EXPERIMENT_2)
    return ReducedSystem(group=SO3, n_shape=2, metric=ref.metric,
                         constraint_matrix=ref.constraint_matrix,
                         constraint_affine=ref.constraint_affine, **kw)


def test_plain_callables_keep_numpy_and_numba_says_how_to_get_kernels():
    exp = BALL_EXPERIMENT_2
    system = _plain_ball()
    with pytest.raises(BackendError, match=r"backend='numba'.*constraint_affine.*"
                                           r"compiled_kernels"):
        integrate(system, ReducedGNI(backend="numba"), exp["x0"], exp["v0"], h=H, n_steps=2)
    with pytest.raises(BackendError, match="compiled_kernels"):
        ReducedGNI(backend="numba").step(
            system, ReducedGNI().initial_state(system, exp["x0"], exp["v0"]), H)
    sol = integrate(system, ReducedGNI(), exp["x0"], exp["v0"], h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numpy"


def test_a_kernel_that_disagrees_with_its_callable_is_an_error():
    exp = BALL_EXPERIMENT_2
    wrong = "def constraint_affine(x, out):\n    out[0] = 0.2 * x[1]\n    out[1] = 0.2 * x[0]\n"
    with pytest.raises(InputError, match=r"constraint_affine.*disagrees"):
        _plain_ball(compiled_kernels=wrong)
    with pytest.raises(InputError, match="does not run"):
        _plain_ball(compiled_kernels="def constraint_affine(x, out)\n")
    right = wrong.replace("out[1] = 0.2", "out[1] = -0.2")
    # right at the interior check point (0.3, 0.9), wrong elsewhere: the seeded points catch it
    sly = right.replace("out[0] = 0.2 * x[1]",
                        "out[0] = 0.2 * x[1] + (x[0] - 0.3) * (x[1] - 0.9)")
    with pytest.raises(InputError, match=r"constraint_affine.*disagrees"):
        _plain_ball(compiled_kernels=sly)
    sol = integrate(_plain_ball(compiled_kernels=right), ReducedGNI(), exp["x0"], exp["v0"],
                    h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numba"
    with pytest.raises(InputError, match="compiled_kernels must be None or a str"):
        _plain_ball(compiled_kernels=3)


def _forced_ball():
    ref = _ball(BALL_EXPERIMENT_2)
    return ReducedSystem(group=SO3, n_shape=2, metric=ref.metric,
                         constraint_matrix=ref.constraint_matrix,
                         constraint_affine=ref.constraint_affine,
                         compiled_kernels=ref.compiled_kernels,
                         force=lambda x, v, u: -0.1 * v)


def test_fallback_reasons():
    """Unsupported configurations: ``"numba"`` raises with the reason, ``"auto"`` runs
    numpy."""
    exp = BALL_EXPERIMENT_2
    forced = _forced_ball()
    with pytest.raises(BackendError, match=r"backend='numba'.*forced system"):
        integrate(forced, ReducedGNI(backend="numba"), exp["x0"], exp["v0"], h=H, n_steps=2)
    sol = integrate(forced, ReducedGNI(), exp["x0"], exp["v0"], h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numpy"
    # a group whose retraction liegroups does not compile (R¹ alone)
    line = ReducedSystem(group=Rn(1), n_shape=1, metric=np.diag([1.0, 2.0]),
                         constraint_matrix=np.array([[1.0, -1.0]]))
    v0 = np.array([0.5, 0.5])
    with pytest.raises(BackendError, match=r"backend='numba'.*has no compiled "
                                           r"path for the group R1"):
        integrate(line, ReducedGNI(backend="numba"), [0.0], v0, h=H, n_steps=2)
    sol = integrate(line, ReducedGNI(), [0.0], v0, h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numpy"


_KERNELS = """
def potential_grad(x, out):
    out[0] = x[0] + 0.1 * x[1]
    out[1] = 2.0 * x[1] + 0.1 * x[0]


def constraint_matrix(x, out):
    for i in range(2):
        for j in range(5):
            out[i, j] = 0.0
    out[0, 0] = 1.0
    out[0, 3] = -1.0
    out[0, 4] = 0.3 * math.sin(x[0])
    out[1, 1] = 1.0
    out[1, 2] = 1.0


def constraint_affine(x, out):
    out[0] = 0.5 * x[1]
    out[1] = -0.5 * x[0]
"""


def _shaped_system():
    """A reduced system with every part a callable (a potential, an x-dependent K, an
    affine term) and a coupled metric, with its kernels."""

    def grad(x):
        x = np.asarray(x, float)
        return np.stack([x[..., 0] + 0.1 * x[..., 1], 2.0 * x[..., 1] + 0.1 * x[..., 0]], -1)

    def K(x):
        x = np.asarray(x, float)
        out = np.zeros((*x.shape[:-1], 2, 5))
        out[..., 0, 0], out[..., 0, 3], out[..., 1, 1], out[..., 1, 2] = 1.0, -1.0, 1.0, 1.0
        out[..., 0, 4] = 0.3 * np.sin(x[..., 0])
        return out

    def a(x):
        x = np.asarray(x, float)
        return np.stack([0.5 * x[..., 1], -0.5 * x[..., 0]], -1)

    G = np.diag([1.0, 1.2, 0.8, 0.9, 1.1])
    G[0, 3] = G[3, 0] = 0.1
    return ReducedSystem(group=SO3, n_shape=2, metric=G, constraint_matrix=K,
                         constraint_affine=a,
                         potential=lambda x: 0.5 * x[..., 0] ** 2 + x[..., 1] ** 2
                         + 0.1 * x[..., 0] * x[..., 1],
                         potential_grad=grad, compiled_kernels=_KERNELS)


@pytest.mark.parametrize("retr", ["cayley", "exp"])
def test_a_system_with_every_part_a_kernel(retr):
    system = _shaped_system()
    x0 = np.array([0.4, -0.3])
    w = np.array([0.2, -0.5, 0.7])
    K0, a0 = system.K(x0), system.a(x0)
    xdot = -(K0[:, 2:] @ w + a0)  # K's x-block is the identity
    v0 = np.concatenate([xdot, w])
    runs = [integrate(system, ReducedGNI(retr, newton=TIGHT, backend=b), x0, v0, h=H,
                      n_steps=100) for b in ("numpy", "numba")]
    _agree(*runs)


def test_newton_failure_reports_step_time_and_residual():
    """A compiled Newton failure is the numpy path's: the same step, time and a residual
    (``integrate``'s message; ``Method.step`` raises ConvergenceError)."""
    exp = BALL_EXPERIMENT_2
    system = _ball(exp)
    starved = NewtonOptions(tol=1e-14, max_iter=1)
    runs = [integrate(system, ReducedGNI(newton=starved, backend=b), exp["x0"], exp["v0"],
                      h=0.5, n_steps=5) for b in ("numpy", "numba")]
    a, b = runs
    assert not a.success and not b.success
    assert b.stats["n_steps"] == a.stats["n_steps"]
    for sol in runs:
        assert "Step failed" in sol.message and "residual" in sol.message
        assert f"step {a.stats['n_steps']}" in sol.message
    method = ReducedGNI(newton=starved, backend="numba")
    state = method.initial_state(system, exp["x0"], exp["v0"])
    with pytest.raises(ConvergenceError, match="residual"):
        method.step(system, state, 0.5)


def test_compiled_integrate_keeps_the_carry():
    """``integrate``'s compiled loop ends on the numpy loop's final state, carry included
    (the group element W_N and the increment ξ_{N−1}), and integrating on from it gives the
    nodes of one longer run."""
    exp = BALL_EXPERIMENT_2
    system = _ball(exp)
    g0 = SO3.exp(np.array([0.3, 0.1, -0.2]))
    runs = {}
    for b in ("numpy", "numba"):
        method = ReducedGNI(newton=TIGHT, backend=b)
        s0 = method.initial_state(system, exp["x0"], exp["v0"], g0=g0)
        first = integrate(system, method, s0, None, h=H, n_steps=30)
        runs[b] = (first, integrate(system, method, first.final_state(), None, h=H,
                                    n_steps=30))
    (a1, a2), (b1, b2) = runs["numpy"], runs["numba"]
    assert b1.stats["backend"] == b2.stats["backend"] == "numba"
    for key in ("g", "xi"):
        assert _rel(a1.final.carry[key], b1.final.carry[key]) <= AGREE
        assert _rel(a2.final.carry[key], b2.final.carry[key]) <= AGREE
    _agree(a2, b2)


@pytest.mark.parametrize(("group", "retr"), [("SE2", "cayley"), ("SE3", "exp")])
def test_other_groups_with_compiled_retractions(group, retr):
    """The step is written on liegroups' compiled group maps, not on SO(3): a reduced system
    on SE(2) / SE(3) (a seeded coupled metric, two linear constraints) agrees as well
    (measured: 1.1e-14 / 2.1e-13 in q, v, p over 100 steps)."""
    import chetaev.liegroups as lg

    grp = getattr(lg, group)
    n, d = 1, grp.dim
    N = n + d
    rng = np.random.default_rng(3)
    A = rng.standard_normal((N, N))
    K = np.zeros((2, N))
    K[0, 0], K[0, n + 1], K[1, n], K[1, N - 1] = 1.0, -1.0, 1.0, 0.5
    system = ReducedSystem(group=grp, n_shape=n, metric=A @ A.T + N * np.eye(N),
                           constraint_matrix=K)
    w = rng.standard_normal(N)
    v0 = w - K.T @ np.linalg.solve(K @ K.T, K @ w)
    runs = [integrate(system, ReducedGNI(retr, newton=TIGHT, backend=b), np.zeros(n), v0, h=H,
                      n_steps=100) for b in ("numpy", "numba")]
    _agree(*runs)
    assert _rel(runs[0].final.carry["g"], runs[1].final.carry["g"]) <= AGREE


def test_batch_of_several_axes_and_save_every():
    """A (2, 3) batch, saving every 7th node: the same saved nodes, times, final carry and
    Newton counts as the numpy loop."""
    exp = BALL_EXPERIMENT_2
    system = _ball(exp)
    x, v = _batch(exp, b=6)
    x, v = x.reshape(2, 3, 2), v.reshape(2, 3, 5)
    a, b = (integrate(system, ReducedGNI(newton=TIGHT, backend=bk), x, v, h=H, n_steps=100,
                      save_every=7) for bk in ("numpy", "numba"))
    assert b.q.shape == a.q.shape == (16, 2, 3, 2)
    _agree(a, b)
    assert _rel(a.final.carry["g"], b.final.carry["g"]) <= AGREE
    assert b.stats["newton_iterations"] == a.stats["newton_iterations"]
