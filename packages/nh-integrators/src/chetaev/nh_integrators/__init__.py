"""High-order nonholonomic partitioned Runge–Kutta integrators (chetaev).

Paper: D. Martín de Diego, R. T. Sato Martín de Almagro, "High-order geometric methods
for nonholonomic mechanical systems", arXiv:1810.10926 (eq. 14, App. D, E).
"""

from ._equations import StageModel
from ._homogeneous import (
    sphere_lift,
    sphere_point,
    sphere_velocity,
    spherical_kepler,
    spherical_pendulum,
    tait_bryan,
)
from ._lie_prk import RETRACTIONS, LieNonholonomicPRK
from ._nhprk import (
    AUTO_STRUCTURED_MIN_BATCH,
    CONSTRAINT_MOMENTA,
    FORMS,
    JACOBIAN_REUSE,
    NonholonomicPRK,
)
from ._rules import (
    DEFAULT_MULTIPLIER_RULE,
    MULTIPLIER_MODE_ALIASES,
    MULTIPLIER_MODE_EVERY,
    MULTIPLIER_MODE_THRESHOLD,
    MULTIPLIER_MODES,
    MULTIPLIER_RULES,
    MultiplierModeWarning,
)
from ._version import __version__ as __version__

__all__ = [
    "AUTO_STRUCTURED_MIN_BATCH",
    "CONSTRAINT_MOMENTA",
    "DEFAULT_MULTIPLIER_RULE",
    "FORMS",
    "JACOBIAN_REUSE",
    "MULTIPLIER_MODES",
    "MULTIPLIER_MODE_ALIASES",
    "MULTIPLIER_MODE_EVERY",
    "MULTIPLIER_MODE_THRESHOLD",
    "MULTIPLIER_RULES",
    "RETRACTIONS",
    "LieNonholonomicPRK",
    "MultiplierModeWarning",
    "NonholonomicPRK",
    "StageModel",
    "sphere_lift",
    "sphere_point",
    "sphere_velocity",
    "spherical_kepler",
    "spherical_pendulum",
    "tait_bryan",
]
