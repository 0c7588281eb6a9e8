"""One compiled Newton driver (issue 15: no Newton iteration loop outside the root finder).

Every compiled engine (the PRK engine with its plain, holonomic and nonholonomic hooks in
both unknowns, the Lie engine plain and nonholonomic, the GNI in both forms, the reduced
GNI on the rolling ball with both retractions, the discretization maps' node step in both
forms, the extrinsic joint solve, the Lie discretization maps' step: RATTLE's joint solve
and lobatto2's two half-step solves through one ``_ldm_solve``, and the DSOCS solve of
eq. (4)) builds its
module from the one ``NEWTON`` piece of ``chetaev.discrete_lagrangian.extending``: the
generated source holds exactly one ``while`` loop, in ``_newton``, and every step reaches it.
The sources are built and parsed, not compiled: these tests need sympy, not numba.
"""

from __future__ import annotations

import ast

import pytest

sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import VPRK, ConstrainedPRK, LieVPRK  # noqa: E402
from chetaev.discrete_lagrangian import discretization_maps as dm  # noqa: E402
from chetaev.discrete_lagrangian import testing as dlt  # noqa: E402
from chetaev.discrete_lagrangian.extending import (  # noqa: E402
    INLINE_LINES,
    inline_small,
    interface_of,
)
from chetaev.discrete_lagrangian.symbolic import from_lagrangian  # noqa: E402
from chetaev.dsocs import DSOCSIntegrator, curvature_particle_dsocs  # noqa: E402
from chetaev.gni import GNI, ReducedGNI, rolling_ball  # noqa: E402
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK  # noqa: E402
from chetaev.nh_integrators import testing as nht  # noqa: E402
from chetaev.rktableaux import lobatto_iiia_iiib  # noqa: E402

LOOP = "while it < max_iter"


def _symbols():
    return sp.symbols("x y z v_x v_y v_z")


def _particle():
    """The nonholonomic particle of ``chetaev.gni.testing`` from its Lagrangian."""
    x, y, z, vx, vy, vz = _symbols()
    T = (vx**2 + 2 * vy**2 + sp.Rational(3, 2) * vz**2) / 2
    V = x**2 / 2 + y**2 / 2 + z**2 / 4 + sp.Rational(1, 10) * x * z
    return from_lagrangian(T - V, [x, y, z], [vx, vy, vz], nonholonomic=[vz - y * vx])


def _sphere():
    x, y, z, vx, vy, vz = _symbols()
    L = (vx**2 + vy**2 + vz**2) / 2 - z
    return from_lagrangian(L, [x, y, z], [vx, vy, vz], holonomic=[(x**2 + y**2 + z**2 - 1) / 2])


def _oscillator():
    x, y, _z, vx, vy, _vz = _symbols()
    return from_lagrangian((vx**2 + vy**2) / 2 - (x**2 + y**2 + x**4) / 2, [x, y], [vx, vy])


def _curvature_particle():
    """The registry's curvature particle (§4.1.2) with its compiled kernels."""
    return curvature_particle_dsocs(lambda q: 1.0 + 0.3 * q[..., 0], closed_form=False,
                                    curvature_kernel="def curvature(q):\n"
                                    "    return 1.0 + 0.3 * q[0]\n")


def _cases():
    pair = lobatto_iiia_iiib(3)
    return {
        "VPRK": (VPRK(pair), _oscillator),
        "ConstrainedPRK": (ConstrainedPRK(pair), _sphere),
        "NonholonomicPRK": (NonholonomicPRK(pair), _particle),
        "NonholonomicPRK hamiltonian": (
            NonholonomicPRK(pair, form="hamiltonian"), _particle),
        "LieVPRK": (LieVPRK(pair), lambda: dlt.heavy_top(symbolic=True)),
        "LieNonholonomicPRK": (LieNonholonomicPRK(3),
                               lambda: nht.turntable_ball(symbolic=True)),
        "GNI": (GNI("rattle"), _particle),
        "GNI two_step": (GNI("rattle", form="two_step"), _particle),
        "ReducedGNI": (ReducedGNI(), lambda: rolling_ball(table_rate=0.2)),
        "ReducedGNI exp": (ReducedGNI("exp"), lambda: rolling_ball(table_rate=0.2)),
        "DiscretizationMapMethod": (dm.DiscretizationMapMethod(0.5), _sphere),
        "DiscretizationMapMethod nullspace": (
            dm.DiscretizationMapMethod(0.0, nullspace=True), _sphere),
        "Rattle": (dm.Rattle(), _sphere),
        "ExtrinsicEulerBA": (dm.ExtrinsicEulerBA(), _sphere),
        "DSOCSIntegrator": (DSOCSIntegrator(), _curvature_particle),
        "LieDiscretizationMapMethod rattle": (
            dm.LieDiscretizationMapMethod("rattle", retraction="exp"),
            lambda: dlt.heavy_top(symbolic=True)),
        "LieDiscretizationMapMethod lobatto2": (
            dm.LieDiscretizationMapMethod("lobatto2"), lambda: dlt.heavy_top(symbolic=True)),
    }


