"""chetaev.discrete_lagrangian: systems, solver, driver and variational integrators."""

from ._constraints import (
    ConstrainedSystem,
    HolonomicConstraint,
    LinearVelocityConstraint,
    VelocityConstraint,
)
from ._errors import (
    ConstraintViolationError,
    ConvergenceError,
    HypothesisError,
    InputError,
    SingularMatrixError,
)
from ._integrate import integrate
from ._reference import ReferenceSolution, reference_solution
from ._solver import NewtonOptions, NewtonResult, newton_solve
from ._state import State
from ._systems import (
    LagrangianSystem,
    MechanicalSystem,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
)
from ._trajectory import Trajectory

__all__ = [
    "ConstrainedSystem",
    "ConstraintViolationError",
    "ConvergenceError",
    "HolonomicConstraint",
    "HypothesisError",
    "InputError",
    "LagrangianSystem",
    "LinearVelocityConstraint",
    "MechanicalSystem",
    "NewtonOptions",
    "NewtonResult",
    "ReferenceSolution",
    "SingularMatrixError",
    "State",
    "Trajectory",
    "TrivializedLagrangianSystem",
    "TrivializedMechanicalSystem",
    "VelocityConstraint",
    "integrate",
    "newton_solve",
    "reference_solution",
]
