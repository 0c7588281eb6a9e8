"""chetaev.discrete_lagrangian: systems, solver, driver and variational integrators."""

from ._constrained_prk import ConstrainedPRK, HolonomicStageHooks
from ._constraints import (
    ConstrainedSystem,
    HolonomicConstraint,
    LinearVelocityConstraint,
    VelocityConstraint,
)
from ._del import DiscreteEulerLagrange, DiscreteLagrangian, lagrangian_two_form
from ._derivcheck import compare_derivative
from ._ensemble import (
    EnsembleResult,
    ObservableError,
    StoreMismatchError,
    integrate_ensemble,
    take_members,
)
from ._errors import (
    ConstraintViolationError,
    ConvergenceError,
    DerivativeError,
    HypothesisError,
    InputError,
    PostConditionError,
    SingularMatrixError,
    UnpicklableError,
)
from ._integrate import OVERFLOW_BOUND, POSTCONDITION_FACTOR, integrate
from ._interface import SystemInterface, interface_of
from ._lie_prk import LieStageEvaluation, lie_prk_residual, solve_lie_stages
from ._lie_vprk import LieHolonomicStageHooks, LieVPRK
from ._method import Method, check_step_size
from ._pickling import register_picklable
from ._prk import (
    PRKCoefficients,
    StageEvaluation,
    StageHooks,
    StepSolution,
    coefficients_from,
    prk_residual,
    solve_stages,
)
from ._reference import ReferenceSolution, reference_solution
from ._solver import NewtonOptions, NewtonResult, deflated, newton_solve, raise_unless_converged
from ._state import State
from ._systems import (
    LagrangianSystem,
    MechanicalSystem,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
)
from ._trajectory import Trajectory
from ._version import __version__ as __version__
from ._vprk import VPRK

__all__ = [
    "OVERFLOW_BOUND",
    "POSTCONDITION_FACTOR",
    "VPRK",
    "ConstrainedPRK",
    "ConstrainedSystem",
    "ConstraintViolationError",
    "ConvergenceError",
    "DerivativeError",
    "DiscreteEulerLagrange",
    "DiscreteLagrangian",
    "EnsembleResult",
    "HolonomicConstraint",
    "HolonomicStageHooks",
    "HypothesisError",
    "InputError",
    "LagrangianSystem",
    "LieHolonomicStageHooks",
    "LieStageEvaluation",
    "LieVPRK",
    "LinearVelocityConstraint",
    "MechanicalSystem",
    "Method",
    "NewtonOptions",
    "NewtonResult",
    "ObservableError",
    "PRKCoefficients",
    "PostConditionError",
    "ReferenceSolution",
    "SingularMatrixError",
    "StageEvaluation",
    "StageHooks",
    "State",
    "StepSolution",
    "StoreMismatchError",
    "SystemInterface",
    "Trajectory",
    "TrivializedLagrangianSystem",
    "TrivializedMechanicalSystem",
    "UnpicklableError",
    "VelocityConstraint",
    "check_step_size",
    "coefficients_from",
    "compare_derivative",
    "deflated",
    "integrate",
    "integrate_ensemble",
    "interface_of",
    "lagrangian_two_form",
    "lie_prk_residual",
    "newton_solve",
    "prk_residual",
    "raise_unless_converged",
    "reference_solution",
    "register_picklable",
    "solve_lie_stages",
    "solve_stages",
    "take_members",
]
