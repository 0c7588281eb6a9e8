"""``chetaev.discrete_lagrangian.driver``: integrate, Trajectory, ensembles, and the independent
reference solutions.

Private: import the public names from :mod:`chetaev.discrete_lagrangian`.
"""

__all__: list[str] = []
