"""The fixed cost of one compiled ``integrate`` call (issue 17): the module a compiled plan
runs is loaded (its source hashed) once per plan and kept beside it, never shared between
plans of different sources; the driver's lean paths (no copies of the caller's arrays, the
one-trajectory result) give the same run, bit for bit.

The module run is that of ``test_compiled.py`` (the symbolic spherical pendulum,
``ConstrainedPRK`` Lobatto-3, with multipliers); the modules of the other plans are only
imported, never run (nothing compiles for them). The nonholonomic particle of
``bench_dop853.py`` runs through the same driver and plan code.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import ConstrainedPRK, NewtonOptions, integrate  # noqa: E402
from chetaev.discrete_lagrangian.core import _kernels  # noqa: E402
from chetaev.discrete_lagrangian.core._backend import resolve_backend  # noqa: E402
from chetaev.discrete_lagrangian.core._compiled_prk import _PLAN_MODULES  # noqa: E402
from chetaev.discrete_lagrangian.symbolic import from_lagrangian  # noqa: E402
from chetaev.rktableaux import lobatto_iiia_iiib  # noqa: E402

TIGHT = NewtonOptions(tol=1e-14)
Q0 = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
V0 = np.array([0.0, 0.8, 0.0])  # tangent: q·v = 0


def _pendulum(g=1):
    """The spherical pendulum of ``test_compiled.py`` (gravity ``g``), |q| = 1."""
    x, y, z, vx, vy, vz = sp.symbols("x y z v_x v_y v_z")
    L = (vx**2 + vy**2 + vz**2) / 2 - g * z
    return from_lagrangian(L, [x, y, z], [vx, vy, vz], holonomic=[(x**2 + y**2 + z**2 - 1) / 2])


def _method(s=3, newton=TIGHT):
    """``ConstrainedPRK`` Lobatto-``s`` (its compiled plan carries multipliers)."""
    return ConstrainedPRK(lobatto_iiia_iiib(s), newton=newton, backend="numba")


@pytest.fixture(scope="module")
def pendulum():
    return _pendulum()


def _same(a, b):
    """Two trajectories equal bit for bit (arrays, final state, stats but the wall time)."""
    for f in ("t", "q", "v", "p", "lam"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.shape == y.shape and x.tobytes() == y.tobytes(), f
    for f in ("q", "v", "p", "lam"):
        assert getattr(a.final, f).tobytes() == getattr(b.final, f).tobytes(), f
    assert (a.final.t, a.final.n, a.final.grid) == (b.final.t, b.final.n, b.final.grid)
    sa = {k: v for k, v in a.stats.items() if k != "wall_time_s"}
    sb = {k: v for k, v in b.stats.items() if k != "wall_time_s"}
    assert sa == sb and a.message == b.message


def test_the_module_is_loaded_once_per_plan(pendulum, monkeypatch):
    m = _method()
    a = integrate(pendulum, m, Q0, V0, h=0.1, n_steps=7, save_every=3)
    plan = resolve_backend(m, pendulum)
    assert a.stats["backend"] == "numba" and _PLAN_MODULES[plan] is plan.module()
    loads = []
    real = _kernels.load_module
    monkeypatch.setattr(_kernels, "load_module", lambda src: loads.append(src) or real(src))
    b = integrate(pendulum, m, Q0, V0, h=0.1, n_steps=7, save_every=3)
    assert loads == []  # neither loaded nor hashed again
    _same(a, b)
    assert plan.module() is real(plan.source)  # the module of the plan's own source


def test_plans_of_other_sources_never_share_a_module(pendulum):
    """Another system, or a method option that changes the generated source, makes another
    plan with its own module; an option that is a run-time argument (NewtonOptions) keeps
    the source and so the module, with the plan's own options."""
    m = _method()
    integrate(pendulum, m, Q0, V0, h=0.1, n_steps=2)
    plan = resolve_backend(m, pendulum)
    other = resolve_backend(m, _pendulum(g=2))  # imported below, never run
    ham = _method(2)  # another number of stages: another source
    plan_h = resolve_backend(ham, pendulum)
    loose = _method(newton=NewtonOptions(tol=1e-9))
    plan_l = resolve_backend(loose, pendulum)
    assert len({plan.source, other.source, plan_h.source}) == 3
    mods = [p.module() for p in (plan, other, plan_h)]
    assert len({id(x) for x in mods}) == 3
    for p, mod in zip((plan, other, plan_h), mods, strict=True):
        assert mod is _kernels.load_module(p.source)
    assert plan_l is not plan and plan_l.source == plan.source
    assert plan_l.module() is plan.module() and plan_l.options.tol == 1e-9


def test_the_module_cache_does_not_keep_a_plan_alive(pendulum):
    m = _method()
    integrate(pendulum, m, Q0, V0, h=0.1, n_steps=2)
    plan = resolve_backend(m, pendulum)
    assert plan in _PLAN_MODULES
    ref = weakref.ref(plan)
    del m, plan
    gc.collect()
    assert ref() is None  # gone with its method: the module cache holds it weakly


def _halves(pendulum):
    m = _method()
    whole = integrate(pendulum, m, Q0, V0, h=0.1, n_steps=10)
    st = integrate(pendulum, m, Q0, V0, h=0.1, n_steps=5).final_state()
    before = {
        f: (getattr(st, f).copy(), getattr(st, f).flags.writeable) for f in ("q", "v", "p", "lam")
    }
    rest = integrate(pendulum, m, st, None, h=0.1, n_steps=5)
    return whole, st, before, rest


def test_continuing_leaves_the_callers_arrays_alone(pendulum):
    """A State continued from is read, not frozen or changed (the compiled run takes
    read-only views of its arrays); the two halves agree with the whole run."""
    whole, st, before, rest = _halves(pendulum)
    for f, (x, w) in before.items():
        y = getattr(st, f)
        assert y.flags.writeable == w and y.tobytes() == x.tobytes(), f
    for f in ("q", "v", "p"):
        assert np.max(np.abs(getattr(rest, f)[-1] - getattr(whole, f)[-1])) <= 1e-12, f
    assert rest.t[-1] == whole.t[-1]


def test_compiled_continuation_is_bitwise(pendulum):
    """The predictor's past solutions travel in the final state's carry (MEMORY_KEY): the
    continued run takes the same steps as the whole run."""
    whole, _, _, rest = _halves(pendulum)
    for f in ("q", "v", "p", "lam"):
        assert getattr(rest, f)[-1].tobytes() == getattr(whole, f)[-1].tobytes(), f


def test_batch_of_one_and_single_trajectory_agree(pendulum):
    """The one-trajectory shortcut of the result (no batch axis to move) gives the member
    of a batch of one, bit for bit, with the batch axis kept for the batch."""
    m = _method()
    a = integrate(pendulum, m, Q0, V0, h=0.1, n_steps=9, save_every=4)
    b = integrate(pendulum, m, Q0[None], V0[None], h=0.1, n_steps=9, save_every=4)
    assert a.q.shape == (4, 3) and b.q.shape == (4, 1, 3) and b.lam.shape == (4, 1, 1)
    for f in ("q", "v", "p", "lam"):
        assert getattr(a, f).tobytes() == getattr(b, f)[:, 0].tobytes(), f
    np.testing.assert_array_equal(a.t, b.t)
