"""The compiled backend (issue 17) of ``DSOCSIntegrator``: the solve of eq. (4) (Thm. 3.3).

The compiled step solves eq. (4) of the curvature particle (§4.1.2, eqs. (6)–(7) in the
DSOCS's normalization) with the unknowns, initial guess 2q_k − q_{k−1}, row normalization,
stopping rule and polishing step of the numpy solve; its kernels are numba source checked
against the DSOCS's callables at seeded points when the DSOCS is built. The agreement over
100 steps (single and batched) is ``integration-tests/test_compiled_protocol.py``'s
(``DSOCS-particle``); here: the backend selection, the kernel check, the ``"numba"`` error of
a configuration left on numpy, the per-step path, and the failure report. The compiled
module is the registry's (the same curvature source: one cold compile, ~7 s, then cached on
disk). The kernel checks run without numba.
"""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import NewtonOptions, integrate
from chetaev.discrete_lagrangian.extending import BackendError
from chetaev.dsocs import (
    DSOCSInputError,
    DSOCSIntegrator,
    curvature_particle_dsocs,
    curvature_particle_kernels,
    curvature_particle_solver,
)

#: the registry's curvature (integration-tests/test_protocol.py) and its kernel source
KERNEL = "def curvature(q):\n    return 1.0 + 0.3 * q[0]\n"
H = 0.05
Q0, V0 = np.array([0.0, 0.0]), np.array([1.0, 0.0])
AGREE = 1e-12


def k(q):
    return 1.0 + 0.3 * q[..., 0]


def _family(**kw):
    return curvature_particle_dsocs(k, closed_form=False, curvature_kernel=KERNEL, **kw)


@pytest.fixture
def numba() -> None:
    pytest.importorskip("numba", exc_type=ImportError)


# -- the kernels (no numba needed) -----------------------------------------------------------


def test_particle_kernels_are_written_for_a_constant_k_and_given_for_a_callable():
    assert "return 2.0" in curvature_particle_kernels(2.0)
    assert curvature_particle_kernels(k) is None  # a Python callable: no source
    assert curvature_particle_dsocs(k, closed_form=False).compiled_kernels is None
    fam = _family()
    assert KERNEL in fam.compiled_kernels
    assert fam.at(H).compiled_kernels == fam.compiled_kernels  # the members carry them
    with pytest.raises(DSOCSInputError, match="def curvature"):
        curvature_particle_dsocs(k, closed_form=False, curvature_kernel="return 1.0")


@pytest.mark.parametrize("wrong", [
    "def curvature(q):\n    return 1.0 + 0.3 * q[1]\n",  # another curvature
    "def curvature(q):\n    return 1.0 + 0.3 * q[0] + 1e-9 * q[0] * q[1]\n",  # nearly k
])
def test_a_wrong_curvature_kernel_is_rejected(wrong):
    with pytest.raises(DSOCSInputError, match="dsocs_residual disagrees"):
        curvature_particle_dsocs(k, closed_form=False, curvature_kernel=wrong)


def test_a_wrong_jacobian_kernel_is_rejected():
    fam = _family()
    bad = fam.compiled_kernels.replace("out[1, 1] = -PARTICLE_C * (a1 / (2.0 * h)",
                                       "out[1, 1] = -PARTICLE_C * (a1 / (3.0 * h)")
    assert bad != fam.compiled_kernels
    with pytest.raises(DSOCSInputError, match="dsocs_jacobian_q2 disagrees"):
        fam.at(0.1).__class__(*_pieces(fam.at(0.1)), compiled_kernels=bad)


def _pieces(ds):
    return ds.discrete_lagrangian, ds.kinematic_constraint, ds.variational_constraint


def test_kernel_source_must_run_and_declare_its_shape():
    ds = _family().at(0.1)
    good = ds.compiled_kernels
    with pytest.raises(DSOCSInputError, match="DSOCS_SHAPE"):
        type(ds)(*_pieces(ds), compiled_kernels=good.replace("DSOCS_SHAPE = (2, 2)", ""))
    with pytest.raises(DSOCSInputError, match="does not run"):
        type(ds)(*_pieces(ds), compiled_kernels=good + "\nthis is not python\n")
    with pytest.raises(DSOCSInputError, match="rows"):
        type(ds)(*_pieces(ds), compiled_kernels=good.replace("(2, 2)", "(2, 3)"))
    # the right source on the DSOCS of another mass is rejected: the check is not vacuous
    heavy = curvature_particle_dsocs(k, closed_form=False, mass=2.0).at(0.1)
    with pytest.raises(DSOCSInputError, match="dsocs_residual disagrees"):
        type(heavy)(*_pieces(heavy), compiled_kernels=good)
    assert "PARTICLE_C = 2.0" in _family(mass=2.0).compiled_kernels


