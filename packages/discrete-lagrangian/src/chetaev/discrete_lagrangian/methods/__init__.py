"""``chetaev.discrete_lagrangian.methods``: the integrators written on the core: DEL, VPRK,
LieVPRK, constrained PRK, the discretization-map methods, and their option checks.

Private: import the public names from :mod:`chetaev.discrete_lagrangian`.
"""

__all__: list[str] = []
