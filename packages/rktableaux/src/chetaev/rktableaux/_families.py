"""Collocation-type families for any number of stages s, built in high precision.

Each family is defined by its nodes and the simplifying assumption(s) that determine a
(Hairer–Wanner II, §IV.5; high-order paper App. A–B). Everything is solved with
``mpmath`` at 60 + 2s digits and rounded to float64 once, so for s ≤ 8 every assumption the family
satisfies holds to 1e-14 in the rounded coefficients.

References
----------
* J. C. Butcher, "Implicit Runge–Kutta processes", Math. Comp. 18 (1964) — Gauss.
* B. L. Ehle, "On Padé approximations to the exponential function and A-stable methods for
  the numerical solution of initial value problems", Univ. Waterloo report (1969) — Radau IA,
  IIA, Lobatto IIIA, IIIB, IIIC.
* F. H. Chipman, "A-stable Runge–Kutta processes", BIT 11 (1971) — Lobatto IIIC*.
* E. Hairer, G. Wanner, "Solving Ordinary Differential Equations II", §IV.5 (the families and
  their simplifying assumptions); L. O. Jay (1996) for the Lobatto IIIA–IIIB pair.
"""

from __future__ import annotations

from functools import lru_cache

import mpmath
import numpy as np

from ._highprec import (
    DPS,
    legendre_guesses,
    legendre_shifted,
    mp_to_float,
    poly_roots_01,
    solve_C,
    solve_D,
    weights_B,
)
from ._tableau import Tableau
from ._validation import as_stage_count

__all__ = [
    "FAMILIES",
    "gauss",
    "lobatto_iiia",
    "lobatto_iiib",
    "lobatto_iiic",
    "lobatto_iiic_star",
    "radau_ia",
    "radau_iia",
]


# ---------------------------------------------------------------------- nodes
def _unit(n: int) -> np.ndarray:
    e = np.zeros(n + 1)
    e[n] = 1.0
    return e


def _gauss_nodes(s: int) -> list:
    """Zeros of P_s(2x − 1)."""
    return poly_roots_01(legendre_shifted(s), legendre_guesses(_unit(s)))


def _radau_right_nodes(s: int) -> list:
    """Zeros of P_s(2x−1) − P_{s−1}(2x−1): c_s = 1 (Radau IIA)."""
    ps, pm = legendre_shifted(s), [*legendre_shifted(s - 1), 0]
    diff = [x - y for x, y in zip(ps, pm)]
    # exact synthetic division by (x − 1)
    desc = diff[::-1]
    quot = [desc[0]]
    for coef in desc[1:-1]:
        quot.append(coef + quot[-1])
    assert quot[-1] + desc[-1] == 0, "x = 1 must be a root"
    guesses = legendre_guesses(_unit(s) - np.append(_unit(s - 1), 0.0), drop=1.0)
    return [*poly_roots_01(quot[::-1], guesses), mpmath.mpf(1)]


def _radau_left_nodes(s: int) -> list:
    """Zeros of P_s(2x−1) + P_{s−1}(2x−1): c_1 = 0 (Radau IA)."""
    ps, pm = legendre_shifted(s), [*legendre_shifted(s - 1), 0]
    tot = [x + y for x, y in zip(ps, pm)]
    assert tot[0] == 0, "x = 0 must be a root"
    guesses = legendre_guesses(_unit(s) + np.append(_unit(s - 1), 0.0), drop=0.0)
    return [mpmath.mpf(0), *poly_roots_01(tot[1:], guesses)]


def _lobatto_nodes(s: int) -> list:
    """0, 1 and the zeros of d/dx P_{s−1}(2x−1) (= x(x−1)J^{(1,1)}_{s−2}(2x−1), paper App. A)."""
    p = legendre_shifted(s - 1)
    dp = [k * p[k] for k in range(1, len(p))]
    guesses = legendre_guesses(np.polynomial.legendre.legder(_unit(s - 1))) if s > 2 else []
    return [mpmath.mpf(0), *poly_roots_01(dp, guesses), mpmath.mpf(1)]


# ---------------------------------------------------------------------- mp builders (cached)
@lru_cache(maxsize=64)
def _mp_family(kind: str, s: int):
    """(A, b, c) as mpmath objects for the family ``kind`` with s stages.

    The Vandermonde-type systems lose about 2s digits to conditioning (s ≲ 30), hence the
    working precision DPS + 2s.
    """
    with mpmath.workdps(DPS + 2 * s):
        if kind == "gauss":
            c = _gauss_nodes(s)
            b = weights_B(c)
            A = solve_C(c, s)
        elif kind == "radau_iia":
            c = _radau_right_nodes(s)
            b = weights_B(c)
            A = solve_C(c, s)
            for j in range(s):
                A[s - 1, j] = b[j]
        elif kind == "radau_ia":
            c = _radau_left_nodes(s)
            b = weights_B(c)
            A = solve_D(c, b)
        else:
            c = _lobatto_nodes(s)
            b = weights_B(c)
            if kind == "lobatto_iiia":
                A = solve_C(c, s)
                for j in range(s):
                    A[0, j] = 0
                    A[s - 1, j] = b[j]
            elif kind == "lobatto_iiib":
                A = solve_D(c, b)
                for i in range(s):
                    A[i, s - 1] = 0
                    A[i, 0] = b[0]
            elif kind == "lobatto_iiic":
                A = solve_C(c, s - 1, fixed={0: [b[0]] * s})
                for j in range(s):
                    A[s - 1, j] = b[j]
            elif kind == "lobatto_iiic_star":
                A = solve_C(c, s - 1, fixed={s - 1: [mpmath.mpf(0)] * s})
            else:  # pragma: no cover - internal
                raise KeyError(kind)
        return A, b, c


