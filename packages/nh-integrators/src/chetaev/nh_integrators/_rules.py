"""The multiplier rules shared by ``NonholonomicPRK`` and ``LieNonholonomicPRK``.

Every step has ``s`` stage multipliers ``Lambda^1..Lambda^s`` but only ``s - 1``
constraint equations (stages 2..s); one closure fixes ``Lambda^1`` (spec
high-order-nonholonomic §2.4 A5, spec homogeneous-spaces-rkmk §3.6 C1–C3).
"""

from __future__ import annotations

__all__ = ["MULTIPLIER_MODES", "MULTIPLIER_MODE_ALIASES", "MULTIPLIER_RULES"]

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