def _source(name: str) -> str:
    method, system = _cases()[name]
    system = system()
    # a method on systems outside the system interface reads them through its own
    # _backend_interface (ReducedGNI)
    iface = getattr(method, "_backend_interface", interface_of)(system)
    why, plan = method._compiled_plan(system, iface)
    assert why == "", why
    return plan.source


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef)}


def _calls(fn: ast.FunctionDef) -> set[str]:
    return {node.func.id for node in ast.walk(fn)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def _reaches(funcs: dict, start: str, target: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name == target:
            return True
        if name in seen or name not in funcs:
            continue
        seen.add(name)
        todo.extend(_calls(funcs[name]))
    return False


@pytest.mark.parametrize("name", list(_cases()))
def test_one_newton_loop_per_engine(name):
    source = _source(name)
    assert source.count(LOOP) == 1
    funcs = _functions(source)
    loops = sorted(fn.name for fn in funcs.values()
                   if any(isinstance(n, ast.While) for n in ast.walk(fn)))
    assert loops == ["_newton"]
    run = "_lie_run_one" if name.startswith("Lie") else "_run_one"
    assert _reaches(funcs, run, "_newton")
    # the driver evaluates through the engine's own _eval and _scale
    assert {"_eval", "_scale"} <= _calls(funcs["_newton"])


@pytest.mark.parametrize("name", ["GNI", "GNI two_step"])
def test_gni_step_runs_the_one_driver(name):
    """Both forms of the GNI step solve through one setup (_gni_solve) calling _newton
    once, with _eval selecting the form; no other Newton rule is left in the module."""
    funcs = _functions(_source(name))
    callers = sorted(f.name for f in funcs.values() if "_newton" in _calls(f))
    assert callers == ["_gni_solve"]
    solve_calls = [n for n in ast.walk(funcs["_run_one"])
                   if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_gni_solve"]
    # the momentum form's solve and the local form's solve, first argument the form
    assert sorted(ast.literal_eval(c.args[0]) for c in solve_calls) == [False, True]
    assert not any(n.startswith("_gni_newton") or (n.endswith("_eval") and n != "_eval")
                   for n in funcs)


def test_inline_small_marks_selectively():
    """The PRK engine inlines its functions of at most INLINE_LINES lines (the evaluation
    among them), not the step loop; the Lie engine and the GNIs only _eval and _newton."""
    prk = _functions(_source("NonholonomicPRK"))

    def inlined(fn):
        return any(isinstance(d, ast.Call) and any(k.arg == "inline" for k in d.keywords)
                   for d in fn.decorator_list)

    for name, fn in prk.items():
        lines = fn.end_lineno - fn.lineno + 1
        if name in ("run_serial", "run_parallel"):
            continue
        assert inlined(fn) == (lines <= INLINE_LINES), name
    assert inlined(prk["_eval"]) and inlined(prk["_maxabs"])
    assert not inlined(prk["_run_one"])
    for case in ("LieVPRK", "LieNonholonomicPRK", "GNI", "ReducedGNI", "Rattle",
                 "DSOCSIntegrator", "LieDiscretizationMapMethod rattle"):
        marked = sorted(n for n, fn in _functions(_source(case)).items() if inlined(fn))
        assert marked == ["_eval", "_newton"], case
    src = "@njit(cache=True)\ndef f(x):\n    return x\n\n\n@njit(cache=True)\ndef g(x):\n" + (
        "    x += 1\n" * INLINE_LINES) + "    return x\n"
    out = inline_small(src)
    assert out.count("inline='always'") == 1 and "inline='always')\ndef f(" in out
    assert inline_small(src, names=("g",)).count("inline='always')\ndef g(") == 1
