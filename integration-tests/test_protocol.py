"""Every integrator of every package goes through the shared protocol.

One registry of (method, problem) pairs (diffrax's ``all_ode_solvers``, scipy's
``test_classes``): ``initial_state`` completes the data and returns a frozen ``State`` at step
0; ``step`` advances t by h and the step counter by one, keeps the shapes and returns finite
numbers; ``integrate`` runs it; bad input (NaN, wrong shape) raises a ``ValueError`` subclass
whose message names the problem.

Every method is a :class:`chetaev.discrete_lagrangian.Method` (issue 15): it declares ``name``,
``order`` and ``symmetric``, and the step size follows one rule everywhere (``Method.step``):
zero, NaN, inf and non-numbers raise ``InputError`` itself; a negative h steps backwards,
except for a method that declares ``negative_steps = False`` (DSOCS), where it raises the same
``InputError``; the driver ``integrate`` requires h > 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    DiscreteEulerLagrange,
    InputError,
    LieVPRK,
    Method,
    State,
    integrate,
)
from chetaev.discrete_lagrangian import discretization_maps as dm
from chetaev.discrete_lagrangian import testing as dlt
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

Problem = tuple[Any, np.ndarray, np.ndarray, float]


# --- problems: (system, q0, v0, h) -------------------------------------------------------------

def pendulum_angle() -> Problem:
    return dlt.pendulum_angle(), np.array([0.8]), np.array([0.3]), 0.1


def spherical_pendulum() -> Problem:
    q0 = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
    v0 = np.array([0.0, 0.7, 0.0])  # tangent: q0 · v0 = 0
    return dlt.spherical_pendulum(), q0, v0, 0.05


def free_rigid_body() -> Problem:
    system = dlt.free_rigid_body()
    return system, np.eye(3), np.array([0.3, 1.0, -0.4]), 0.05


def heavy_top() -> Problem:
    return dlt.heavy_top(), np.eye(3), np.array([0.3, 1.0, -0.4]), 0.05


def nonholonomic_particle(affine: bool = False) -> Problem:
    from chetaev.gni.testing import nonholonomic_particle as particle

    p = particle(affine=affine)
    return p.system, p.q0, p.v0, 0.05


def vertical_disc() -> Problem:
    from chetaev.nh_integrators.testing import disc_initial
    from chetaev.nh_integrators.testing import vertical_disc as disc

    g0, eta0 = disc_initial()
    return disc(), g0, eta0, 0.1


def sphere_pendulum() -> Problem:
    from chetaev.nh_integrators import spherical_pendulum as sp
    from chetaev.nh_integrators import tait_bryan

    return sp(), tait_bryan(0.0, np.pi / 3, 0.0), np.array([1 / 3, 0.0, 0.0]), 0.1


def rolling_ball() -> Problem:
    from chetaev.gni import BALL_EXPERIMENT_2 as exp
    from chetaev.gni import rolling_ball as ball

    kw = {k: exp[k] for k in ("inertia", "mass", "radius", "table_rate")}
    return ball(**kw), np.array(exp["x0"]), np.array(exp["v0"]), 0.1


def curvature_particle() -> Problem:
    from chetaev.dsocs import curvature_particle_dsocs

    h = 0.05
    # the system holds no step: the method discretizes at the h of each step; the curvature's
    # numba source gives it the compiled kernels (issue 17), checked against k when built
    dsocs = curvature_particle_dsocs(
        lambda q: 1.0 + 0.3 * q[..., 0], closed_form=False,
        curvature_kernel="def curvature(q):\n    return 1.0 + 0.3 * q[0]\n")
    return dsocs, np.array([0.0, 0.0]), np.array([1.0, 0.0]), h


# --- symbolic twins (issue 17) -----------------------------------------------------------------

def _vertical_disc_twin() -> Any:
    from chetaev.nh_integrators.testing import vertical_disc as disc

    return disc(symbolic=True)


def _particle_twin(affine: bool) -> Any:
    from chetaev.gni.testing import nonholonomic_particle as particle

    return particle(affine, symbolic=True).system


#: The symbolic twin of a problem's system: the same physics built by
#: ``chetaev.discrete_lagrangian.symbolic`` (exact derivatives and the kernels of the compiled
#: backend; needs sympy), from the packages' public testing functions. Keyed by the problem's
#: name (the function above; ``nonholonomic_particle_affine`` is ``nonholonomic_particle(
#: affine=True)``). ``test_compiled_protocol.py`` maps each registry pair to its twin and
#: checks each twin equal to the registry's hand-written system (``assert_systems_agree``).
SYMBOLIC_TWINS: dict[str, Callable[[], Any]] = {
    "pendulum_angle": lambda: dlt.pendulum_angle(symbolic=True),
    "spherical_pendulum": lambda: dlt.spherical_pendulum(symbolic=True),
    "free_rigid_body": lambda: dlt.free_rigid_body(symbolic=True),
    "heavy_top": lambda: dlt.heavy_top(symbolic=True),
    "nonholonomic_particle": lambda: _particle_twin(False),
    "nonholonomic_particle_affine": lambda: _particle_twin(True),
    "vertical_disc": _vertical_disc_twin,
    "sphere_pendulum": lambda: _sphere_pendulum_twin(),
}


def _sphere_pendulum_twin() -> Any:
    from chetaev.nh_integrators import spherical_pendulum as sp

    return sp(symbolic=True)


# --- the registry ------------------------------------------------------------------------------

def _gni(variant: str) -> Any:
    from chetaev.gni import GNI

    return GNI(variant)


def _nhprk(s: int, **kw: Any) -> Any:
    from chetaev.nh_integrators import NonholonomicPRK

    return NonholonomicPRK(lobatto_iiia_iiib(s), **kw)


def _lie_nhprk(s: int, retraction: str) -> Any:
    from chetaev.nh_integrators import LieNonholonomicPRK

    return LieNonholonomicPRK(lobatto_iiia_iiib(s), retraction=retraction)


def _reduced_gni() -> Any:
    from chetaev.gni import ReducedGNI

    return ReducedGNI()


def _gni_composition() -> Any:
    from chetaev.gni import GNI, Composition

    return Composition((GNI("euler_b"), GNI("euler_a")))


def _dsocs() -> Any:
    from chetaev.dsocs import DSOCSIntegrator

    return DSOCSIntegrator(start="second_order")


CASES: list[tuple[str, Callable[[], Any], Callable[[], Problem]]] = [
    ("DEL-midpoint", lambda: DiscreteEulerLagrange("midpoint"), pendulum_angle),
    ("VPRK-lobatto3", lambda: VPRK(lobatto_iiia_iiib(3)), pendulum_angle),
    ("VPRK-gauss2", lambda: VPRK(gauss(2)), pendulum_angle),
    ("ConstrainedPRK-2", lambda: ConstrainedPRK(lobatto_iiia_iiib(2)), spherical_pendulum),
    ("ConstrainedPRK-3", lambda: ConstrainedPRK(lobatto_iiia_iiib(3)), spherical_pendulum),
    ("dmap-euler-a", lambda: dm.DiscretizationMapMethod(0.0), spherical_pendulum),
    ("dmap-midpoint-nullspace", lambda: dm.DiscretizationMapMethod(0.5, nullspace=True),
     spherical_pendulum),
    ("dmap-rattle", dm.rattle, spherical_pendulum),
    ("dmap-euler-ba", dm.euler_ba, spherical_pendulum),
    ("dmap-triple-jump", lambda: dm.triple_jump(dm.rattle()), spherical_pendulum),
    ("dmap-baseline", dm.StageConstrainedBaseline, spherical_pendulum),
    ("dmap-extrinsic-euler-ba", dm.ExtrinsicEulerBA, spherical_pendulum),
    ("LieVPRK-cayley", lambda: LieVPRK(lobatto_iiia_iiib(2), retraction="cayley"),
     free_rigid_body),
    ("LieVPRK-exp", lambda: LieVPRK(lobatto_iiia_iiib(3), retraction="exp"), heavy_top),
    ("LieDmap-rattle", lambda: dm.LieDiscretizationMapMethod("rattle", retraction="exp"),
     heavy_top),
    ("NHPRK-3", lambda: _nhprk(3), nonholonomic_particle),
    ("NHPRK-3-hamiltonian", lambda: _nhprk(3, form="hamiltonian"), nonholonomic_particle),
    ("NHPRK-2-affine", lambda: _nhprk(2), lambda: nonholonomic_particle(affine=True)),
    ("LieNHPRK-3-cayley", lambda: _lie_nhprk(3, "cayley"), vertical_disc),
    ("LieNHPRK-2-exp-S2", lambda: _lie_nhprk(2, "exp"), sphere_pendulum),
    ("GNI-euler_a", lambda: _gni("euler_a"), nonholonomic_particle),
    ("GNI-euler_b", lambda: _gni("euler_b"), nonholonomic_particle),
    ("GNI-rattle", lambda: _gni("rattle"), nonholonomic_particle),
    ("GNI-midpoint-affine", lambda: _gni("midpoint"), lambda: nonholonomic_particle(True)),
    ("GNI-composition-BA", _gni_composition, nonholonomic_particle),
    ("ReducedGNI-ball", _reduced_gni, rolling_ball),
    ("DSOCS-particle", _dsocs, curvature_particle),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_initial_state_and_one_step(name: str, make_method, make_problem) -> None:
    method = make_method()
    system, q0, v0, h = make_problem()
    s0 = method.initial_state(system, q0, v0, t0=0.0)
    assert isinstance(s0, State) and s0.n == 0 and s0.t == 0.0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s0.t = 1.0  # type: ignore[misc]
    s1 = method.step(system, s0, h)
    assert isinstance(s1, State)
    assert s1.n == 1 and s1.t == pytest.approx(h, rel=1e-15)
    assert np.shape(s1.q) == np.shape(s0.q) and np.shape(s1.v) == np.shape(s0.v)
    for field in ("q", "v", "p", "lam"):
        value = getattr(s1, field)
        if value is not None:
            assert np.all(np.isfinite(value)), f"{name}: State.{field} is not finite"
    # The step moved the system.
    assert not np.allclose(s1.q, s0.q, rtol=0, atol=1e-14)


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_integrate_runs_the_method(name: str, make_method, make_problem) -> None:
    system, q0, v0, h = make_problem()
    sol = integrate(system, make_method(), q0, v0, h=h, n_steps=5)
    assert sol.success, sol.message
    assert sol.t.shape == (6,) and sol.q.shape == (6, *np.shape(q0))
    assert np.allclose(np.diff(sol.t), h, rtol=1e-12, atol=0)
    assert np.all(np.isfinite(sol.q)) and np.all(np.isfinite(sol.v))


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_bad_input_raises_value_error(name: str, make_method, make_problem) -> None:
    system, q0, v0, _ = make_problem()
    method = make_method()
    bad_q0 = np.array(q0, dtype=float)
    bad_q0.flat[0] = np.nan
    with pytest.raises(ValueError, match=r"(?i)finite|nan"):
        method.initial_state(system, bad_q0, v0)
    bad_v0 = np.concatenate([np.ravel(v0), [0.0]])
    with pytest.raises(ValueError, match=r"(?i)shape|length|dimension|size|expected"):
        method.initial_state(system, q0, bad_v0)


# --- one method base (issue 15) ----------------------------------------------------------------

def _all_method_classes() -> set[type]:
    """Every concrete public Method subclass defined in a chetaev package."""
    import importlib
    import inspect
    import sys

    for mod in ("chetaev.discrete_lagrangian", "chetaev.discrete_lagrangian.discretization_maps",
                "chetaev.nh_integrators", "chetaev.gni", "chetaev.dsocs"):
        importlib.import_module(mod)
    seen: set[type] = set()
    todo = [Method]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    # attrs' slotted classes replace the class they decorate; the replaced one stays in
    # __subclasses__ until collected: keep the class its module exports
    return {c for c in seen if c.__module__.startswith("chetaev.") and not inspect.isabstract(c)
            and not c.__name__.startswith("_")
            and getattr(sys.modules[c.__module__], c.__name__, None) is c}


def test_every_method_class_is_registered() -> None:
    registered = {type(make()) for _, make, _ in CASES}
    missing = _all_method_classes() - registered
    assert not missing, f"Method subclasses without a protocol case: {sorted(map(str, missing))}"


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_is_a_method_with_declared_attributes(name: str, make_method, make_problem) -> None:
    method = make_method()
    assert isinstance(method, Method)
    for attr in ("name", "order", "symmetric", "guarantees", "negative_steps", "check_step"):
        assert hasattr(type(method), attr) or attr in attrs.fields_dict(type(method)), attr
    assert isinstance(method.name, str) and method.name and method.name != "Method"
    assert method.order is None or (isinstance(method.order, int) and method.order >= 1)
    assert isinstance(method.symmetric, bool)
    assert isinstance(method.negative_steps, bool)


_BAD_H = [0.0, -0.0, np.nan, np.inf, -np.inf, "0.1", None, True, 1j, np.array([0.1, 0.1])]


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_one_step_size_rule(name: str, make_method, make_problem) -> None:
    """The same h rule and the same error class for every method (``Method.step``)."""
    method = make_method()
    system, q0, v0, h = make_problem()
    s0 = method.initial_state(system, q0, v0)
    for bad in _BAD_H:
        with pytest.raises(InputError, match=r"step size `h` must be") as info:
            method.step(system, s0, bad)
        assert type(info.value) is InputError, (name, bad, type(info.value))
    if method.negative_steps:
        back = method.step(system, s0, -h)
        assert back.n == 1 and back.t == -h
    else:
        with pytest.raises(InputError, match=r"`h` must be positive") as info:
            method.step(system, s0, -h)
        assert type(info.value) is InputError
    # the driver requires h > 0 for every method
    with pytest.raises(InputError, match=r"`h` must be"):
        integrate(system, method, q0, v0, h=-h, n_steps=1)


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_step_keeps_the_time_grid(name: str, make_method, make_problem) -> None:
    """``Method.step`` sets n + 1 and, on a state carrying the driver's grid, the exact grid
    time t_ref + (n − n_ref)·h (no accumulation); without a grid t + h."""
    method = make_method()
    system, q0, v0, h = make_problem()
    t0 = 0.3
    s = attrs.evolve(method.initial_state(system, q0, v0, t0=t0), grid=(t0, 0, h))
    for k in range(1, 4):
        s = method.step(system, s, h)
        assert s.n == k and s.t == t0 + k * h and s.grid == (t0, 0, h)
    free = method.step(system, method.initial_state(system, q0, v0, t0=t0), h)
    assert free.n == 1 and free.t == t0 + h and free.grid is None


def test_integrate_needs_a_method() -> None:
    class Duck:
        def initial_state(self, system, q0, v0, t0=0.0):  # pragma: no cover - never called
            return State(t=t0, q=q0, v=v0)

        def step(self, system, state, h):  # pragma: no cover - never called
            return state

    system, q0, v0, h = pendulum_angle()
    with pytest.raises(InputError, match=r"subclass Method"):
        integrate(system, Duck(), q0, v0, h=h, n_steps=1)
