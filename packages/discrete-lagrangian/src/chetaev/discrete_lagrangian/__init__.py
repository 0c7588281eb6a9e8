"""chetaev.discrete_lagrangian: systems, solver, driver and variational integrators."""

from ._util._errors import (
    ConstraintViolationError,
    ConvergenceError,
    DerivativeError,
    HypothesisError,
    InputError,
    PostConditionError,
    SingularMatrixError,
    UnpicklableError,
)
from ._version import __version__ as __version__
from .core._backend import BackendError
from .core._interface import SystemInterface, interface_of
from .core._lie_prk import (
    LieStageEvaluation,
    lie_prk_residual,
    lie_stage_jacobian,
    solve_lie_stages,
)
from .core._linearization import LinearizationNotSupportedError, StepLinearization
from .core._method import ForcesNotSupportedError, Method, check_step_size
from .core._prk import (
    PRKCoefficients,
    PRKStep,
    StageEvaluation,
    StageHooks,
    StepSolution,
    coefficients_from,
    prk_constants,
    prk_residual,
    solve_stages,
)
from .core._solver import (
    NewtonOptions,
    NewtonResult,
    deflated,
    newton_solve,
    raise_unless_converged,
)
from .core._state import State
from .driver._ensemble import (
    EnsembleResult,
    ObservableError,
    StoreMismatchError,
    integrate_ensemble,
    take_members,
)
from .driver._integrate import OVERFLOW_BOUND, POSTCONDITION_FACTOR, integrate
from .driver._reference import ReferenceSolution, reference_solution
from .driver._trajectory import Trajectory
from .methods._constrained_prk import ConstrainedPRK, HolonomicStageHooks
from .methods._del import DiscreteEulerLagrange, DiscreteLagrangian, lagrangian_two_form
from .methods._lie_vprk import LieHolonomicStageHooks, LieVPRK
from .methods._vprk import VPRK
from .systems import (  # the system classes: the public module `systems` lists them once
    ConstrainedSystem,
    HolonomicConstraint,
    LagrangianSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
    VelocityConstraint,
)
from .systems._derivcheck import compare_derivative
from .systems._pickling import register_picklable

__all__ = [
    "OVERFLOW_BOUND",
    "POSTCONDITION_FACTOR",
    "VPRK",
    "BackendError",
    "ConstrainedPRK",
    "ConstrainedSystem",
    "ConstraintViolationError",
    "ConvergenceError",
    "DerivativeError",
    "DiscreteEulerLagrange",
    "DiscreteLagrangian",
    "EnsembleResult",
    "ForcesNotSupportedError",
    "HolonomicConstraint",
    "HolonomicStageHooks",
    "HypothesisError",
    "InputError",
    "LagrangianSystem",
    "LieHolonomicStageHooks",
    "LieStageEvaluation",
    "LieVPRK",
    "LinearVelocityConstraint",
    "LinearizationNotSupportedError",
    "MechanicalSystem",
    "Method",
    "NewtonOptions",
    "NewtonResult",
    "ObservableError",
    "PRKCoefficients",
    "PRKStep",
    "PostConditionError",
    "ReferenceSolution",
    "SingularMatrixError",
    "StageEvaluation",
    "StageHooks",
    "State",
    "StepLinearization",
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
    "lie_stage_jacobian",
    "newton_solve",
    "prk_constants",
    "prk_residual",
    "raise_unless_converged",
    "reference_solution",
    "register_picklable",
    "solve_lie_stages",
    "solve_stages",
    "take_members",
]
