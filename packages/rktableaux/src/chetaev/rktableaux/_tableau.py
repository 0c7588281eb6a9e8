"""The :class:`Tableau` value class: Butcher coefficients plus every computed property.

High-order paper §4.2–4.3 (notation, symplectic conjugate) and App. B (simplifying
assumptions B, C, D, stability function); paper App. A (eqs. 41–45) and App. B (eq. 51).
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import NamedTuple

import attrs
import mpmath
import numpy as np

from ._errors import OrderLimitWarning, TableauError
from ._legendre import legendre_tables
from ._trees import elementary_weights, rooted_trees
from ._validation import (
    MAX_ASSUMPTION_ORDER,
    as_digits,
    as_matrix,
    as_nonnegative_float,
    as_nonnegative_int,
    as_tolerance,
    as_vector,
    readonly,
)

_ASSUMPTION_WHY = " (MAX_ASSUMPTION_ORDER: no tableau of s <= 128 stages satisfies more)"

__all__ = ["DEFAULT_MAX_ORDER", "SimplifyingOrders", "Tableau"]

#: Trees are enumerated up to this order by :meth:`Tableau.order` (7813 trees); higher orders
#: are certified by Butcher's theorem B(p) ∧ C(η) ∧ D(ζ), p ≤ min(η+ζ+1, 2η+2) ⇒ order p.
DEFAULT_MAX_ORDER = 12
#: default tolerance of the simplifying assumptions (absolute; all quantities are O(1))
SIMPLIFYING_TOL = 1e-12
#: default tolerance of the tree order conditions, relative to the absolute elementary weight
ORDER_TOL = 1e-12


class SimplifyingOrders(NamedTuple):
    """Largest k such that B(k), C(k), D(k) hold (capped at ``2s + 2``)."""

    B: int
    C: int
    D: int


def _basis(basis: str) -> str:
    if basis not in ("legendre", "monomial"):
        raise TableauError(f"basis must be 'legendre' or 'monomial'; got {basis!r}.")
    return basis


def _c_default(a: np.ndarray) -> np.ndarray:
    return a.sum(axis=1)


def _format_number(x: float, width: int = 0) -> str:
    if x == 0:
        txt = "0"
    else:
        txt = f"{x:.6g}"
    return txt.rjust(width) if width else txt


def _as_stability_argument(z) -> np.ndarray:
    kind = getattr(getattr(z, "dtype", None), "kind", None)
    if kind is None:
        try:
            kind = np.asarray(z).dtype.kind
        except (TypeError, ValueError):
            kind = "O"
    if kind not in ("f", "i", "u", "c"):
        raise TableauError(
            "stability_function: `z` must be a real or complex number or array; got "
            f"{type(z).__name__} of dtype kind {kind!r}. Pass floats or complex numbers."
        )
    z = np.asarray(z)
    if not np.all(np.isfinite(z)):
        raise TableauError(
            "stability_function: `z` contains NaN or inf; R(z) is defined for finite z only "
            "(for z -> infinity use the R_inf property)."
        )
    return z


@attrs.frozen(eq=False, repr=False, slots=False)
class Tableau:
    r"""A Runge–Kutta method given by its Butcher coefficients ``(a, b, c)``.

    One step of size h for y' = f(t, y) reads

    .. math::
        Y_i = y_0 + h \sum_j a_{ij} f(t_0 + c_i h, Y_j), \qquad
        y_1 = y_0 + h \sum_i b_i f(t_0 + c_i h, Y_i).

    Parameters
    ----------
    a : (s, s) array_like
        Stage coefficients.
    b : (s,) array_like
        Weights.
    c : (s,) array_like, optional
        Nodes; by default the row sums of ``a``. Explicit nodes are accepted even when they
        differ from the row sums (Lobatto IIIB with s = 2 has c = (0, 1) and row sums ½): check
        Σ_j a_ij = c_i with :meth:`row_sum_residual` or ``satisfies_C(1)``.
    name : str
        A label used by ``repr`` and tables.

    Notes
    -----
    The arrays are float64 copies with the write flag cleared. Every property (order,
    simplifying assumptions, R(∞), symplecticity ...) is computed from the coefficients; none is
    stored. Each property comes as a residual (raw numbers), a predicate (``satisfies_*``,
    ``is_*``) and, where it is elementwise, a ``check_*`` boolean array. Two tableaux compare
    equal when their coefficients are identical (the name is ignored).

    Raises
    ------
    TableauError
        ``a`` not square, ``b``/``c`` of the wrong length, or non-finite values.
    """

    a: np.ndarray = attrs.field(converter=as_matrix)
    b: np.ndarray = attrs.field()
    c: np.ndarray | None = attrs.field(default=None)
    name: str = attrs.field(default="", converter=str)

    def __attrs_post_init__(self) -> None:
        s = self.a.shape[0]
        object.__setattr__(self, "b", as_vector(self.b, "b", s))
        if self.c is None:
            object.__setattr__(self, "c", readonly(_c_default(self.a)))
        else:
            object.__setattr__(self, "c", as_vector(self.c, "c", s))

    def __setstate__(self, state: dict) -> None:
        # pickle/deepcopy restore arrays writeable: copy them and clear the flag again
        self.__dict__.update(state)
        for key in ("a", "b", "c"):
            self.__dict__[key] = readonly(np.array(state[key], dtype=np.float64, copy=True))

    # ------------------------------------------------------------------ basic accessors
    @property
    def stages(self) -> int:
        """Number of stages s."""
        return int(self.a.shape[0])

    @property
    def is_explicit(self) -> bool:
        """True when a is strictly lower triangular (a_ij = 0 for j ≥ i)."""
        return bool(np.all(np.triu(self.a) == 0.0))

    @property
    def is_diagonally_implicit(self) -> bool:
        """True when a is lower triangular (a_ij = 0 for j > i), explicit methods included."""
        return bool(np.all(np.triu(self.a, 1) == 0.0))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tableau):
            return NotImplemented
        return (
            np.array_equal(self.a, other.a)
            and np.array_equal(self.b, other.b)
            and np.array_equal(self.c, other.c)
        )

    def __hash__(self) -> int:
        return hash((self.a.tobytes(), self.b.tobytes(), self.c.tobytes()))

    def isclose(self, other: Tableau, atol: float = 1e-14) -> bool:
        """Coefficients of ``other`` agree with ours to ``atol`` (same number of stages)."""
        atol = as_nonnegative_float(atol, "atol")
        if not isinstance(other, Tableau) or other.stages != self.stages:
            return False
        return bool(
            np.allclose(self.a, other.a, rtol=0, atol=atol)
            and np.allclose(self.b, other.b, rtol=0, atol=atol)
            and np.allclose(self.c, other.c, rtol=0, atol=atol)
        )

    # ------------------------------------------------------------------ simplifying assumptions
    def row_sum_residual(self) -> np.ndarray:
        """(s,) array Σ_j a_ij − c_i (zero for the usual consistent tableaux, = C(1))."""
        return self.a.sum(axis=1) - self.c

    def B_residual(self, p: int, basis: str = "legendre") -> np.ndarray:
        """(p,) residuals of B(p) (paper eq. 43).

        ``basis="monomial"``: Σ_i b_i c_i^{k−1} − 1/k, k = 1..p (the paper's form).
        ``basis="legendre"`` (default, used by the predicates): Σ_i b_i P̃_{k−1}(c_i) −
        ∫_0^1 P̃_{k−1} with the shifted Legendre polynomials P̃ — the same conditions after a
        triangular change of basis, but well-conditioned for large k.
        """
        p = as_nonnegative_int(p, "p", MAX_ASSUMPTION_ORDER, _ASSUMPTION_WHY)
        if _basis(basis) == "monomial":
            k = np.arange(1, p + 1)
            return (self.c[None, :] ** (k[:, None] - 1)) @ self.b - 1.0 / k
        P = legendre_tables(self.c, p)[0]
        exact = legendre_tables(np.ones(1), p)[1][:, 0]
        return P @ self.b - exact

    def C_residual(self, q: int, basis: str = "legendre") -> np.ndarray:
        """(q, s) residuals of C(q) (paper eq. 44).

        Monomial: Σ_j a_ij c_j^{k−1} − c_i^k / k; Legendre (default): Σ_j a_ij P̃_{k−1}(c_j) −
        ∫_0^{c_i} P̃_{k−1}, k = 1..q.
        """
        q = as_nonnegative_int(q, "q", MAX_ASSUMPTION_ORDER, _ASSUMPTION_WHY)
        if _basis(basis) == "monomial":
            k = np.arange(1, q + 1)[:, None]
            return (self.c[None, :] ** (k - 1)) @ self.a.T - self.c[None, :] ** k / k
        P, I, _ = legendre_tables(self.c, q)
        return P @ self.a.T - I

    def D_residual(self, r: int, basis: str = "legendre") -> np.ndarray:
        """(r, s) residuals of D(r) (paper eq. 45).

        Monomial: Σ_i b_i c_i^{k−1} a_ij − b_j (1 − c_j^k)/k; Legendre (default):
        Σ_i b_i P̃_{k−1}(c_i) a_ij − b_j ∫_{c_j}^1 P̃_{k−1}, k = 1..r.
        """
        r = as_nonnegative_int(r, "r", MAX_ASSUMPTION_ORDER, _ASSUMPTION_WHY)
        if _basis(basis) == "monomial":
            k = np.arange(1, r + 1)[:, None]
            lhs = (self.b[None, :] * self.c[None, :] ** (k - 1)) @ self.a
            return lhs - self.b[None, :] * (1.0 - self.c[None, :] ** k) / k
        P, I, _ = legendre_tables(self.c, r)
        I1 = legendre_tables(np.ones(1), r)[1]
        return (P * self.b[None, :]) @ self.a - self.b[None, :] * (I1 - I)

    def satisfies_B(self, p: int, tol: float = SIMPLIFYING_TOL) -> bool:
        """B(p): the weights integrate polynomials of degree < p exactly."""
        return bool(np.all(np.abs(self.B_residual(p)) <= as_tolerance(tol)))

    def satisfies_C(self, q: int, tol: float = SIMPLIFYING_TOL) -> bool:
        """C(q): every stage integrates polynomials of degree < q exactly on [0, c_i]."""
        return bool(np.all(np.abs(self.C_residual(q)) <= as_tolerance(tol)))

    def satisfies_D(self, r: int, tol: float = SIMPLIFYING_TOL) -> bool:
        """D(r): the adjoint stage conditions Σ_i b_i c_i^{k−1} a_ij = b_j(1 − c_j^k)/k."""
        return bool(np.all(np.abs(self.D_residual(r)) <= as_tolerance(tol)))

    def _largest(self, residual, tol: float) -> int:
        cap = 2 * self.stages + 2
        res = np.abs(residual(cap)).reshape(cap, -1).max(axis=1) <= as_tolerance(tol)
        bad = np.flatnonzero(~res)
        return int(bad[0]) if bad.size else cap

    def simplifying_orders(self, tol: float = SIMPLIFYING_TOL) -> SimplifyingOrders:
        """Largest (B, C, D) orders that hold to ``tol`` (each capped at 2s + 2)."""
        return SimplifyingOrders(
            self._largest(self.B_residual, tol),
            self._largest(self.C_residual, tol),
            self._largest(self.D_residual, tol),
        )

    def stage_order(self, tol: float = SIMPLIFYING_TOL) -> int:
        """Stage order: the largest q with B(q) and C(q) (Hairer–Wanner II, §IV.5)."""
        orders = self.simplifying_orders(tol)
        return min(orders.B, orders.C)

    # ------------------------------------------------------------------ order conditions
    def order_condition_residuals(self, n: int) -> np.ndarray:
        """Scaled residuals of Φ(t) = 1/γ(t) for all rooted trees of order ≤ n (paper eq. 51).

        The value for tree t is (Φ(t) − 1/γ(t)) / max(|Φ|(t), 1/γ(t)), where |Φ| is the
        elementary weight of (|a|, |b|): rounding in Φ stays at a few ulps of it. The trees are
        those of :func:`chetaev.rktableaux.rooted_trees` (same order).
        """
        n = as_nonnegative_int(n, "n")
        if n == 0:
            return np.zeros(0)
        trees = rooted_trees(max(n, DEFAULT_MAX_ORDER))
        phi = elementary_weights(trees, n, [self.a], [self.b])
        phi_abs = elementary_weights(trees, n, [np.abs(self.a)], [np.abs(self.b)])
        inv_gamma = 1.0 / trees.gamma[: trees.upto(n)]
        return (phi - inv_gamma) / np.maximum(phi_abs, inv_gamma)

    def failing_trees(self, n: int, tol: float = ORDER_TOL) -> list[str]:
        """Bracket notation of the trees of order ≤ n whose condition fails."""
        res = self.order_condition_residuals(n)
        trees = rooted_trees(max(n, DEFAULT_MAX_ORDER))
        return [trees.bracket(i) for i in np.flatnonzero(np.abs(res) > tol)]

    def order(self, max_order: int = DEFAULT_MAX_ORDER, tol: float = ORDER_TOL) -> int:
        """Classical order p, from the rooted-tree conditions Φ(t) = 1/γ(t), |t| ≤ p.

        All trees up to ``max_order`` are checked (paper App. B, eq. 51). When every one of
        them holds, the order is capped by the quadrature order (B) and certified by Butcher's
        theorem (B(p), C(η), D(ζ), p ≤ η + ζ + 1, p ≤ 2η + 2 ⇒ order ≥ p); if that still
        leaves a gap an :class:`OrderLimitWarning` is issued and the proven lower bound
        returned.
        """
        max_order = as_nonnegative_int(max_order, "max_order")
        tol = as_tolerance(tol)
        orders = self.simplifying_orders()
        pB = orders.B
        n = min(max_order, pB + 1)
        res = self.order_condition_residuals(n)
        trees = rooted_trees(max(n, DEFAULT_MAX_ORDER))
        bad = np.flatnonzero(np.abs(res) > tol)
        if bad.size:
            return int(trees.order[bad[0]]) - 1
        if n <= max_order and n == pB + 1:  # pragma: no cover - the bushy tree fails then
            return pB
        if pB <= max_order:
            return pB
        eta, zeta = orders.C, orders.D
        p_cert = min(pB, eta + zeta + 1, 2 * eta + 2)
        if p_cert == pB:
            return pB
        lower = max(max_order, p_cert)
        warnings.warn(
            f"{self.name or 'tableau'}: every order condition up to order {max_order} holds "
            f"and the quadrature order is {pB}; the order lies in [{lower}, {pB}]. "
            f"Pass a larger max_order to decide.",
            OrderLimitWarning,
            stacklevel=2,
        )
        return lower

    # ------------------------------------------------------------------ linear stability
    def stability_function(self, z):
        """R(z) = 1 + z bᵀ(I − zA)⁻¹𝟙 = det(I − zA + z𝟙bᵀ) / det(I − zA) (paper App. A.3).

        ``z`` is a scalar or an array (real or complex) of any shape, with finite entries
        (:class:`TableauError` otherwise); poles (1/z an eigenvalue of ``a``) give ±inf.
        """
        z = _as_stability_argument(z)
        s = self.stages
        zz = z[..., None, None]
        eye = np.eye(s)
        num = np.linalg.det(eye - zz * self.a + zz * np.outer(np.ones(s), self.b))
        den = np.linalg.det(eye - zz * self.a)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = num / den
        return out[()] if out.ndim == 0 else out

    @cached_property
    def R_inf(self) -> float:
        """lim_{z→∞} R(z), computed in 240-digit arithmetic; ``inf`` when |R(z)| → ∞."""
        s = self.stages
        with mpmath.workdps(240):
            A = mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in self.a])
            b = [mpmath.mpf(float(x)) for x in self.b]
            ones = mpmath.matrix([1] * s)

            def R(z):
                M = mpmath.eye(s) - z * A
                try:
                    y = mpmath.lu_solve(M, ones)
                except ZeroDivisionError:  # pragma: no cover - 1/z an eigenvalue of A
                    return mpmath.inf
                return 1 + z * mpmath.fsum(b[i] * y[i] for i in range(s))

            z1, z2 = mpmath.mpf(10) ** 40, mpmath.mpf(10) ** 80
            r1, r2 = R(z1), R(z2)
            if abs(r2) > mpmath.mpf(10) ** 30:
                return float("inf")
            # Richardson step removes the O(1/z) term of R(z) = R(∞) + C/z + ...
            r = (z2 * r2 - z1 * r1) / (z2 - z1)
            return 0.0 if abs(r) < mpmath.mpf(10) ** -60 else float(r)

    def is_A_stable_at_infinity(self) -> bool:
        """|R(∞)| ≤ 1 (the hypothesis of Thm 5.2, paper Thm. 5.1, Cor. 5.2.1)."""
        return bool(abs(self.R_inf) <= 1.0 + 1e-12)

    # ------------------------------------------------------------------ structure
    def symplecticity_residual(self) -> np.ndarray:
        """(s, s) matrix b_i a_ij + b_j a_ji − b_i b_j (zero iff symplectic; Thm 4.2)."""
        ba = self.b[:, None] * self.a
        return ba + ba.T - np.outer(self.b, self.b)

    def check_symplecticity(self, tol: float = SIMPLIFYING_TOL) -> np.ndarray:
        """Elementwise boolean test of :meth:`symplecticity_residual`."""
        return np.abs(self.symplecticity_residual()) <= as_tolerance(tol)

    def is_symplectic(self, tol: float = SIMPLIFYING_TOL) -> bool:
        """b_i a_ij + b_j a_ji = b_i b_j for all i, j (Cooper / Sanz-Serna condition)."""
        return bool(np.all(self.check_symplecticity(tol)))

    def symmetry_residual(self) -> tuple[np.ndarray, np.ndarray]:
        """(a_{s+1−i, s+1−j} + a_ij − b_j, b_{s+1−i} − b_i): zero for a symmetric method."""
        rev = self.a[::-1, ::-1]
        return rev + self.a - self.b[None, :], self.b[::-1] - self.b

    def is_symmetric(self, tol: float = SIMPLIFYING_TOL) -> bool:
        """The method is symmetric (self-adjoint, Φ_h⁻¹ = Φ_{−h}) by the stage-reversal test."""
        ra, rb = self.symmetry_residual()
        t = as_tolerance(tol)
        return bool(np.all(np.abs(ra) <= t) and np.all(np.abs(rb) <= t))

    def stiff_accuracy_residual(self) -> np.ndarray:
        """(s,) array a_sj − b_j (hypothesis H3)."""
        return self.a[-1] - self.b

    def is_stiffly_accurate(self, tol: float = SIMPLIFYING_TOL) -> bool:
        """a_sj = b_j for all j (the last stage is the step result; H3)."""
        return bool(np.all(np.abs(self.stiff_accuracy_residual()) <= as_tolerance(tol)))

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        s = self.stages
        cells = [[_format_number(x) for x in row] for row in self.a]
        bcells = [_format_number(x) for x in self.b]
        ccells = [_format_number(x) for x in self.c]
        w = max(len(t) for t in [*(x for row in cells for x in row), *bcells, *ccells])
        lines = [f"Tableau({self.name!r}, stages={s})"]
        for i in range(s):
            lines.append(
                "  " + ccells[i].rjust(w) + " | " + " ".join(t.rjust(w) for t in cells[i])
            )
        lines.append("  " + "-" * w + "-+-" + "-" * ((w + 1) * s - 1))
        lines.append("  " + " " * w + " | " + " ".join(t.rjust(w) for t in bcells))
        return "\n".join(lines)

    def to_latex(self, digits: int | None = None) -> str:
        r"""Butcher array as a LaTeX ``array`` (``digits`` significant digits, or shortest)."""
        digits = as_digits(digits)

        def fmt(x: float) -> str:
            if x == 0:
                return "0"
            return repr(float(x)) if digits is None else f"{x:.{int(digits)}g}"

        s = self.stages
        rows = [
            f"{fmt(self.c[i])} & " + " & ".join(fmt(x) for x in self.a[i]) + r" \\"
            for i in range(s)
        ]
        head = r"\begin{array}{c|" + "c" * s + "}"
        foot = [r"\hline", " & " + " & ".join(fmt(x) for x in self.b) + r" \\", r"\end{array}"]
        return "\n".join([head, *rows, *foot])
