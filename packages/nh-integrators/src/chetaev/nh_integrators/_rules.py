"""The multiplier rules and option validators shared by ``NonholonomicPRK`` and
``LieNonholonomicPRK``.

Every step has ``s`` stage multipliers ``Lambda^1..Lambda^s`` but only ``s - 1``
constraint equations (stages 2..s); one closure fixes ``Lambda^1`` (spec
high-order-nonholonomic §2.4 A5, spec homogeneous-spaces-rkmk §3.6 C1–C3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import HypothesisError, InputError, NewtonOptions

__all__ = [
    "MULTIPLIER_MODES",
    "MULTIPLIER_MODE_ALIASES",
    "MULTIPLIER_RULES",
    "StageOrders",
    "check_newton",
    "check_pair",
    "one_of",
]

#: Canonical values of ``multiplier_rule`` (both classes):
#: ``"carry"`` (default, C1): ``Lambda^1 = lambda_k = Lambda^s`` of the previous step;
#: ``"zero_first"`` (C2): ``Lambda^1 = 0``;
#: ``"continuous"`` (C2, general): ``Lambda^1 = lambda(q_k, v_k)`` from the continuous formula;
#: ``"weighted_sum"`` (C3): ``Lambda^1`` unknown with ``sum_j b_j Lambda^j = 0``
#: (``LieNonholonomicPRK`` only; refused by ``NonholonomicPRK``).
MULTIPLIER_RULES = ("carry", "zero_first", "continuous", "weighted_sum")

#: Old spelling of ``NonholonomicPRK(multiplier_mode=...)`` -> canonical ``multiplier_rule``.
MULTIPLIER_MODE_ALIASES = {"carried": "carry", "continuous": "continuous", "zero": "zero_first"}

#: The old ``multiplier_mode`` values (kept as a documented alias).
MULTIPLIER_MODES = tuple(MULTIPLIER_MODE_ALIASES)


def one_of(options: tuple[str, ...]) -> Callable[[Any, Any, Any], None]:
    """attrs validator: the value must be one of ``options`` (:class:`InputError` if not)."""

    def check(inst: Any, attribute: Any, value: Any) -> None:
        if value not in options:
            raise InputError(
                f"`{attribute.name}` must be one of {options}, got {value!r}. "
                "Pick one of the listed values."
            )

    return check


def check_pair(inst: Any, attribute: Any, pair: Any) -> None:
    """attrs validator of a method's ``pair``: a ``rktableaux.PartitionedTableau`` whose
    first tableau satisfies H1–H3 and whose second (its symplectic conjugate) H1'–H2'
    (spec high-order-nonholonomic §2.0; Thm 5.1). Raises :class:`InputError` for another
    type and :class:`HypothesisError`, naming the failed hypotheses, otherwise."""
    owner = type(inst).__name__
    for attr in ("first", "second", "satisfies_constrained_hypotheses"):
        if not hasattr(pair, attr):
            raise InputError(
                f"`pair` of {owner} must be a rktableaux.PartitionedTableau (e.g. "
                f"lobatto_iiia_iiib(3)), got {type(pair).__name__}."
            )
    res = pair.satisfies_constrained_hypotheses()
    if not res.all:
        hint = "" if "Use " in res.message else " Use rktableaux.lobatto_iiia_iiib(s), s >= 2."
        raise HypothesisError(
            f"{owner} needs a pair satisfying H1-H3 (first tableau) and H1'-H2' "
            f"(second, its symplectic conjugate), paper §4, App. A: {res.message}{hint}"
        )


def check_newton(used: tuple[str, ...], note: str) -> Callable[[Any, Any, Any], None]:
    """attrs validator of a method's ``newton``: a ``NewtonOptions`` whose fields outside
    ``used`` keep their defaults. A field the method's solver does not read would otherwise
    be accepted and silently ignored; ``note`` says what the method does instead."""
    default = NewtonOptions()

    def check(inst: Any, attribute: Any, value: Any) -> None:
        if not isinstance(value, NewtonOptions):
            raise InputError(
                f"`newton` must be a chetaev.discrete_lagrangian.NewtonOptions, got "
                f"{type(value).__name__}."
            )
        ignored = [
            f"{name}={getattr(value, name)!r}"
            for name in (
                "tol",
                "atol",
                "max_iter",
                "simplified",
                "refresh_rate",
                "max_stall",
                "finite_differences",
            )
            if name not in used and getattr(value, name) != getattr(default, name)
        ]
        if ignored:
            raise InputError(
                f"{type(inst).__name__} reads only {', '.join(used)} from NewtonOptions; "
                f"{', '.join(ignored)} would be ignored. {note}"
            )

    return check


class StageOrders:
    """Mixin of both method classes: ``stages`` s of ``self.pair`` and the orders of
    Cor. 5.2.1 (for lambda_0 from the continuous problem)."""

    __slots__ = ()

    @property
    def stages(self) -> int:
        """Number of stages s of the Lobatto pair."""
        return int(np.asarray(self.pair.first.a).shape[0])  # type: ignore[attr-defined]

    @property
    def order(self) -> int:
        """Global order in the configuration (q or g) and in p / v (or mu / eta): 2s - 2."""
        return 2 * self.stages - 2

    @property
    def multiplier_order(self) -> int:
        """Global order of lambda: s for even s, s - 1 for odd s."""
        s = self.stages
        return s if s % 2 == 0 else s - 1
