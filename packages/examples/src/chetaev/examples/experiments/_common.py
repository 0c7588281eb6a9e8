"""Helpers shared by the experiment modules (not registered: the name starts with ``_``)."""

from __future__ import annotations

__all__ = ["grid_steps"]


def grid_steps(T: float, h: float) -> int:
    """The number of steps ``n`` with ``n h = T``.

    Experiments that compare the last node with a reference at ``T`` must land on ``T``
    exactly; a ``--h``/``--t-final`` override that does not divide would silently compare
    the solution at ``n h ≠ T`` with the reference at ``T``.

    Raises
    ------
    ValueError
        If ``T`` is not a positive multiple of ``h`` (to 1e-9 relative).
    """
    n = round(T / h)
    if n < 1 or abs(n * h - T) > 1e-9 * max(abs(T), 1.0):
        raise ValueError(f"t_final = {T} is not a multiple of h = {h}; choose h = T/n.")
    return n
