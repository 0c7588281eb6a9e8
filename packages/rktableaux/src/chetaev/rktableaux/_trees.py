"""Rooted trees (one or two colours) and their elementary weights, vectorized.

Every tree of order ``n >= 2`` is stored through its canonical Butcher product
``t = l ∘ r`` (``r`` grafted as a new child of the root of ``l``), where ``r`` is the child
of ``t`` with the largest index.  Enumerating the pairs ``(l, r)`` with ``maxchild(l) <= r``
yields every (coloured) rooted tree exactly once.  With this representation the stage
vectors of all trees of one order come out of one numpy expression:

    u(•) = 1,    u(l ∘ r) = u(l) * (A_{colour(r)} u(r)),    Φ(t) = b_{colour(t)} · u(t),
    γ(•) = 1,    γ(l ∘ r) = |t| · γ(l)/|l| · γ(r),

and the order conditions read Φ(t) = 1/γ(t) (paper App. B, eq. 51; Hairer–Nørsett–Wanner I,
Thm II.2.13; for partitioned methods HNW I §II.15).  Trees of order ≤ 10: 1, 1, 2, 4, 9, 20,
48, 115, 286, 719; bi-coloured: 2, 4, 14, 52, 214, 916, 4116, 18996.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._errors import TableauError
from ._validation import as_nonnegative_int

__all__ = ["TreeSet", "bicoloured_trees", "elementary_weights", "rooted_trees"]


class TreeSet:
    """All rooted trees with ``colours`` vertex colours up to order ``max_order``.

    Every attribute below is a numpy array of length ``len(self)``.

    Attributes
    ----------
    order : int64, the number of vertices |t|.
    gamma : float64, the density γ(t).
    colour : int64, colour of the root (always 0 for one colour).
    left, right : int64, canonical Butcher factors (−1 for the single vertices).
    level_slices : list of slices, ``level_slices[n]`` selects the trees of order ``n``.
    """

    def __init__(self, max_order: int, colours: int) -> None:
        if not 1 <= max_order <= 20:
            raise TableauError(
                f"max_order must be in 1..20; got {max_order}. The tree densities γ(t) of order "
                "> 20 overflow int64 (and there are already 12 826 228 rooted trees of order "
                "20): check order conditions up to order 20 at most."
            )
        self.max_order = max_order
        self.colours = colours
        # order 1: one single vertex per colour
        order = [np.ones(colours, np.int64)]
        gamma = [np.ones(colours, np.int64)]
        colour = [np.arange(colours, dtype=np.int64)]
        left = [np.full(colours, -1, np.int64)]
        right = [np.full(colours, -1, np.int64)]
        maxchild = [np.full(colours, -1, np.int64)]
        self.level_slices: list[slice] = [slice(0, 0), slice(0, colours)]
        total = colours
        for n in range(2, max_order + 1):
            chunks = []
            for k in range(1, n):  # order of r; the left factor l has order m = n − k
                m = n - k
                lsl, rsl = self.level_slices[m], self.level_slices[k]
                lmax = maxchild[m - 1]  # trees of order m, non-decreasing maxchild
                r = np.arange(rsl.start, rsl.stop, dtype=np.int64)
                cnt = np.searchsorted(lmax, r, side="right")  # l with maxchild(l) ≤ r
                rr = np.repeat(r, cnt)
                offs = np.arange(rr.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
                li = lsl.start + offs
                chunks.append((li, rr, m))
            lev_left = np.concatenate([c[0] for c in chunks])
            lev_right = np.concatenate([c[1] for c in chunks])
            lev_m = np.concatenate([np.full(c[0].size, c[2], np.int64) for c in chunks])
            g_all = np.concatenate(gamma)
            c_all = np.concatenate(colour)
            size = lev_left.size
            order.append(np.full(size, n, np.int64))
            gamma.append(n * (g_all[lev_left] // lev_m) * g_all[lev_right])
            colour.append(c_all[lev_left])
            left.append(lev_left)
            right.append(lev_right)
            maxchild.append(lev_right)  # r is generated in increasing order within a level
            self.level_slices.append(slice(total, total + size))
            total += size
        self.order = np.concatenate(order)
        self.gamma = np.concatenate(gamma).astype(np.float64)
        self.colour = np.concatenate(colour)
        self.left = np.concatenate(left)
        self.right = np.concatenate(right)

    def __len__(self) -> int:
        return int(self.order.shape[0])

    def count(self, n: int) -> int:
        """Number of trees of order exactly ``n``."""
        sl = self.level_slices[n]
        return sl.stop - sl.start

    def upto(self, n: int) -> int:
        """Number of trees of order ≤ ``n`` (they are the first ones stored)."""
        return self.level_slices[n].stop

    def bracket(self, i: int) -> str:
        """Bracket notation of tree ``i``: ``τ`` (white vertex ``σ``), ``[τ, [τ]]``, ..."""
        return _bracket(self, i)

    def __repr__(self) -> str:
        counts = ", ".join(str(self.count(n)) for n in range(1, self.max_order + 1))
        return f"TreeSet(max_order={self.max_order}, colours={self.colours}; counts {counts})"


def _children(trees: TreeSet, i: int) -> list[int]:
    out = []
    while trees.left[i] >= 0:
        out.append(int(trees.right[i]))
        i = int(trees.left[i])
    return out[::-1]


def _bracket(trees: TreeSet, i: int) -> str:
    leaf = "τ" if trees.colour[i] == 0 else "σ"
    kids = _children(trees, i)
    if not kids:
        return leaf
    inner = ", ".join(_bracket(trees, k) for k in kids)
    return f"[{inner}]" if trees.colours == 1 else f"{leaf}[{inner}]"


@lru_cache(maxsize=8)
def rooted_trees(max_order: int) -> TreeSet:
    """All (one-colour) rooted trees of order ≤ ``max_order`` (cached)."""
    return TreeSet(as_nonnegative_int(max_order, "max_order"), 1)


@lru_cache(maxsize=8)
def bicoloured_trees(max_order: int) -> TreeSet:
    """All bi-coloured rooted trees (P-trees) of order ≤ ``max_order`` (cached)."""
    return TreeSet(as_nonnegative_int(max_order, "max_order"), 2)


def elementary_weights(
    trees: TreeSet, n: int, mats: list[np.ndarray], weights: list[np.ndarray]
) -> np.ndarray:
    """Elementary weights Φ(t) of the trees of order ≤ ``n``.

    Parameters
    ----------
    trees : the tree set (``trees.max_order >= n``).
    mats : one (s, s) matrix per colour (``[a]`` or ``[a, â]``).
    weights : one (s,) weight vector per colour (``[b]`` or ``[b, b̂]``).

    Returns
    -------
    (trees.upto(n),) array of Φ(t) = b_{colour(root)} · u(t).
    """
    s = mats[0].shape[0]
    N = trees.upto(n)
    U = np.empty((N, s))
    U[: trees.level_slices[1].stop] = 1.0
    for m in range(2, n + 1):
        sl = trees.level_slices[m]
        r = trees.right[sl]
        lft = trees.left[sl]
        Ur = U[r]
        if len(mats) == 1:
            Ar = Ur @ mats[0].T
        else:
            col = trees.colour[r][:, None]
            Ar = Ur @ mats[0].T
            for k in range(1, len(mats)):
                Ar = np.where(col == k, Ur @ mats[k].T, Ar)
        U[sl] = U[lft] * Ar
    if len(weights) == 1:
        return U @ weights[0]
    col = trees.colour[:N]
    out = U @ weights[0]
    for k in range(1, len(weights)):
        out = np.where(col == k, U @ weights[k], out)
    return out
