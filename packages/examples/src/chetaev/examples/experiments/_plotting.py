"""Figure helpers shared by the experiment modules (matplotlib is imported by the caller's
``plot(fig)`` only; these functions take axes and arrays)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

__all__ = ["block_max", "h_axis", "log_bars"]


def h_axis(ax: Any, hs: Any, axis: str = "x") -> None:
    """Label a logarithmic step-size axis at the step sizes used, and nowhere else.

    Matplotlib's default minor labels on a short log axis (e.g. 2×10⁻², 3×10⁻², 4×10⁻²)
    overprint each other; the step sizes themselves are the informative ticks.
    """
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    hs = np.unique(np.asarray(hs, dtype=float))
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(hs))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())
    labels = [f"{h:.3g}" for h in hs]
    if axis == "x":
        ax.set_xticks(hs, labels, rotation=45 if len(hs) > 3 else 0, fontsize=7)
    else:
        ax.set_yticks(hs, labels, fontsize=7)


def block_max(t: Any, y: Any, n_blocks: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """The maximum of ``y`` over ``n_blocks`` consecutive windows of ``t`` (their mid times).

    A long, oscillating series drawn point by point fills its band solid and hides any other
    curve; its envelope of window maxima shows the same bound, and two methods stay apart.
    """
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    n_blocks = max(1, min(n_blocks, len(t)))
    edges = np.linspace(0, len(t), n_blocks + 1).astype(int)
    mids = np.array([t[a:b].mean() for a, b in pairwise(edges) if b > a])
    maxs = np.array([y[a:b].max() for a, b in pairwise(edges) if b > a])
    return mids, maxs


def log_bars(ax: Any, labels: list[str], values: list[float], bounds: list[float | None],
             *, floor: float = 1e-18, title: str = "") -> None:
    """Horizontal bars of ``values`` on a log axis, each with its pass bound as a tick mark.

    For experiments whose result is a handful of defects (symplecticity, reversibility):
    the bar is the measured figure, the red mark the bound it must stay under (a control
    that must stay above its bound has its mark on the left of the bar's end).
    """
    y = np.arange(len(values))[::-1]
    vals = np.maximum(np.asarray(values, dtype=float), floor)
    colors = ["tab:gray" if lab.startswith("control") else "tab:blue" for lab in labels]
    ax.barh(y, vals, left=floor, color=colors, height=0.6)
    for yi, b in zip(y, bounds):
        if b is not None:
            ax.plot([b, b], [yi - 0.4, yi + 0.4], color="tab:red", lw=2)
    ax.set_xscale("log")
    ax.set_xlim(floor, max(1.0, 10 * float(np.max(vals))))
    ax.set_yticks(y, labels, fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=9)
