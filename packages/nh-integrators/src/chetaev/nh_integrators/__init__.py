"""High-order nonholonomic partitioned Runge–Kutta integrators (chetaev).

Paper: D. Martín de Diego, R. T. Sato Martín de Almagro, "High-order geometric methods
for nonholonomic mechanical systems", arXiv:1810.10926 (eq. 14, App. D, E).
"""

from ._equations import StageModel
from ._nhprk import CONSTRAINT_MOMENTA, FORMS, MULTIPLIER_MODES, NonholonomicPRK

__all__ = [
    "CONSTRAINT_MOMENTA",
    "FORMS",
    "MULTIPLIER_MODES",
    "NonholonomicPRK",
    "StageModel",
]
