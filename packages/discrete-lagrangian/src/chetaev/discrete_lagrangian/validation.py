"""Input checks shared by the public entry points of every chetaev package.

Each returns the cleaned value; a bad value raises :class:`~chetaev.discrete_lagrangian.InputError`
(a ``ValueError``) naming the argument and the fix (the project's input policy,
docs/input_policy.rst). Other packages call these rather than writing their own.
"""

from ._util._validation import as_float

__all__ = ["as_float"]
