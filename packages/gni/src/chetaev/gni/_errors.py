"""Errors of chetaev.gni: the shared chetaev error types (see the package README).

Bad input raises :class:`InputError` (a ``ValueError``) or one of its subclasses; a step
whose nonlinear solve fails raises :class:`ConvergenceError` (a ``RuntimeError``).
"""

from chetaev.discrete_lagrangian import (
    ConstraintViolationError,
    ConvergenceError,
    InputError,
)

__all__ = ["ConstraintViolationError", "ConvergenceError", "InputError"]
