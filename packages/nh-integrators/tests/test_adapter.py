"""The stage model asks the constraint whether it is linear in v (issue 15), not its class."""

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    VelocityConstraint,
)
from chetaev.nh_integrators._adapter import stage_model
from chetaev.nh_integrators.testing import particle_system


def test_constraint_classes_declare_linearity_in_velocity():
    assert LinearVelocityConstraint.is_linear_in_velocity is True
    assert VelocityConstraint.is_linear_in_velocity is False


def test_a_renamed_linear_constraint_keeps_the_linear_path():
    base = particle_system()

    class Renamed(LinearVelocityConstraint):  # the old class-name test missed subclasses
        pass

    con = base.constraint
    sub = Renamed(con.A, con.a, con.dA, con.da)
    model = stage_model(ConstrainedSystem(base.system, sub))
    assert model.A is not None and model.phi_v_lam_v is None
    q = np.array([0.3, -0.2, 0.1])
    assert np.array_equal(model.A(q), con.matrix(q))