# -- backend selection and the "numba" error ---------------------------------------------------


def test_auto_runs_compiled_and_numpy_stays_numpy(numba):
    fam = _family()
    for backend, want in (("auto", "numba"), ("numba", "numba"), ("numpy", "numpy")):
        sol = integrate(fam, DSOCSIntegrator(backend=backend), Q0, V0, h=H, n_steps=3)
        assert sol.success and sol.stats["backend"] == want, (backend, sol.message)
    # without kernels "auto" runs numpy
    plain = curvature_particle_dsocs(k, closed_form=False)
    sol = integrate(plain, DSOCSIntegrator(), Q0, V0, h=H, n_steps=3)
    assert sol.success and sol.stats["backend"] == "numpy"


@pytest.mark.parametrize("case", ["no kernels", "solver", "root_filter", "forced"])
def test_numba_raises_for_a_configuration_left_on_numpy(case, numba):
    fam, method = _family(), {}
    if case == "no kernels":
        fam, match = curvature_particle_dsocs(k, closed_form=False), "no compiled kernels"
    elif case == "solver":
        method, match = {"solver": curvature_particle_solver(1.0)}, "problem-specific solver"
    elif case == "root_filter":
        method = {"root_filter": lambda q0, q1, q2, h: np.ones(q2.shape[:-1], bool)}
        match = "root_filter"
    else:
        import attrs

        fam = attrs.evolve(fam, force=lambda q, v, u: -0.1 * v)
        match = "forced DSOCS"
    with pytest.raises(BackendError, match=f"backend='numba'.*{match}"):
        integrate(fam, DSOCSIntegrator(**method, backend="numba"), Q0, V0, h=H, n_steps=2)
    sol = integrate(fam, DSOCSIntegrator(**method), Q0, V0, h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numpy"


# -- the per-step path and the failure report --------------------------------------------------


def test_method_step_runs_compiled_and_agrees(numba):
    """``Method.step`` (the driver's Python loop: callbacks, progress) solves compiled too."""
    fam = _family()
    tight = NewtonOptions(tol=1e-14)
    rng = np.random.default_rng(5)
    q0, v0 = Q0 + 0.3 * rng.standard_normal((3, 2)), V0 + 0.3 * rng.standard_normal((3, 2))
    states = {}
    for backend in ("numpy", "numba"):
        m = DSOCSIntegrator(newton=tight, backend=backend)
        s = m.initial_state(fam, q0, v0)
        for _ in range(20):
            s = m.step(fam, s, H)
        states[backend] = s
    a, b = states["numpy"], states["numba"]
    assert b.info["backend"] == "numba" and "backend" not in a.info
    for x, y in ((a.q, b.q), (a.v, b.v), (a.carry["q_next"], b.carry["q_next"])):
        assert np.max(np.abs(x - y)) <= AGREE * max(1.0, np.max(np.abs(x)))
    # the compiled loop of integrate ends on the same node, with the same carry
    sol = integrate(fam, DSOCSIntegrator(newton=tight, backend="numba"), q0, v0, h=H,
                    n_steps=20)
    assert np.max(np.abs(sol.final.carry["q_next"] - b.carry["q_next"])) <= AGREE
    assert np.max(np.abs(sol.final.carry["q_prev"] - b.carry["q_prev"])) <= AGREE


def test_a_failed_step_reports_step_time_and_residual(numba):
    """max_iter=1 at tol 1e-14 cannot converge: the compiled run falls back to the numpy
    solve (its restarts), which fails too; both backends report the same failure."""
    fam = _family()
    runs = {b: integrate(fam, DSOCSIntegrator(newton=NewtonOptions(tol=1e-14, max_iter=1),
                                              max_deflations=0, backend=b),
                         Q0, V0, h=H, n_steps=5) for b in ("numpy", "numba")}
    a, b = runs["numpy"], runs["numba"]
    assert not a.success and not b.success
    assert a.stats["n_steps"] == b.stats["n_steps"] == 0
    for sol in (a, b):
        assert "did not converge at step 0 (t = 0)" in sol.message
        assert "residual" in sol.message


def test_compiled_loop_saves_the_numpy_nodes_across_blocks(numba, monkeypatch):
    """``integrate``'s compiled loop (blocks of steps, here of 5) saves every 7th node and
    the last, as the numpy loop; node k holds q_k and v_k = (q_{k+1} − q_{k−1})/(2h)."""
    from chetaev.dsocs import _compiled

    monkeypatch.setattr(_compiled, "_BLOCK", 5)
    fam = _family()
    rng = np.random.default_rng(9)
    q0, v0 = Q0 + 0.3 * rng.standard_normal((2, 2)), V0 + 0.3 * rng.standard_normal((2, 2))
    tight = NewtonOptions(tol=1e-14)
    a, b = (integrate(fam, DSOCSIntegrator(newton=tight, backend=backend), q0, v0, h=H,
                      n_steps=23, save_every=7) for backend in ("numpy", "numba"))
    assert b.stats["backend"] == "numba" and b.stats["n_steps"] == 23
    assert a.q.shape == b.q.shape == (5, 2, 2)  # nodes 0, 7, 14, 21, 23
    np.testing.assert_array_equal(a.t, b.t)
    for x, y in ((a.q, b.q), (a.v, b.v), (a.final.q, b.final.q), (a.final.v, b.final.v)):
        assert np.max(np.abs(x - y)) <= AGREE * max(1.0, np.max(np.abs(x)))
    assert b.p is None and b.lam is None
    assert b.stats["newton_iterations"] > 23  # counted per step, from every block


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_registry_pair_agrees_at_tol_1e_14(batched, numba):
    """The registry's measure (``test_compiled_protocol``) with ``NewtonOptions(tol=1e-14)``
    (the registry's method holds none): 100 steps, the registry's h and initial state, or a
    seeded batch of four around it. Measured: 1.1e-14 single, 7.5e-15 batched (margin 90)."""
    q0, v0 = Q0, V0
    if batched:
        rng = np.random.default_rng(17)
        q0, v0 = Q0 + 0.3 * rng.standard_normal((4, 2)), V0 + 0.3 * rng.standard_normal((4, 2))
    tight = NewtonOptions(tol=1e-14)
    a, b = (integrate(_family(), DSOCSIntegrator(start="second_order", newton=tight,
                                                 backend=backend), q0, v0, h=H, n_steps=100)
            for backend in ("numpy", "numba"))
    assert a.success and b.success and b.stats["backend"] == "numba"
    assert b.q.shape == a.q.shape == (101, *np.shape(q0))
    for x, y in ((a.t, b.t), (a.q, b.q), (a.v, b.v)):
        assert np.max(np.abs(x - y)) <= AGREE * max(1.0, np.max(np.abs(x)))


def test_a_step_left_unsolved_by_the_compiled_newton_is_solved_on_numpy(numba, monkeypatch):
    """A compiled block that stops at a step (status 1: Newton not converged; simulated by
    cutting the first block after 3 steps) hands that step to the numpy solve (its deflated
    restarts) and resumes compiled: the nodes are the numpy run's."""
    from chetaev.dsocs import _compiled

    go = _compiled.DSOCSPlan._go
    calls = []

    def failing_first_block(self, a, b, h, steps):
        calls.append(steps)
        if len(calls) > 1 or steps <= 3:
            return go(self, a, b, h, steps)
        oq, ov, op, its, res, fin, out = go(self, a, b, h, 3)
        out[:, 0], out[:, 1] = 1.0, 3.0  # "not converged at the 4th step"
        return oq, ov, op, its, res, fin, out

    monkeypatch.setattr(_compiled.DSOCSPlan, "_go", failing_first_block)
    fam = _family()
    tight = NewtonOptions(tol=1e-14)
    a, b = (integrate(fam, DSOCSIntegrator(newton=tight, backend=backend), Q0, V0, h=H,
                      n_steps=10) for backend in ("numpy", "numba"))
    assert calls == [10, 6]  # the first block, then the rest after the numpy step
    assert b.success and b.stats["backend"] == "numba" and b.q.shape == a.q.shape
    for x, y in ((a.q, b.q), (a.v, b.v), (a.final.carry["q_next"], b.final.carry["q_next"])):
        assert np.max(np.abs(x - y)) <= AGREE * max(1.0, np.max(np.abs(x)))
