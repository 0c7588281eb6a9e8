"""Hostile input to every system / constraint constructor and user callable (issue 21).

Each case calls a public entry point (a constructor, ``integrate``, ``reference_solution``)
with one bad piece and must raise a ``ValueError`` subclass (``InputError``,
``SingularMatrixError``, ...) whose message names the argument. :func:`verdict` sorts an
outcome as issue 21 does: GOOD (typed error naming the argument), POOR (another exception,
or a message that does not name it), BAD (no error: a silent result).

Documented conversions (not errors): integer ``q0``/``v0`` are converted to float64;
complex, boolean, string and non-numeric object arrays are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    ConstrainedSystem,
    HolonomicConstraint,
    InputError,
    LagrangianSystem,
    LieVPRK,
    LinearVelocityConstraint,
    MechanicalSystem,
    SingularMatrixError,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
    VelocityConstraint,
    integrate,
    reference_solution,
)
from chetaev.liegroups import SO3
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

Q0 = np.array([0.3, 0.2])
V0 = np.array([0.1, -0.2])
Q3 = np.array([0.6, 0.0, 0.8])  # on the unit sphere
V3 = np.array([0.0, 0.5, 0.0])  # tangent to it


def _eye_mass(q):
    return np.broadcast_to(np.eye(2), (*np.shape(q)[:-1], 2, 2))


def _const_mass(M):
    M = np.asarray(M, dtype=float)
    return lambda q: np.broadcast_to(M, (*np.shape(q)[:-1], *M.shape))


def _V(q):
    return 0.5 * np.sum(q * q, axis=-1)


def _gradV(q):
    return 1.0 * q


def mech(mass=None, V=_V, gradV=_gradV, hessV=None, mass_grad=None, **kw):
    mass = np.eye(2) if mass is None else mass
    return MechanicalSystem(mass, V, gradV, hessV, mass_grad, **kw)


def run(system, q0=Q0, v0=V0, h=0.1):
    return integrate(system, VPRK(gauss(1)), q0, v0, h=h, n_steps=3)


def run_lie(system, q0=None, v0=None):
    q0 = SO3.exp(np.array([0.3, -0.2, 0.5])) if q0 is None else q0
    v0 = np.array([0.1, 0.2, 0.3]) if v0 is None else v0
    return integrate(system, LieVPRK(gauss(1)), q0, v0, h=0.1, n_steps=2)


def run_holonomic(constraint):
    s = ConstrainedSystem(MechanicalSystem(np.eye(3), lambda q: q[..., 2],
                                           lambda q: np.broadcast_to([0.0, 0.0, 1.0], q.shape)),
                          constraint)
    return integrate(s, ConstrainedPRK(lobatto_iiia_iiib(2)), Q3, V3, h=0.1, n_steps=2)


def run_velocity(constraint, q0=Q3, v0=None):
    s = ConstrainedSystem(MechanicalSystem(np.eye(3), lambda q: 0 * q[..., 0],
                                           lambda q: 0 * q), constraint)
    v0 = np.array([0.8 * 0.5, 0.5, 0.0]) if v0 is None else v0  # Φ = v0 − q2·v1 = 0
    return reference_solution(s, q0, v0, [0.0, 0.1])


def _sphere_phi(q):
    return 0.5 * (np.sum(q * q, axis=-1, keepdims=True) - 1.0)


def _sphere_jac(q):
    return np.asarray(q)[..., None, :]


def _row_A(q):  # Φ = v0 − q2·v1 (m = 1)
    return np.stack([np.ones_like(q[..., 0]), -q[..., 2], 0 * q[..., 0]], -1)[..., None, :]


def _top():
    return TrivializedMechanicalSystem(SO3, np.diag([1.0, 2.0, 3.0]),
                                       lambda g: np.asarray(g)[..., 2, 2],
                                       lambda g: np.stack([np.asarray(g)[..., 2, 1],
                                                           -np.asarray(g)[..., 2, 0],
                                                           0 * np.asarray(g)[..., 2, 0]], -1))


def _lag(L=None, dq=None, dv=None, dvv=None, dvq=None, dqq=None):
    L = L or (lambda q, v: 0.5 * np.sum(v * v, -1) - 0.5 * np.sum(q * q, -1))
    dq = dq or (lambda q, v: -1.0 * q + 0 * v)
    dv = dv or (lambda q, v: 1.0 * v + 0 * q)
    return LagrangianSystem(2, L, dq, dv, dvv, dvq, dqq)


def _bad_shape(shape):
    return lambda *a: np.zeros((*np.shape(a[0])[:-1], *shape))


class Case(NamedTuple):
    name: str
    arg: str  # must appear in the message
    run: Callable[[], object]


G0 = SO3.exp(np.array([0.3, -0.2, 0.5]))

CASES = [
    # --- MechanicalSystem: mass -----------------------------------------------------------
    Case("mass callable not symmetric", "mass",
         lambda: run(mech(mass=_const_mass([[1.0, 0.5], [0.0, 1.0]]), n=2))),
    Case("mass callable singular", "mass",
         lambda: run(mech(mass=_const_mass([[1, 1], [1, 1]]), n=2))),
    Case("mass callable indefinite", "mass",
         lambda: run(mech(mass=_const_mass(np.diag([1, -1])), n=2))),
    Case("mass callable wrong shape", "mass", lambda: run(mech(mass=_const_mass(np.eye(3)), n=2))),
    Case("mass callable NaN", "mass",
         lambda: run(mech(mass=_const_mass([[np.nan, 0], [0, 1]]), n=2))),
    Case("mass constant complex", "mass", lambda: mech(mass=np.eye(2) * (1 + 0j))),
    Case("mass constant singular", "mass", lambda: mech(mass=np.diag([1.0, 0.0]))),
    Case("mass constant not symmetric", "mass", lambda: mech(mass=[[1.0, 0.5], [0.0, 1.0]])),
    Case("mass_grad wrong shape", "mass_grad",
         lambda: run(mech(mass=_eye_mass, mass_grad=_bad_shape((2, 2)), n=2))),
    Case("mass callable, q0 wrong length", "v0", lambda: run(mech(mass=_eye_mass),
                                                             q0=np.zeros(3))),
    # --- MechanicalSystem: potential --------------------------------------------------------
    Case("potential_grad returns a scalar", "potential_grad",
         lambda: run(mech(gradV=lambda q: np.sum(q, axis=-1)))),
    Case("potential_grad wrong length", "potential_grad",
         lambda: run(mech(gradV=_bad_shape((3,))))),
    Case("potential returns a vector", "potential", lambda: run(mech(V=lambda q: 1.0 * q))),
    Case("potential_hess wrong shape", "potential_hess", lambda: run(mech(hessV=_bad_shape((2,))))),
    Case("potential_grad NaN", "potential_grad", lambda: run(mech(gradV=lambda q: q * np.nan))),
    Case("potential_grad not broadcasting", "potential_grad",
         lambda: run(mech(gradV=lambda q: np.array([q[0], q[1]])))),
    Case("potential not callable", "potential", lambda: mech(V=3.0)),
    # --- initial data ---------------------------------------------------------------------
    Case("q0 complex", "q0", lambda: run(mech(), q0=Q0 + 1j)),
    Case("q0 complex with zero imaginary part", "q0", lambda: run(mech(), q0=Q0 + 0j)),
    Case("v0 complex", "v0", lambda: run(mech(), v0=V0 * (1 + 1j))),
    Case("q0 strings", "q0", lambda: run(mech(), q0=np.array(["a", "b"], dtype=object))),
    Case("q0 numeric strings", "q0", lambda: run(mech(), q0=np.array(["0.3", "0.2"]))),
    Case("q0 booleans", "q0", lambda: run(mech(), q0=np.array([True, False]))),
    Case("q0 NaN", "q0", lambda: run(mech(), q0=np.array([np.nan, 0.0]))),
    Case("q0 wrong length", "q0", lambda: run(mech(), q0=np.zeros(3))),
    Case("q0/v0 batches do not broadcast", "v0",
         lambda: run(mech(), q0=np.zeros((3, 2)), v0=np.zeros((2, 2)))),
    Case("h complex", "h", lambda: run(mech(), h=0.1 + 0j)),
    Case("n not an integer", "n", lambda: mech(mass=_eye_mass, n=2.5)),
    # --- LagrangianSystem -------------------------------------------------------------------
    Case("lagrangian returns a vector", "lagrangian",
         lambda: run(_lag(L=lambda q, v: 1.0 * q + v))),
    Case("dL_dv wrong shape", "dL_dv", lambda: run(_lag(dv=_bad_shape((3,))))),
    Case("dL_dq returns a scalar", "dL_dq", lambda: run(_lag(dq=lambda q, v: np.sum(q, -1)))),
    Case("d2L_dvdq wrong shape", "d2L_dvdq", lambda: run(_lag(dvq=_bad_shape((2, 3))))),
    Case("degenerate Lagrangian", "d2L_dv2",
         lambda: run(_lag(L=lambda q, v: 0.5 * v[..., 0] ** 2,
                          dq=lambda q, v: 0 * q + 0 * v,
                          dv=lambda q, v: np.stack([v[..., 0], 0 * v[..., 1]], -1)))),
    Case("n zero", "n", lambda: LagrangianSystem(0, _V, _gradV, _gradV)),
    # --- group systems ----------------------------------------------------------------------
    Case("group potential_grad scalar", "potential_grad",
         lambda: run_lie(TrivializedMechanicalSystem(SO3, np.eye(3), lambda g: g[..., 2, 2],
                                                     lambda g: g[..., 2, 1]))),
    Case("inertia complex", "inertia",
         lambda: TrivializedMechanicalSystem(SO3, np.eye(3) * (1 + 1j), _V, _gradV)),
    Case("inertia not symmetric", "inertia",
         lambda: TrivializedMechanicalSystem(SO3, np.triu(np.ones((3, 3))), _V, _gradV)),
    Case("q0 not a group element", "q0", lambda: run_lie(_top(), q0=2 * G0)),
    Case("q0 group element complex", "q0", lambda: run_lie(_top(), q0=G0 + 0j)),
    Case("eta0 complex", "v0", lambda: run_lie(_top(), v0=np.zeros(3) + 1j)),
    Case("dl_deta wrong shape", "dl_deta",
         lambda: run_lie(TrivializedLagrangianSystem(
             SO3, lambda g, e: 0.5 * np.sum(e * e, -1), lambda g, e: 0 * e,
             _bad_shape((2,))))),
    # --- HolonomicConstraint ----------------------------------------------------------------
    Case("phi returns a scalar", "phi",
         lambda: run_holonomic(HolonomicConstraint(lambda q: _sphere_phi(q)[..., 0],
                                                   _sphere_jac))),
    Case("jacobian wrong shape", "jacobian",
         lambda: run_holonomic(HolonomicConstraint(_sphere_phi, _bad_shape((1, 4))))),
    Case("hessian wrong shape", "hessian",
         lambda: run_holonomic(HolonomicConstraint(_sphere_phi, _sphere_jac,
                                                   _bad_shape((1, 3))))),
    Case("jacobian not broadcasting", "jacobian",
         lambda: run_holonomic(HolonomicConstraint(_sphere_phi, lambda q: np.array([q])))),
    Case("phi not callable", "phi", lambda: HolonomicConstraint(1.0, _sphere_jac)),
    # --- LinearVelocityConstraint -----------------------------------------------------------
    Case("A wrong shape", "A", lambda: run_velocity(LinearVelocityConstraint(_bad_shape((1, 4))))),
    Case("A constant 3-d", "A", lambda: LinearVelocityConstraint(np.zeros((1, 3, 3)))),
    Case("A constant complex", "A", lambda: LinearVelocityConstraint(np.ones((1, 3)) * 1j)),
    Case("A constant NaN", "A", lambda: LinearVelocityConstraint(np.full((1, 3), np.nan))),
    Case("a wrong shape", "a",
         lambda: run_velocity(LinearVelocityConstraint(_row_A, a=_bad_shape((2,))))),
    Case("dA wrong shape", "dA",
         lambda: run_velocity(LinearVelocityConstraint(_row_A, dA=_bad_shape((1, 3))))),
    Case("A not broadcasting", "A",
         lambda: run_velocity(LinearVelocityConstraint(
             lambda q: np.array([[1.0, -q[2], 0.0]])))),
    # --- VelocityConstraint -------------------------------------------------------------------
    Case("dphi_dv wrong shape", "dphi_dv",
         lambda: run_velocity(VelocityConstraint(
             lambda q, v: (v[..., 0] - q[..., 2] * v[..., 1])[..., None],
             lambda q, v: np.zeros((*np.shape(v)[:-1], 1, 3)), _bad_shape((3,))))),
    Case("phi NaN", "phi",
         lambda: run_velocity(VelocityConstraint(
             lambda q, v: np.full((*np.shape(v)[:-1], 1), np.nan),
             lambda q, v: np.zeros((*np.shape(v)[:-1], 1, 3)),
             lambda q, v: np.zeros((*np.shape(v)[:-1], 1, 3))))),
    # --- ConstrainedSystem ---------------------------------------------------------------------
    Case("system not a system", "system",
         lambda: ConstrainedSystem(object(), HolonomicConstraint(_sphere_phi, _sphere_jac))),
    Case("constraint not a constraint", "constraint",
         lambda: ConstrainedSystem(mech(), object())),
]


def verdict(case: Case) -> tuple[str, str]:
    """GOOD / POOR / BAD as in issue 21, with the message."""
    try:
        case.run()
    except ValueError as exc:
        msg = str(exc)
        return ("GOOD" if case.arg in msg else "POOR"), f"{type(exc).__name__}: {msg}"
    except Exception as exc:
        return "POOR", f"{type(exc).__name__}: {exc}"
    return "BAD", "no error"


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_gets_a_typed_error_naming_the_argument(case):
    verdict_, msg = verdict(case)
    assert verdict_ == "GOOD", msg
    with pytest.raises(InputError):  # the package's own ValueError subclass
        case.run()


def test_singular_and_indefinite_mass_are_singular_matrix_errors():
    for M in ([[1, 1], [1, 1]], np.diag([1, -1])):
        with pytest.raises(SingularMatrixError, match="positive definite"):
            run(mech(mass=_const_mass(M)))


def test_integer_initial_data_are_converted():
    a = run(mech(), q0=np.array([1, 0]), v0=np.array([0, 1]))
    b = run(mech(), q0=np.array([1.0, 0.0]), v0=np.array([0.0, 1.0]))
    # bitwise by design: the ints are converted exactly to float64 at the input, after which
    # both runs are the same sequence of operations on the same values
    np.testing.assert_array_equal(a.q, b.q)
    assert a.q.dtype == np.float64


if __name__ == "__main__":  # GOOD/POOR/BAD counts (run against any checkout)
    import collections
    import warnings

    warnings.simplefilter("ignore")
    counts = collections.Counter()
    for c in CASES:
        v, m = verdict(c)
        counts[v] += 1
        print(f"{v:5s} {c.name:45s} {m[:110]}")
    print(dict(counts))
