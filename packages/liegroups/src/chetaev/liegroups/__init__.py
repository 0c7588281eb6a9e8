"""Matrix Lie groups, retractions and their trivialized tangents (chetaev.liegroups).

Groups ``SO2, SO3, SE2, SE3``, ``Rn(n)``, ``Product(G1, G2, ...)``; the homogeneous space
``S2 = SO(3)/SO(2)``; retractions ``retraction(G, "exp" | "cayley")``.  Conventions are in
``_base.py`` and ``_retractions.py``.
"""

from ._base import MatrixLieGroup
from ._compiled_source import compiled_source, compiled_support
from ._errors import LieGroupError
from ._numerics import SERIES_THETA_SQ, series_coefficients, series_rule, use_series
from ._product import Product, ProductGroup
from ._retractions import Retraction, retraction
from ._rn import Rn, RnGroup
from ._se2 import SE2, SE2Group
from ._se3 import SE3, SE3Group
from ._so2 import SO2, SO2Group
from ._so3 import SO3, SO3Group
from ._sphere import S2, Sphere2
from ._version import __version__ as __version__

__all__ = [
    "S2",
    "SE2",
    "SE3",
    "SERIES_THETA_SQ",
    "SO2",
    "SO3",
    "LieGroupError",
    "MatrixLieGroup",
    "Product",
    "ProductGroup",
    "Retraction",
    "Rn",
    "RnGroup",
    "SE2Group",
    "SE3Group",
    "SO2Group",
    "SO3Group",
    "Sphere2",
    "compiled_source",
    "compiled_support",
    "retraction",
    "series_coefficients",
    "series_rule",
    "use_series",
]
