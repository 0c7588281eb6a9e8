"""The multiplier rules and option validators shared by ``NonholonomicPRK`` and
``LieNonholonomicPRK``.

Every step has ``s`` stage multipliers ``Lambda^1..Lambda^s`` but only ``s - 1``
constraint equations (stages 2..s); one closure fixes ``Lambda^1`` (high-order
paper eq. (14); homogeneous-spaces paper §4.2 and Figs. 3–4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import HypothesisError, InputError, NewtonOptions

__all__ = [
    "DEFAULT_MULTIPLIER_RULE",
    "MULTIPLIER_MODES",
    "MULTIPLIER_MODE_ALIASES",
    "MULTIPLIER_MODE_EVERY",
    "MULTIPLIER_MODE_THRESHOLD",
    "MULTIPLIER_RULES",
    "PARASITIC_RULES",
    "MethodCache",
    "MultiplierModeWarning",
    "StageOrders",
    "check_newton",
    "check_pair",
    "convert_pair",
    "multiplier_mode_check",
    "one_of",
]

#: Canonical values of ``multiplier_rule`` (both classes):
#: ``"continuous"`` (default, C2 general): ``Lambda^1 = lambda(q_k, v_k)`` from the continuous
#: formula (no parasitic multiplier mode; orders 2s - 2 kept);
#: ``"carry"`` (C1, the papers' rule, arXiv:1810.10926 eq. 14 and App. F): ``Lambda^1 =
#: lambda_k = Lambda^s`` of the previous step (has the parasitic mode, see
#: :data:`PARASITIC_RULES`);
#: ``"zero_first"`` (C2): ``Lambda^1 = 0``;
#: ``"weighted_sum"`` (C3): ``Lambda^1`` unknown with ``sum_j b_j Lambda^j = 0``
#: (``LieNonholonomicPRK`` only; refused by ``NonholonomicPRK``).
MULTIPLIER_RULES = ("carry", "zero_first", "continuous", "weighted_sum")

#: The default ``multiplier_rule`` of both classes.
DEFAULT_MULTIPLIER_RULE = "continuous"

#: The rules whose multiplier sequence has the parasitic mode ``lambda_{k+1} ~ R lambda_k``
#: (only ``"carry"``: ``Lambda^1`` of a step is the previous step's ``Lambda^s``); runs with
#: them are monitored (:class:`MultiplierModeWarning`).
PARASITIC_RULES = ("carry",)

#: The monitor of :func:`multiplier_mode_check` warns once the parasitic mode
#: ``|lambda_k - lambda(q_k, v_k)|`` exceeds this multiple of the multiplier's scale.
#: Measured with the papers' rule: on the free Chaplygin sleigh (h = 0.05 and 0.1, s = 2..5)
#: the ratio passes 0.5 at t = 9.5-102, while the relative energy error is still
#: 7e-6..6.5e-4 (the energy is lost some time later); on models without a growing mode
#: (particle, CVT, chaotic ensemble, general Lagrangian, vertical disc, turntable ball, S^2
#: pendulum; s = 2..4, h = 0.1 and 0.2, T = 100-3000) the largest ratio is 0.27 (CVT, high
#: energy, h = 0.2, s = 3, T = 3000), 1.9x below. At the CVT's resonant step h = pi/10 (the
#: paper's erratic case, relative energy error 0.05-0.28) the ratio reaches 0.75-1.4 over
#: T = 3000 and the warning fires.
MULTIPLIER_MODE_THRESHOLD = 0.5

#: The monitor evaluates the continuous multiplier on every this many steps (steps with
#: ``state.n`` a multiple of it), which keeps its cost near 1/5 of one multiplier
#: evaluation per step (a full evaluation costs 40-50 % of a Lobatto-3 step of the CVT).
#: The mode grows by a factor ~e per unit time on the sleigh, so at h = 0.1 the warning
#: comes at most 0.5 time units late.
MULTIPLIER_MODE_EVERY = 5

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


def convert_pair(pair: Any) -> Any:
    """attrs converter of a method's ``pair``: a stage count ``s`` (an int >= 2) means
    ``rktableaux.lobatto_iiia_iiib(s)``; anything else is passed on to :func:`check_pair`."""
    if isinstance(pair, (int, np.integer)) and not isinstance(pair, bool):
        if pair < 2:
            raise InputError(
                f"`pair` as a stage count must be >= 2 (Lobatto s >= 2), got {pair}. "
                "Pass s >= 2 or a pair such as lobatto_iiia_iiib(3)."
            )
        from chetaev.rktableaux import lobatto_iiia_iiib

        return lobatto_iiia_iiib(int(pair))
    return pair


def check_pair(inst: Any, attribute: Any, pair: Any) -> None:
    """attrs validator of a method's ``pair``: a ``rktableaux.PartitionedTableau`` whose
    first tableau satisfies H1–H3 and whose second (its symplectic conjugate) H1'–H2'
    (high-order paper §4.3, H1–H3; Thm 5.1). Raises :class:`InputError` for another
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
    def symmetric(self) -> bool:
        """Exactly symmetric (stepping back with ``-h`` returns the input) only with the
        papers' rule ``multiplier_rule="carry"`` (paper Thm. 5.1, Cor. 5.2.1); the other rules
        give up this exact symmetry."""
        return self.multiplier_rule == "carry"  # type: ignore[attr-defined]

    @property
    def multiplier_order(self) -> int:
        """Global order of lambda: s for even s, s - 1 for odd s."""
        s = self.stages
        return s if s % 2 == 0 else s - 1


