"""Error types of ``chetaev.dsocs``.

Bad input raises :class:`DSOCSInputError` (a ``chetaev.discrete_lagrangian.InputError``,
hence a :class:`ValueError`); a step whose equations cannot be solved raises
:class:`DSOCSConvergenceError` (a ``chetaev.discrete_lagrangian.ConvergenceError``, hence a
:class:`RuntimeError`), which the common ``integrate`` driver turns into
``Trajectory(success=False, message=...)`` (DESIGN.md "Conventions", STYLE.md §6).
"""

from __future__ import annotations

from chetaev.discrete_lagrangian import ConvergenceError, InputError

__all__ = ["DSOCSConvergenceError", "DSOCSInputError"]


class DSOCSInputError(InputError):
    """Bad input to a DSOCS: wrong shapes, non-finite data, inconsistent arguments."""


class DSOCSConvergenceError(ConvergenceError):
    """The step equations of Theorem 3.3 could not be solved.

    Same message shape as every chetaev step failure::

        Newton did not converge at step 12 (t = 1.2): residual 3.1e-06 > 1.0e-12
        after 50 iterations. Try: halve h, ...
    """
