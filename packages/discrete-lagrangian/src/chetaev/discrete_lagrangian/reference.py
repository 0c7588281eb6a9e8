"""Reference solutions of the continuous equations (scipy DOP853, rtol 1e-13)."""

from .driver._reference import ReferenceSolution, reference_solution

__all__ = ["ReferenceSolution", "reference_solution"]