class MultiplierModeWarning(RuntimeWarning):
    """The parasitic multiplier mode of ``multiplier_rule="carry"`` has grown large.

    With the papers' rule ``Lambda^1 = lambda_k`` (arXiv:1810.10926 eq. 14 and App. F) the
    multiplier sequence has a parasitic mode ``lambda_{k+1} ~ R lambda_k`` (``R = -1`` for
    even s, ``+1`` for odd s) that evolves with the backward-time dynamics: on a system
    whose forward motion is asymptotically stable (the free Chaplygin sleigh) it grows
    exponentially and the energy collapses while every step converges. Emitted (once per
    run, by :func:`chetaev.discrete_lagrangian.integrate`, which also appends the text to
    ``Trajectory.message``) when ``|lambda_k - lambda(q_k, v_k)|`` exceeds
    :data:`MULTIPLIER_MODE_THRESHOLD` times the multiplier's scale. Remedy:
    ``multiplier_rule="continuous"`` (the default)."""


class MethodCache(dict):
    """A method's memo of derived data (``_cache``). It pickles without the entries that
    hold the system's callables (``"consts"``, ``"setup"``: rebuilt, identically, on the
    next step), so a used method can be sent to another process."""

    TRANSIENT = ("consts", "setup")

    def __reduce__(self) -> tuple:
        keep = {k: v for k, v in self.items() if k not in self.TRANSIENT}
        return (type(self), (keep,))


def _force_scale(state: Any) -> np.ndarray:
    """``max|p| max|v|`` per trajectory: a force scale (energy per unit length) that keeps
    the monitor meaningful where the continuous multiplier vanishes (S^2 lifts)."""
    p = state.p if state.p is not None else state.v
    return np.abs(np.asarray(p)).max(axis=-1) * np.abs(np.asarray(state.v)).max(axis=-1)


def multiplier_mode_check(
    method: Any, system: Any, previous: Any, state: Any, h: float
) -> MultiplierModeWarning | None:
    """The post-step hook ``check_step`` of both method classes (the driver calls it after
    every converged step).

    Only for the rules with the parasitic mode (:data:`PARASITIC_RULES`; otherwise it
    returns None at once), and only on every :data:`MULTIPLIER_MODE_EVERY`-th step (one
    evaluation of the continuous multiplier there):

    ``mode_k = max_i |lambda_k - lambda(q_k, v_k)|_i``, ``scale_k = max_{j <= k}
    max(max_i |lambda(q_j, v_j)|_i, max|p_j| max|v_j|)`` over the monitored steps j (a
    running maximum, per trajectory, carried forward in ``State.carry["mode_scale"]``).

    Returns a :class:`MultiplierModeWarning` naming the time, the size of the mode and the
    remedy once ``mode_k > MULTIPLIER_MODE_THRESHOLD * scale_k`` for some trajectory."""
    if method.multiplier_rule not in PARASITIC_RULES or state.lam is None:
        return None
    previous_scale = previous.carry.get("mode_scale")
    if state.n % MULTIPLIER_MODE_EVERY:
        if previous_scale is not None:
            state.carry["mode_scale"] = previous_scale
        return None
    lam_c = np.asarray(system.multiplier(state.q, state.v), dtype=np.float64)
    mode = np.abs(np.asarray(state.lam) - lam_c).max(axis=-1)
    if previous_scale is None:
        previous_scale = _force_scale(previous)
    scale = np.maximum(previous_scale, np.maximum(np.abs(lam_c).max(axis=-1), _force_scale(state)))
    state.carry["mode_scale"] = scale
    ratio = mode / np.where(scale > 0.0, scale, np.inf)
    if not np.any(ratio > MULTIPLIER_MODE_THRESHOLD):
        return None
    worst = np.unravel_index(int(np.argmax(ratio)), np.shape(ratio))
    where = f" (trajectory {tuple(int(i) for i in worst)} of the batch)" if worst else ""
    return MultiplierModeWarning(
        f"The parasitic multiplier mode of multiplier_rule={method.multiplier_rule!r} has "
        f"grown at t = {state.t:.6g} (step {state.n}){where}: |lambda_k - lambda(q_k, v_k)| = "
        f"{float(mode[worst]):.3g}, {float(ratio[worst]):.3g} times the multiplier's scale "
        f"{float(scale[worst]):.3g} (threshold {MULTIPLIER_MODE_THRESHOLD:g}). The steps "
        "converge, but the energy and the motion may be wrong from here on (the mode grows "
        "on systems that are unstable backward in time). Remedy: "
        "multiplier_rule='continuous' (the default)."
    )
