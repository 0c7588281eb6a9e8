"""chetaev.rktableaux: Runge–Kutta tableaux for any number of stages, analysed from the
coefficients (order conditions, simplifying assumptions, stability, symplecticity)."""

from ._errors import OrderLimitWarning, TableauError
from ._explicit import (
    EXPLICIT,
    backward_euler,
    dopri5,
    explicit_midpoint,
    forward_euler,
    heun,
    implicit_midpoint,
    kutta3,
    ralston,
    rk4,
    rk38,
    ssprk3,
    trapezoidal,
)
from ._families import (
    FAMILIES,
    gauss,
    lobatto_iiia,
    lobatto_iiib,
    lobatto_iiic,
    lobatto_iiic_star,
    radau_ia,
    radau_iia,
)
from ._partitioned import (
    ConstrainedHypotheses,
    MixedOrders,
    PartitionedTableau,
    lobatto_iiia_iiib,
    symplectic_conjugate,
    symplectic_pair,
)
from ._table import properties_table
from ._tableau import SimplifyingOrders, Tableau
from ._trees import TreeSet, bicoloured_trees, rooted_trees
from ._validation import MAX_ASSUMPTION_ORDER, MAX_STAGES
from ._version import __version__ as __version__

__all__ = [
    "EXPLICIT",
    "FAMILIES",
    "MAX_ASSUMPTION_ORDER",
    "MAX_STAGES",
    "ConstrainedHypotheses",
    "MixedOrders",
    "OrderLimitWarning",
    "PartitionedTableau",
    "SimplifyingOrders",
    "Tableau",
    "TableauError",
    "TreeSet",
    "backward_euler",
    "bicoloured_trees",
    "dopri5",
    "explicit_midpoint",
    "forward_euler",
    "gauss",
    "heun",
    "implicit_midpoint",
    "kutta3",
    "lobatto_iiia",
    "lobatto_iiia_iiib",
    "lobatto_iiib",
    "lobatto_iiic",
    "lobatto_iiic_star",
    "properties_table",
    "radau_ia",
    "radau_iia",
    "ralston",
    "rk4",
    "rk38",
    "rooted_trees",
    "ssprk3",
    "symplectic_conjugate",
    "symplectic_pair",
    "trapezoidal",
]
