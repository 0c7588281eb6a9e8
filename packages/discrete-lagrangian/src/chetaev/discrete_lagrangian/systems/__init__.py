"""Continuous systems and constraints (public module; code in ``_systems``, ``_constraints``)."""

from ._constraints import (
    ConstrainedSystem,
    HolonomicConstraint,
    LinearVelocityConstraint,
    VelocityConstraint,
)
from ._systems import (
    LagrangianSystem,
    MechanicalSystem,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
    coadjoint,
)

__all__ = [
    "ConstrainedSystem",
    "HolonomicConstraint",
    "LagrangianSystem",
    "LinearVelocityConstraint",
    "MechanicalSystem",
    "TrivializedLagrangianSystem",
    "TrivializedMechanicalSystem",
    "VelocityConstraint",
    "coadjoint",
]
