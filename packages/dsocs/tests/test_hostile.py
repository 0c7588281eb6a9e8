"""Hostile input (issue 21) for chetaev.dsocs: each case raises a typed error
(DSOCSInputError / InputError, ValueErrors) whose message names the argument."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import VPRK, InputError, integrate
from chetaev.discrete_lagrangian.testing import spherical_pendulum
from chetaev.dsocs import (
    DSOCS,
    DSOCSIntegrator,
    KinematicConstraint,
    TwoPointLagrangian,
    VariationalConstraint,
    central_difference,
    curvature_particle_dsocs,
)
from chetaev.rktableaux import gauss

H = 0.05
DS = curvature_particle_dsocs(1.0, H)
Q0, V0 = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def _run(method=None, q0=Q0, v0=V0, system=DS, **kw):
    kw.setdefault("h", H)
    kw.setdefault("n_steps", 2)
    return integrate(system, DSOCSIntegrator() if method is None else method, q0, v0, **kw)


def _d1(q0, q1):
    return q0 - q1


def _d2(q0, q1):
    return q1 - q0


CASES = [
    ("integrator-start", lambda: DSOCSIntegrator(start="third_order"), r"start"),
    ("integrator-acceleration", lambda: DSOCSIntegrator(acceleration=3.0), r"acceleration"),
    ("q0-complex", lambda: _run(q0=Q0 + 0j), r"q0"),
    ("v0-complex", lambda: _run(v0=V0 + 1e-3j), r"v0"),
    ("q0-object", lambda: _run(q0=np.array([object(), 1.0])), r"q0"),
    ("q0-string", lambda: _run(q0="origin"), r"q0"),
    ("q0-nan", lambda: _run(q0=[np.nan, 0.0]), r"q0"),
    ("v0-wrong-length", lambda: _run(v0=[0.0, 1.0, 0.0]), r"v0"),
    ("batch-mismatch", lambda: _run(q0=np.tile(Q0, (3, 1)), v0=np.tile(V0, (4, 1))),
     r"batch shapes"),
    ("t0-nan", lambda: _run(t0=np.nan), r"t0"),
    ("h-not-the-dsocs-step", lambda: _run(h=2 * H), r"h = "),
    # a DSOCS without its own h runs with the step's h; the second-order start still needs a0
    ("dsocs-without-h-nor-a0",
     lambda: _run(system=DSOCS(TwoPointLagrangian(_d1, _d2), None, np.eye)),
     r"needs the initial acceleration"),
    ("step-negative-h",
     lambda: DSOCSIntegrator().step(DS, DSOCSIntegrator().initial_state(DS, Q0, V0), -H),
     r"`h` must be positive"),
    ("integrator-on-constrained-system", lambda: _run(system=spherical_pendulum()),
     r"DSOCSIntegrator integrates a chetaev.dsocs.DSOCS"),
    ("vprk-on-dsocs", lambda: _run(method=VPRK(gauss(2))), r"`method`.*cannot integrate"),
    ("step-q0-q1-batch", lambda: DS.step(np.zeros((3, 2)), np.zeros((4, 2))),
     r"batch shapes"),
    ("step-q1-length", lambda: DS.step(Q0, [1.0, 0.0, 0.0]), r"q1"),
    ("step-q0-inf", lambda: DS.step([np.inf, 0.0], Q0), r"q0"),
    ("central-difference-h-zero", lambda: central_difference(Q0, Q0, Q0, 0.0), r"h"),
    ("central-difference-shapes", lambda: central_difference(Q0, Q0, [1.0], H), r"q2"),
    ("dsocs-tol", lambda: DSOCS(TwoPointLagrangian(_d1, _d2), None, np.eye, tol=-1.0), r"tol"),
    ("dsocs-max_iter", lambda: DSOCS(TwoPointLagrangian(_d1, _d2), None, np.eye, max_iter=2.7),
     r"max_iter"),
    ("dsocs-h-complex", lambda: DSOCS(TwoPointLagrangian(_d1, _d2), None, np.eye, h=0.1j),
     r"h"),
    ("dsocs-lagrangian", lambda: DSOCS(3.0, None, np.eye), r"discrete_lagrangian"),
    ("dsocs-kinematic", lambda: DSOCS(TwoPointLagrangian(_d1, _d2), 3.0, np.eye),
     r"kinematic_constraint"),
    ("dsocs-variational", lambda: DSOCS(TwoPointLagrangian(_d1, _d2), None, 3.0),
     r"variational_constraint"),
    ("variational-both", lambda: VariationalConstraint(basis=np.eye, annihilator=np.eye),
     r"exactly one of basis"),
    ("kinematic-not-callable", lambda: KinematicConstraint(3.0), r"g must be a callable"),
]


@pytest.mark.parametrize(("call", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_raises_a_typed_error_naming_the_argument(call, match):
    with pytest.raises(InputError, match=match):
        call()
