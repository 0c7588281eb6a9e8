"""Continuous systems used by the paper's models (built with chetaev.discrete_lagrangian)."""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian.systems import MechanicalSystem

__all__ = ["free_particle_system"]


def free_particle_system(mass: float, n: int) -> MechanicalSystem:
    """L = ½m|v|² on ℝⁿ as a MechanicalSystem."""

    def U(q):
        return np.zeros(np.shape(q)[:-1])

    def dU(q):
        return np.zeros(np.shape(q))

    def d2U(q):
        return np.zeros((*np.shape(q)[:-1], n, n))

    return MechanicalSystem(float(mass) * np.eye(n), U, dU, d2U)
