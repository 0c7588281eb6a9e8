"""chetaev.dsocs — discrete second-order constrained Lagrangian systems.

Borda, Fernández & Grillo, "Discrete second order constrained Lagrangian systems: first
results", J. Geom. Mech. 5 (2013) 381–397, arXiv:1312.1941. The method and the paper's
errata: the docs' theory page (docs/theory/dsocs.rst).
"""

from . import _wheel
from ._constraints import KinematicConstraint, VariationalConstraint
from ._continuous import SOCS
from ._dsocs import DSOCS, FlowConditions, TwoFormCheck, central_difference
from ._errors import DSOCSConvergenceError, DSOCSInputError
from ._integrator import DSOCSIntegrator
from ._lagrangian import TwoPointLagrangian
from ._particle import (
    curvature_particle_dsocs,
    curvature_particle_kernels,
    curvature_particle_solver,
    particle_closed_form_step,
    particle_discrete_circle,
    particle_exact_solution,
    particle_ode_rhs,
    particle_residual,
    particle_residual_jacobian,
)
from ._study import (
    ConvergenceStudy,
    convergence_study,
    iwp_reference,
    particle_trajectory,
)
from ._version import __version__ as __version__
from ._wheel import *  # noqa: F403  (the inertia wheel pendulum: names listed in _wheel.__all__)

__all__ = [
    "DSOCS",
    "SOCS",
    "ConvergenceStudy",
    "DSOCSConvergenceError",
    "DSOCSInputError",
    "DSOCSIntegrator",
    "FlowConditions",
    "KinematicConstraint",
    "TwoFormCheck",
    "TwoPointLagrangian",
    "VariationalConstraint",
    "central_difference",
    "convergence_study",
    "curvature_particle_dsocs",
    "curvature_particle_kernels",
    "curvature_particle_solver",
    "iwp_reference",
    "particle_closed_form_step",
    "particle_discrete_circle",
    "particle_exact_solution",
    "particle_ode_rhs",
    "particle_residual",
    "particle_residual_jacobian",
    "particle_trajectory",
]
__all__ += _wheel.__all__  # the inertia wheel pendulum (paper §4.2), listed once in _wheel
