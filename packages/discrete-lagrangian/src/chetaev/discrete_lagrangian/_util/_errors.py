"""Error types of ``chetaev.discrete_lagrangian`` (one module, flat hierarchy).

Every bad input raises a :class:`ValueError` subclass whose message says what was
wrong and how to fix it; a step that cannot be completed raises
:class:`ConvergenceError` (a :class:`RuntimeError`) naming the step, the time, the
residual and what to try (DESIGN.md "Conventions", STYLE.md §6).
"""

from __future__ import annotations

import pickle

__all__ = [
    "ConstraintViolationError",
    "ConvergenceError",
    "DerivativeError",
    "HypothesisError",
    "InputError",
    "PostConditionError",
    "SingularMatrixError",
    "UnpicklableError",
]


class InputError(ValueError):
    """Bad input: wrong shape, non-finite value, inconsistent arguments."""


class ConstraintViolationError(InputError):
    """Initial data that do not lie on the constraint set (the message gives the violation)."""


class HypothesisError(InputError):
    """A tableau that violates the hypotheses a method needs (e.g. H1–H3 of paper §4, App. A)."""


class DerivativeError(InputError):
    """A user-supplied derivative that disagrees with a finite difference of its function.

    Raised before the first step (``integrate``) or by ``system.check_derivatives(q, v)``;
    the message names the argument (e.g. ``dA``), the worst entry's index and both values.
    """


class SingularMatrixError(InputError):
    """A singular (or not positive definite) mass matrix or constraint matrix."""


class ConvergenceError(RuntimeError):
    """Newton's method did not converge within one step.

    The message has one fixed shape::

        Newton did not converge at step 412 (t = 4.12): residual 3.1e-06 > 1.0e-12
        after 20 iterations. Try: halve h, or increase NewtonOptions(max_iter=...).
    """

    def __init__(
        self,
        step: int,
        t: float,
        residual: float,
        tol: float,
        iterations: int,
        hint: str = "halve h, or increase NewtonOptions(max_iter=...)",
    ) -> None:
        self.step = int(step)
        self.t = float(t)
        self.residual = float(residual)
        self.tol = float(tol)
        self.iterations = int(iterations)
        self.hint = hint
        super().__init__(
            f"Newton did not converge at step {self.step} (t = {self.t:.6g}): residual "
            f"{self.residual:.1e} > {self.tol:.1e} after {self.iterations} iterations. "
            f"Try: {hint.rstrip('.')}."
        )

    def __reduce__(self):  # keep the error picklable with its fields
        return (
            type(self),
            (self.step, self.t, self.residual, self.tol, self.iterations, self.hint),
        )


class PostConditionError(ConvergenceError):
    """A step converged but its result violates what the method guarantees.

    Raised by :func:`~chetaev.discrete_lagrangian.integrate` after a converged step whose
    constraint residual exceeds the method's claimed tolerance by more than the documented
    factor (``POSTCONDITION_FACTOR``), or whose state overflows. The message has the shape::

        Step 3 (from t = 30) converged but its position constraint residual 1.0e-04
        exceeds the bound 1.0e-06 the method guarantees. Try: halve h (the step is
        beyond the method's stability limit).
    """

    def __init__(self, step: int, t: float, residual: float, tol: float, what: str,
                 hint: str = "halve h (the step is beyond the method's stability limit)",
                 ) -> None:
        self.what = str(what)
        RuntimeError.__init__(self)
        self.step = int(step)
        self.t = float(t)
        self.residual = float(residual)
        self.tol = float(tol)
        self.iterations = 0
        self.hint = hint
        self.args = (
            f"Step {self.step} (from t = {self.t:.6g}) converged but its {self.what} "
            f"{self.residual:.1e} exceeds the bound {self.tol:.1e} the method guarantees. "
            f"Try: {hint.rstrip('.')}.",
        )

    def __reduce__(self):
        return (type(self), (self.step, self.t, self.residual, self.tol, self.what, self.hint))


class UnpicklableError(InputError, pickle.PicklingError):
    """An object cannot be pickled because it holds a lambda or a locally defined function.

    Pickle stores functions by their importable name, so a system built from lambdas (or
    closures) cannot be sent to another process or saved. The message names the field and
    says what to do: define the callables as module-level functions, or pickle with
    ``cloudpickle``.
    """
