"""Pickling (issue 21): methods (used or not), systems built from module-level functions,
states and trajectories round-trip through ``pickle`` and continue bit for bit; a system
built from lambdas raises a typed error that says why and what to do.

The nonholonomic PRK methods (chetaev.nh_integrators) are not in this table: their picklable
cache is another change of issue 21.
"""

import pickle

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    ConstrainedSystem,
    DiscreteEulerLagrange,
    HolonomicConstraint,
    LieVPRK,
    LinearVelocityConstraint,
    MechanicalSystem,
    TrivializedMechanicalSystem,
    UnpicklableError,
    integrate,
)
from chetaev.discrete_lagrangian import discretization_maps as dm
from chetaev.discrete_lagrangian.testing import spherical_pendulum
from chetaev.dsocs import DSOCS, DSOCSIntegrator, TwoPointLagrangian, VariationalConstraint
from chetaev.gni import GNI, ReducedGNI, rolling_ball
from chetaev.gni import Composition as GNIComposition
from chetaev.liegroups import SO3
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

# --- systems from module-level functions ---------------------------------------------------
_E3 = np.array([0.0, 0.0, 1.0])
_H = np.array([[1.0, 0.0, 0.1], [0.0, 1.0, 0.0], [0.1, 0.0, 0.5]])


def _gravity(q):
    return q @ _E3


def _gravity_grad(q):
    return np.broadcast_to(_E3, np.shape(q)).copy()


def _zero_hess(q):
    return np.zeros((*np.shape(q), 3))


def _sphere(q):
    return 0.5 * (np.sum(q * q, axis=-1, keepdims=True) - 1.0)


def _sphere_jac(q):
    return np.asarray(q)[..., None, :]


def _sphere_hess(q):
    return np.broadcast_to(np.eye(3), (*np.shape(q)[:-1], 1, 3, 3)).copy()


def _quad(q):
    return 0.5 * np.einsum("...i,ij,...j->...", q, _H, q)


def _quad_grad(q):
    return np.einsum("ij,...j->...i", _H, q)


def _quad_hess(q):
    return np.broadcast_to(_H, (*np.shape(q)[:-1], 3, 3)).copy()


def _mu(q):
    q = np.asarray(q)
    out = np.zeros((*q.shape[:-1], 1, 3))
    out[..., 0, 0] = -q[..., 1]
    out[..., 0, 2] = 1.0
    return out


def _dmu(q):
    out = np.zeros((*np.shape(q)[:-1], 1, 3, 3))
    out[..., 0, 0, 1] = -1.0
    return out


def _no_potential(R):
    return np.zeros(np.shape(R)[:-2])


def _no_potential_grad(R):
    return np.zeros((*np.shape(R)[:-2], 3))


def _no_potential_hess(R):
    return np.zeros((*np.shape(R)[:-2], 3, 3))


_HD = 0.1  # the DSOCS step: L_d = |q1 − q0|²/(2h) − h|q0|²/2 (a harmonic oscillator)


def _ld_d1(q0, q1):
    return -(q1 - q0) / _HD - _HD * q0


def _ld_d2(q0, q1):
    return (q1 - q0) / _HD


def _all_directions(q0, q1, q2):
    return np.broadcast_to(np.eye(2), (*np.shape(q1)[:-1], 2, 2)).copy()


def pendulum():
    return ConstrainedSystem(MechanicalSystem(np.eye(3), _gravity, _gravity_grad, _zero_hess),
                             HolonomicConstraint(_sphere, _sphere_jac, _sphere_hess, m=1))


def particle():
    return ConstrainedSystem(MechanicalSystem(np.diag([1.0, 2.0, 1.5]), _quad, _quad_grad,
                                              _quad_hess), LinearVelocityConstraint(_mu, dA=_dmu))


def rigid_body():
    return TrivializedMechanicalSystem(SO3, np.diag([1.0, 2.0, 3.0]), _no_potential,
                                       _no_potential_grad, _no_potential_hess)


def oscillator():
    # the pieces are made at _HD and the cases run at h = _HD (the method takes h from step;
    # DSOCS(..., h=...) is the deprecated compatibility keyword)
    return DSOCS(TwoPointLagrangian(_ld_d1, _ld_d2), None,
                 VariationalConstraint(basis=_all_directions, depends_on=()))


_PQ, _PV = np.array([np.sin(1.0), 0.0, -np.cos(1.0)]), np.array([0.0, 0.8, 0.0])
_NQ, _NV = np.array([0.5, 0.3, 0.0]), np.array([0.4, 0.1, 0.12])  # 0.12 = y·ẋ: consistent
_BALL = rolling_ball(table_rate=0.0)

