"""``chetaev.discrete_lagrangian.core``: the numerical core: State, the Method base, the root
finder, the PRK engines and the discretization-map kernels with the view of a system they read.

Private: import the public names from :mod:`chetaev.discrete_lagrangian`.
"""

__all__: list[str] = []
