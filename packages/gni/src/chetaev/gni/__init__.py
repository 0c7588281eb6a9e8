"""chetaev.gni — the Geometric Nonholonomic Integrator with affine and reduced variants."""

from ._ball import BALL_EXPERIMENT_1, BALL_EXPERIMENT_2, ball_exact_homogeneous, rolling_ball
from ._composition import Composition
from ._discrete_lagrangians import AlphaDiscreteLagrangian, MidpointDiscreteLagrangian
from ._gni import GNI, VARIANTS, euler_alpha_ptilde_step
from ._reduced import ReducedGNI, ReducedSystem, reduced_gni_residual, reduced_rattle_37
from ._reflection import (
    average_momentum_residual,
    constraint_gram,
    multiplier_from_post_momentum,
    node_from_post_momentum,
    pre_post_from_node,
    projector_P,
    projector_Q,
    reflect,
    reflection_isometry_residual,
)
from ._version import __version__ as __version__

__all__ = [
    "BALL_EXPERIMENT_1",
    "BALL_EXPERIMENT_2",
    "GNI",
    "VARIANTS",
    "AlphaDiscreteLagrangian",
    "Composition",
    "MidpointDiscreteLagrangian",
    "ReducedGNI",
    "ReducedSystem",
    "average_momentum_residual",
    "ball_exact_homogeneous",
    "constraint_gram",
    "euler_alpha_ptilde_step",
    "multiplier_from_post_momentum",
    "node_from_post_momentum",
    "pre_post_from_node",
    "projector_P",
    "projector_Q",
    "reduced_gni_residual",
    "reduced_rattle_37",
    "reflect",
    "reflection_isometry_residual",
    "rolling_ball",
]