CASES = [
    ("VPRK", lambda: pendulum().system, VPRK(gauss(2)), _PQ, _PV),
    ("DiscreteEulerLagrange", lambda: pendulum().system, DiscreteEulerLagrange(), _PQ, _PV),
    ("ConstrainedPRK-2", pendulum, ConstrainedPRK(lobatto_iiia_iiib(2)), _PQ, _PV),
    ("ConstrainedPRK-3", pendulum, ConstrainedPRK(lobatto_iiia_iiib(3)), _PQ, _PV),
    ("LieVPRK", rigid_body, LieVPRK(gauss(2)), np.eye(3), np.array([0.3, 1.0, 0.2])),
    ("dm-rattle", pendulum, dm.rattle(), _PQ, _PV),
    ("dm-euler-a-nullspace", pendulum, dm.DiscretizationMapMethod(0.0, nullspace=True),
     _PQ, _PV),
    ("dm-triple-jump", pendulum, dm.triple_jump(dm.rattle()), _PQ, _PV),
    ("dm-extrinsic", pendulum, dm.ExtrinsicEulerBA(), _PQ, _PV),
    ("dm-baseline", pendulum, dm.StageConstrainedBaseline(), _PQ, _PV),
    ("dm-lie-rattle", rigid_body, dm.LieDiscretizationMapMethod("rattle"), np.eye(3),
     np.array([0.3, 1.0, 0.2])),
    ("GNI-momentum", particle, GNI("rattle"), _NQ, _NV),
    ("GNI-two-step", particle, GNI("midpoint", form="two_step"), _NQ, _NV),
    ("GNI-composition", particle, GNIComposition((GNI("euler_b"), GNI("euler_a"))), _NQ, _NV),
    ("DSOCS", oscillator, DSOCSIntegrator(start="paper"), np.array([1.0, 0.0]),
     np.array([0.0, 1.0])),
]


@pytest.mark.parametrize(("make", "method", "q0", "v0"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_round_trip_continues_bit_for_bit(make, method, q0, v0):
    system = make()
    fresh = pickle.loads(pickle.dumps(method))  # unused method
    first = integrate(system, method, q0, v0, h=0.1, n_steps=4)
    assert first.success, first.message
    used = pickle.loads(pickle.dumps(method))  # used method (caches filled)
    system2 = pickle.loads(pickle.dumps(system))
    state2 = pickle.loads(pickle.dumps(first.final_state()))
    traj2 = pickle.loads(pickle.dumps(first))
    for name in ("t", "q", "v"):
        # bitwise by design: pickling floats is exact and the unpickled objects run the same
        # floating-point operations on the same inputs and batch size (measured max|diff| = 0,
        # threads 1 and unset)
        np.testing.assert_array_equal(getattr(traj2, name), getattr(first, name))
    ref = integrate(system, method, first.final_state(), None, h=0.1, n_steps=4)
    for m in (used, fresh):
        again = integrate(system2, m, state2, None, h=0.1, n_steps=4)
        for name in ("t", "q", "v", "p", "lam"):
            a, b = getattr(again, name), getattr(ref, name)
            assert (a is None) == (b is None)
            if a is not None:
                # bitwise by design: pickling floats is exact and the unpickled objects run the
                # same floating-point operations on the same inputs and batch size (measured
                # max|diff| = 0, threads 1 and unset)
                np.testing.assert_array_equal(a, b)


def test_reduced_gni_method_and_state_round_trip():
    """rolling_ball builds its callables inside a function, so only the method, the state and
    the trajectory's arrays travel; the continuation is bitwise identical."""
    method = ReducedGNI()
    x0, v0 = np.zeros(2), np.array([0.1, 0.2, 0.0, 0.0, 0.0])
    v0[2:] = np.linalg.lstsq(_BALL.K(x0)[..., 2:], -_BALL.K(x0)[..., :2] @ v0[:2], rcond=None)[0]
    first = integrate(_BALL, method, x0, v0, h=0.1, n_steps=3)
    assert first.success, first.message
    ref = integrate(_BALL, method, first.final_state(), None, h=0.1, n_steps=3)
    again = integrate(_BALL, pickle.loads(pickle.dumps(method)),
                      pickle.loads(pickle.dumps(first.final_state())), None, h=0.1, n_steps=3)
    # bitwise by design: pickling floats is exact and the unpickled objects run the same
    # floating-point operations on the same inputs and batch size (measured max|diff| = 0, threads
    # 1 and unset)
    np.testing.assert_array_equal(again.q, ref.q)
    np.testing.assert_array_equal(again.final_state().carry["g"], ref.final_state().carry["g"])


def test_system_from_lambdas_says_why_and_what_to_do():
    with pytest.raises(UnpicklableError, match=r"field `potential` holds .*lambda.*"
                       r"module-level functions.*cloudpickle") as info:
        pickle.dumps(spherical_pendulum())
    assert isinstance(info.value, ValueError) and isinstance(info.value, pickle.PicklingError)
    tr = integrate(spherical_pendulum(), dm.rattle(), _PQ, _PV, h=0.1, n_steps=2)
    with pytest.raises(UnpicklableError, match="MechanicalSystem"):
        pickle.dumps(tr)  # the trajectory holds the system


def test_cloudpickle_still_serializes_lambdas():
    cloudpickle = pytest.importorskip("cloudpickle")
    system = cloudpickle.loads(cloudpickle.dumps(spherical_pendulum()))
    a = integrate(system, dm.rattle(), _PQ, _PV, h=0.1, n_steps=3)
    b = integrate(spherical_pendulum(), dm.rattle(), _PQ, _PV, h=0.1, n_steps=3)
    # bitwise by design: pickling floats is exact and the unpickled objects run the same
    # floating-point operations on the same inputs and batch size (measured max|diff| = 0, threads
    # 1 and unset)
    np.testing.assert_array_equal(a.q, b.q)
