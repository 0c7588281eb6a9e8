"""Exception and warning types of :mod:`chetaev.rktableaux`."""

from __future__ import annotations

__all__ = ["OrderLimitWarning", "TableauError"]


class TableauError(ValueError):
    """Bad tableau data or an impossible request (wrong shapes, non-finite values, b_i = 0 ...)."""


class OrderLimitWarning(UserWarning):
    """Every order condition that was checked holds, so the order may be higher than reported."""
