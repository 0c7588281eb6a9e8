"""``chetaev.discrete_lagrangian._util``: errors, input validation and finite differences, used
by every layer.

Private: import the public names from :mod:`chetaev.discrete_lagrangian`.
"""

__all__: list[str] = []
