"""chetaev.gni — the Geometric Nonholonomic Integrator with affine and reduced variants."""

from ._composition import Composition
from ._discrete_lagrangians import AlphaDiscreteLagrangian, MidpointDiscreteLagrangian
from ._gni import GNI, VARIANTS
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

__all__ = [
    "GNI",
    "VARIANTS",
    "AlphaDiscreteLagrangian",
    "Composition",
    "MidpointDiscreteLagrangian",
    "average_momentum_residual",
    "constraint_gram",
    "multiplier_from_post_momentum",
    "node_from_post_momentum",
    "pre_post_from_node",
    "projector_P",
    "projector_Q",
    "reflect",
    "reflection_isometry_residual",
]
