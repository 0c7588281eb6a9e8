"""Partitioned tableaux, the symplectic conjugate and the hypotheses of the constrained methods.

High-order paper §4.2–4.3 (H1–H3, H1'–H2', symplectic conjugate) and App. B (CĈ, DD̂);
paper App. A.3.1. P-series order conditions: Hairer–Nørsett–Wanner I, §II.15.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import attrs
import numpy as np

from ._errors import OrderLimitWarning, TableauError
from ._families import lobatto_iiia, lobatto_iiib
from ._legendre import legendre_tables
from ._tableau import ORDER_TOL, SIMPLIFYING_TOL, Tableau, _basis
from ._trees import bicoloured_trees, elementary_weights
from ._validation import MAX_ASSUMPTION_ORDER, as_nonnegative_int, as_tolerance

__all__ = [
    "DEFAULT_PAIR_MAX_ORDER",
    "ConstrainedHypotheses",
    "MixedOrders",
    "PartitionedTableau",
    "lobatto_iiia_iiib",
    "symplectic_conjugate",
    "symplectic_pair",
]

#: bi-coloured trees are enumerated up to this order by :meth:`PartitionedTableau.order`
DEFAULT_PAIR_MAX_ORDER = 8


def symplectic_conjugate(t: Tableau) -> Tableau:
    """The symplectic conjugate (â, b̂, ĉ) of ``t`` (paper §4, App. A).

    â_ij = b_j (1 − a_ji / b_i), b̂ = b, ĉ = c, the unique tableau with
    b_i â_ij + b̂_j a_ji = b_i b̂_j. The conjugate of Lobatto IIIA is Lobatto IIIB, that of
    Lobatto IIIC is IIIC*, and a symplectic tableau is its own conjugate.

    Raises
    ------
    TableauError
        If ``t`` is not a :class:`Tableau` or some weight b_i is zero.
    """
    if not isinstance(t, Tableau):
        raise TableauError(f"symplectic_conjugate expects a Tableau; got {type(t).__name__}.")
    zero = np.flatnonzero(t.b == 0.0)
    if zero.size:
        raise TableauError(
            f"symplectic_conjugate needs every weight b_i != 0 (â_ij = b_j(1 − a_ji/b_i)); "
            f"{t.name or 'the tableau'} has b[{int(zero[0])}] = 0. Use a tableau with nonzero "
            "weights (e.g. a collocation method)."
        )
    b = t.b
    ahat = b[None, :] * (1.0 - t.a.T / b[:, None])
    name = f"conjugate of {t.name}" if t.name else "symplectic conjugate"
    return Tableau(ahat, b, t.c, name=name)


class MixedOrders(NamedTuple):
    """Largest orders of the mixed simplifying assumptions of a pair (paper App. A, eqs. (43)–(45),
    App. B)."""

    CC_hat: int
    DD_hat: int
    C_hatC: int
    D_hatD: int


@attrs.frozen
class ConstrainedHypotheses:
    """Result of :meth:`PartitionedTableau.satisfies_constrained_hypotheses`.

    Attributes
    ----------
    H1 : a_1j = 0 for all j (first tableau).
    H2 : Ã = (a_ij)_{i,j≥2} invertible (first tableau).
    H3 : a_sj = b_j for all j (first tableau; stiffly accurate).
    H1p : â_is = 0 for all i (second tableau; H1').
    H2p : â_i1 = b̂_1 for all i (second tableau; H2').
    message : names every hypothesis that fails and by how much ("" is never used).
    """

    H1: bool
    H2: bool
    H3: bool
    H1p: bool
    H2p: bool
    message: str

    @property
    def all(self) -> bool:
        """True when H1, H2, H3, H1' and H2' all hold."""
        return self.H1 and self.H2 and self.H3 and self.H1p and self.H2p

    def __bool__(self) -> bool:
        return self.all


def _check_tableau(instance, attribute, value) -> None:
    if not isinstance(value, Tableau):
        raise TableauError(
            f"PartitionedTableau.{attribute.name} must be a Tableau; got {type(value).__name__}."
        )


@attrs.frozen(eq=False, repr=False, slots=False)
class PartitionedTableau:
    """A partitioned Runge–Kutta method: ``first`` (a, b, c) for q, ``second`` (â, b̂, ĉ) for p.

    For y' = f(y, z), z' = g(y, z) the stages read Y_i = y_0 + h Σ_j a_ij f(Y_j, Z_j),
    Z_i = z_0 + h Σ_j â_ij g(Y_j, Z_j) (paper App. A.3.1). For the Lobatto pair, ``first`` is
    IIIA and ``second`` is IIIB. Both must have the same number of stages.
    """

    first: Tableau = attrs.field(validator=_check_tableau)
    second: Tableau = attrs.field(validator=_check_tableau)
    name: str = attrs.field(default="", converter=str)

    def __attrs_post_init__(self) -> None:
        if self.first.stages != self.second.stages:
            raise TableauError(
                f"the two tableaux of a PartitionedTableau must have the same number of stages; "
                f"got first.stages = {self.first.stages} and second.stages = "
                f"{self.second.stages}."
            )
        if not self.name:
            object.__setattr__(self, "name", f"({self.first.name}, {self.second.name})")

    @property
    def stages(self) -> int:
        """Number of stages s."""
        return self.first.stages

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PartitionedTableau):
            return NotImplemented
        return self.first == other.first and self.second == other.second

    def __hash__(self) -> int:
        return hash((self.first, self.second))

    def swapped(self) -> PartitionedTableau:
        """The pair with the roles exchanged, (second, first)."""
        return PartitionedTableau(self.second, self.first, name=f"swapped {self.name}")

    # ------------------------------------------------------------------ symplecticity
    def symplecticity_residual(self) -> tuple[np.ndarray, np.ndarray]:
        """(b_i â_ij + b̂_j a_ji − b_i b̂_j  (s, s),  b − b̂  (s,)) (paper App. A.3.1)."""
        a, b = self.first.a, self.first.b
        ah, bh = self.second.a, self.second.b
        m = b[:, None] * ah + bh[None, :] * a.T - np.outer(b, bh)
        return m, b - bh

    def is_symplectic(self, tol: float = SIMPLIFYING_TOL) -> bool:
        """b_i â_ij + b̂_j a_ji = b_i b̂_j and b = b̂ (symplectic PRK, HLW Thm VI.4.6)."""
        m, db = self.symplecticity_residual()
        t = as_tolerance(tol)
        return bool(np.all(np.abs(m) <= t) and np.all(np.abs(db) <= t))

    # ------------------------------------------------------------------ order conditions
    def order_condition_residuals(self, n: int) -> np.ndarray:
        """Scaled residuals of Φ(t) = 1/γ(t) over the bi-coloured trees of order ≤ n.

        Colour 0 (τ) vertices use ``first`` (a, b), colour 1 (σ) vertices ``second`` (â, b̂);
        scaling as in :meth:`Tableau.order_condition_residuals`. The trees are those of
        :func:`chetaev.rktableaux.bicoloured_trees` (same order).
        """
        n = as_nonnegative_int(n, "n")
        if n == 0:
            return np.zeros(0)
        trees = bicoloured_trees(max(n, DEFAULT_PAIR_MAX_ORDER))
        mats = [self.first.a, self.second.a]
        wts = [self.first.b, self.second.b]
        phi = elementary_weights(trees, n, mats, wts)
        phi_abs = elementary_weights(
            trees, n, [np.abs(m) for m in mats], [np.abs(w) for w in wts]
        )
        inv_gamma = 1.0 / trees.gamma[: trees.upto(n)]
        return (phi - inv_gamma) / np.maximum(phi_abs, inv_gamma)

    def failing_trees(self, n: int, tol: float = ORDER_TOL) -> list[str]:
        """Bracket notation (τ: first, σ: second) of the bi-coloured trees that fail."""
        res = self.order_condition_residuals(n)
        trees = bicoloured_trees(max(n, DEFAULT_PAIR_MAX_ORDER))
        return [trees.bracket(i) for i in np.flatnonzero(np.abs(res) > tol)]

    def order(self, max_order: int = DEFAULT_PAIR_MAX_ORDER, tol: float = ORDER_TOL) -> int:
        """Order of the partitioned method from the bi-coloured tree (P-series) conditions.

        Every tree up to ``max_order`` is checked (default 8; order 9 has 89894 trees). The
        order cannot exceed the quadrature order of either weight vector; if all trees hold
        and that bound is larger, an :class:`OrderLimitWarning` is issued and ``max_order``
        returned.
        """
        max_order = as_nonnegative_int(max_order, "max_order")
        tol = as_tolerance(tol)
        pB = min(self.first.simplifying_orders().B, self.second.simplifying_orders().B)
        n = min(max_order, pB + 1)
        res = self.order_condition_residuals(n)
        trees = bicoloured_trees(max(n, DEFAULT_PAIR_MAX_ORDER))
        bad = np.flatnonzero(np.abs(res) > tol)
        if bad.size:
            return int(trees.order[bad[0]]) - 1
        if pB > max_order:
            warnings.warn(
                f"{self.name}: every bi-coloured order condition up to order {max_order} holds "
                f"and the quadrature order is {pB}; the order lies in [{max_order}, {pB}]. "
                "Pass a larger max_order to decide.",
                OrderLimitWarning,
                stacklevel=2,
            )
            return max_order
        return pB  # pragma: no cover - the bushy tree of order pB + 1 fails before

    # ------------------------------------------------------------------ mixed assumptions
    def CC_hat_residual(self, Q: int, basis: str = "legendre") -> np.ndarray:
        """(Q−1, s) residuals of CĈ(Q), k = 2..Q (paper App. A, eqs. (43)–(45), App. B).

        Monomial: Σ_j Σ_l a_ij â_jl c_l^{k−2} − c_i^k/(k(k−1)). Legendre (default, the same
        conditions, well-conditioned): Σ_j Σ_l a_ij â_jl P̃_{k−2}(c_l) − ∫_0^{c_i}∫_0^t P̃_{k−2}.
        """
        Q = as_nonnegative_int(Q, "Q", MAX_ASSUMPTION_ORDER)
        c = self.first.c
        aah = self.first.a @ self.second.a
        if _basis(basis) == "monomial":
            k = np.arange(2, max(Q, 1) + 1)[:, None]
            return (c[None, :] ** (k - 2)) @ aah.T - c[None, :] ** k / (k * (k - 1))
        P, _, J = legendre_tables(c, max(Q - 1, 0))
        return P @ aah.T - J

    def DD_hat_residual(self, R: int, basis: str = "legendre") -> np.ndarray:
        """(R−1, s) residuals of DD̂(R), k = 2..R (paper App. A, eqs. (43)–(45), App. B).

        Monomial: Σ_i Σ_j b_i c_i^{k−2} a_ij â_jl − b_l [(k−1) − (k c_l − c_l^k)] / (k(k−1)).
        Legendre (default): Σ_i Σ_j b_i P̃_{k−2}(c_i) a_ij â_jl − b_l ∫_{c_l}^1 ∫_t^1 P̃_{k−2}.
        """
        R = as_nonnegative_int(R, "R", MAX_ASSUMPTION_ORDER)
        c, b = self.first.c, self.first.b
        aah = self.first.a @ self.second.a
        if _basis(basis) == "monomial":
            k = np.arange(2, max(R, 1) + 1)[:, None]
            lhs = (b[None, :] * c[None, :] ** (k - 2)) @ aah
            rhs = b[None, :] * ((k - 1) - (k * c[None, :] - c[None, :] ** k)) / (k * (k - 1))
            return lhs - rhs
        n = max(R - 1, 0)
        P, _, J = legendre_tables(c, n)
        _, I1, J1 = legendre_tables(np.ones(1), n)
        # ∫_{c}^1 ∫_t^1 p = I(1)(1 − c) − (J(1) − J(c))
        rhs = b[None, :] * (I1 * (1.0 - c[None, :]) - (J1 - J))
        return (P * b[None, :]) @ aah - rhs

    def satisfies_CC_hat(self, Q: int, tol: float = SIMPLIFYING_TOL) -> bool:
        """CĈ(Q) (vacuous for Q ≤ 1)."""
        return bool(np.all(np.abs(self.CC_hat_residual(Q)) <= as_tolerance(tol)))

    def satisfies_DD_hat(self, R: int, tol: float = SIMPLIFYING_TOL) -> bool:
        """DD̂(R) (vacuous for R ≤ 1)."""
        return bool(np.all(np.abs(self.DD_hat_residual(R)) <= as_tolerance(tol)))

    def mixed_orders(self, tol: float = SIMPLIFYING_TOL) -> MixedOrders:
        """Largest Q, R with CĈ(Q), DD̂(R), ĈC, D̂D (1 means only the vacuous case holds)."""
        cap = 2 * self.stages + 2
        t = as_tolerance(tol)

        def largest(res: np.ndarray) -> int:
            ok = np.abs(res).max(axis=1) <= t
            bad = np.flatnonzero(~ok)
            return int(bad[0]) + 1 if bad.size else cap

        sw = self.swapped()
        return MixedOrders(
            largest(self.CC_hat_residual(cap)),
            largest(self.DD_hat_residual(cap)),
            largest(sw.CC_hat_residual(cap)),
            largest(sw.DD_hat_residual(cap)),
        )

    # ------------------------------------------------------------------ constrained methods
    def satisfies_constrained_hypotheses(
        self, tol: float = SIMPLIFYING_TOL, cond_max: float = 1e12
    ) -> ConstrainedHypotheses:
        """Check H1, H2, H3 on ``first`` and H1', H2' on ``second`` (paper §4, App. A, Thm 5.1).

        H2 holds when the condition number of Ã = (a_ij)_{i,j≥2} is below ``cond_max``.
        """
        t = as_tolerance(tol)
        a, b = self.first.a, self.first.b
        ah, bh = self.second.a, self.second.b
        fails = []
        e1 = float(np.max(np.abs(a[0])))
        H1 = e1 <= t
        if not H1:
            fails.append(f"H1 (first row of a must vanish: max |a_1j| = {e1:.3g})")
        at = a[1:, 1:]
        cond = float(np.linalg.cond(at)) if at.size else 1.0
        H2 = bool(np.isfinite(cond) and cond < cond_max)
        if not H2:
            fails.append(f"H2 ((a_ij)_{{i,j≥2}} must be invertible: condition number {cond:.3g})")
        e3 = float(np.max(np.abs(a[-1] - b)))
        H3 = e3 <= t
        if not H3:
            fails.append(f"H3 (last row of a must equal b: max |a_sj − b_j| = {e3:.3g})")
        e1p = float(np.max(np.abs(ah[:, -1])))
        H1p = e1p <= t
        if not H1p:
            fails.append(f"H1' (last column of â must vanish: max |â_is| = {e1p:.3g})")
        e2p = float(np.max(np.abs(ah[:, 0] - bh[0])))
        H2p = e2p <= t
        if not H2p:
            fails.append(f"H2' (first column of â must equal b̂_1: max |â_i1 − b̂_1| = {e2p:.3g})")
        if fails:
            message = (
                f"{self.name} fails " + "; ".join(fails)
                + ". Use lobatto_iiia_iiib(s) or a stiffly accurate tableau with a zero first row "
                "and its symplectic conjugate."
            )
        else:
            message = f"{self.name} satisfies H1, H2, H3, H1' and H2'."
        return ConstrainedHypotheses(H1, H2, H3, H1p, H2p, message)

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        ind = "\n  "
        return (
            f"PartitionedTableau({self.name!r}, stages={self.stages})"
            + ind + repr(self.first).replace("\n", ind)
            + ind + repr(self.second).replace("\n", ind)
        )

    def to_latex(self, digits: int | None = None) -> str:
        """The two Butcher arrays side by side (LaTeX)."""
        return self.first.to_latex(digits) + r"\qquad" + "\n" + self.second.to_latex(digits)


def symplectic_pair(t: Tableau) -> PartitionedTableau:
    """``PartitionedTableau(t, symplectic_conjugate(t))``: a symplectic PRK built from t."""
    return PartitionedTableau(t, symplectic_conjugate(t), name=f"({t.name}, conjugate)")


def lobatto_iiia_iiib(s: int) -> PartitionedTableau:
    """The Lobatto IIIA–IIIB pair (s ≥ 2) used by every constrained method (paper §4, App. A).

    ``first`` is Lobatto IIIA (a, b, c), ``second`` is Lobatto IIIB (â, b̂, ĉ) = its symplectic
    conjugate (both built in high precision). Symplectic; order 2s − 2; H1–H3 and H1'–H2'
    hold exactly; CĈ(s), DD̂(s), ĈC(s−2), D̂D(s−2).
    """
    return PartitionedTableau(lobatto_iiia(s), lobatto_iiib(s), name=f"Lobatto IIIA–IIIB({s})")
