"""Error types of :mod:`chetaev.liegroups`."""

from __future__ import annotations

__all__ = ["LieGroupError"]


class LieGroupError(ValueError):
    """Bad input to a group, retraction or homogeneous-space function.

    Raised for wrong shapes, NaN/inf entries, matrices that are not group elements
    (e.g. passed to ``log``) and unknown retraction kinds. The message names the
    function, the argument, what was expected and what was received.
    """