@lru_cache(maxsize=128)
def _build(kind: str, s: int, label: str) -> Tableau:
    """The rounded tableau (cached: Tableau is immutable, so callers may share it)."""
    A, b, c = _mp_family(kind, s)
    with mpmath.workdps(DPS):
        return Tableau(mp_to_float(A), mp_to_float(b), mp_to_float(c), name=f"{label}({s})")


# ---------------------------------------------------------------------- public families
def gauss(s: int) -> Tableau:
    """Gauss–Legendre collocation, s ≥ 1 stages.

    Nodes: zeros of P_s(2x − 1); defined by C(s) (collocation). Satisfies B(2s), C(s), D(s);
    order 2s, stage order s, symplectic, symmetric, R(∞) = (−1)^s.
    """
    s = as_stage_count(s, "gauss", 1)
    return _build("gauss", s, "Gauss")


def radau_ia(s: int) -> Tableau:
    """Radau IA, s ≥ 1 stages.

    Nodes: zeros of P_s(2x − 1) + P_{s−1}(2x − 1) (c_1 = 0); defined by D(s). Satisfies
    B(2s−1), C(s−1), D(s); order 2s − 1, R(∞) = 0.
    """
    s = as_stage_count(s, "radau_ia", 1)
    return _build("radau_ia", s, "Radau IA")


def radau_iia(s: int) -> Tableau:
    """Radau IIA, s ≥ 1 stages.

    Nodes: zeros of P_s(2x − 1) − P_{s−1}(2x − 1) (c_s = 1); defined by C(s) (collocation).
    Satisfies B(2s−1), C(s), D(s−1); order 2s − 1, stiffly accurate, R(∞) = 0.
    """
    s = as_stage_count(s, "radau_iia", 1)
    return _build("radau_iia", s, "Radau IIA")


def lobatto_iiia(s: int) -> Tableau:
    """Lobatto IIIA (continuous collocation, paper eq. 41), s ≥ 2 stages.

    Nodes: 0, 1 and the zeros of P'_{s−1}(2x − 1) (paper App. A); defined by C(s):
    a_ij = ∫_0^{c_i} ℓ_j, b_j = ∫_0^1 ℓ_j. Satisfies B(2s−2), C(s), D(s−2); H1 (first row
    zero) and H3 (stiffly accurate) hold exactly; order 2s − 2, R(∞) = (−1)^{s−1}.
    """
    s = as_stage_count(s, "lobatto_iiia", 2)
    return _build("lobatto_iiia", s, "Lobatto IIIA")


def lobatto_iiib(s: int) -> Tableau:
    """Lobatto IIIB (discontinuous collocation), s ≥ 2 stages.

    Lobatto nodes; defined by D(s), which makes it the symplectic conjugate of Lobatto IIIA
    (â_ij = b_j(1 − a_ji/b_i), paper §4, App. A). Satisfies B(2s−2), C(s−2), D(s); last column zero
    and first column b_1 (H1', H2') exactly; order 2s − 2.
    """
    s = as_stage_count(s, "lobatto_iiib", 2)
    return _build("lobatto_iiib", s, "Lobatto IIIB")


def lobatto_iiic(s: int) -> Tableau:
    """Lobatto IIIC, s ≥ 2 stages.

    Lobatto nodes; defined by a_i1 = b_1 for all i and C(s−1). Satisfies B(2s−2), C(s−1),
    D(s−1); stiffly accurate, order 2s − 2, R(∞) = 0.
    """
    s = as_stage_count(s, "lobatto_iiic", 2)
    return _build("lobatto_iiic", s, "Lobatto IIIC")


def lobatto_iiic_star(s: int) -> Tableau:
    """Lobatto IIIC* (Chipman), s ≥ 2 stages.

    Lobatto nodes; defined by a_is = 0 for all i and C(s−1). Satisfies B(2s−2), C(s−1),
    D(s−1); order 2s − 2; explicit for s = 2. Symplectic conjugate of Lobatto IIIC.
    """
    s = as_stage_count(s, "lobatto_iiic_star", 2)
    return _build("lobatto_iiic_star", s, "Lobatto IIIC*")


#: the families of any number of stages, by display name
FAMILIES = {
    "Gauss": gauss,
    "Radau IA": radau_ia,
    "Radau IIA": radau_iia,
    "Lobatto IIIA": lobatto_iiia,
    "Lobatto IIIB": lobatto_iiib,
    "Lobatto IIIC": lobatto_iiic,
    "Lobatto IIIC*": lobatto_iiic_star,
}
