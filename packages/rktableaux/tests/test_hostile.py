"""Hostile input to every public entry point of chetaev.rktableaux (issue 21).

Table-driven: constructors, families, analyses and tables are called with wrong shapes,
wrong dtypes (complex, boolean, strings, objects), NaN/inf, invalid values (negative or
non-integer orders, stage counts beyond MAX_STAGES, tree orders beyond 20) and mismatched
sizes.  Each case must raise :class:`TableauError` (a ``ValueError``) whose message names the
offending argument.  ``classify()`` (run this file as a script) counts the verdicts: GOOD =
TableauError naming the argument, POOR = any other exception or an unnamed argument, BAD = a
value returned.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from chetaev.rktableaux import (
    MAX_STAGES,
    PartitionedTableau,
    Tableau,
    TableauError,
    bicoloured_trees,
    gauss,
    lobatto_iiia,
    lobatto_iiia_iiib,
    lobatto_iiib,
    lobatto_iiic,
    lobatto_iiic_star,
    properties_table,
    radau_ia,
    radau_iia,
    rooted_trees,
    symplectic_conjugate,
    symplectic_pair,
)

FAMILIES = [gauss, radau_ia, radau_iia, lobatto_iiia, lobatto_iiib, lobatto_iiic,
            lobatto_iiic_star, lobatto_iiia_iiib]
T = gauss(2)
P = lobatto_iiia_iiib(2)

_BAD_ARRAYS = [
    ("complex", lambda x: np.asarray(x) + 0.5j),
    ("complex-zero-imag", lambda x: np.asarray(x, dtype=complex)),
    ("bool", lambda x: np.ones(np.shape(x), dtype=bool)),
    ("strings", lambda x: np.full(np.shape(x), "a")),
    ("object", lambda x: np.full(np.shape(x), object())),
    ("nan", lambda x: np.full(np.shape(x), np.nan)),
    ("inf", lambda x: np.full(np.shape(x), np.inf)),
]


def _cases():
    cases = []
    a, b, c = T.a, T.b, T.c
    for label, f in _BAD_ARRAYS:
        cases += [
            (f"Tableau[a={label}]", (lambda f=f: Tableau(f(a), b)), "a"),
            (f"Tableau[b={label}]", (lambda f=f: Tableau(a, f(b))), "b"),
            (f"Tableau[c={label}]", (lambda f=f: Tableau(a, b, f(c))), "c"),
        ]
    cases += [
        ("Tableau[a=not-square]", lambda: Tableau(np.ones((2, 3)), b), "a"),
        ("Tableau[a=empty]", lambda: Tableau(np.ones((0, 0)), []), "a"),
        ("Tableau[b=wrong-length]", lambda: Tableau(a, np.ones(3)), "b"),
        ("Tableau[c=wrong-length]", lambda: Tableau(a, b, np.ones(3)), "c"),
    ]
    for label, z in [("nan", np.nan), ("inf", np.inf), ("nan-array", np.array([0.0, np.nan])),
                     ("complex-inf", complex(np.inf, 0)), ("string", "a"),
                     ("object", object()), ("bool", True)]:
        cases.append((f"stability_function[z={label}]",
                      (lambda z=z: T.stability_function(z)), "z"))
    for fam in FAMILIES:
        nm = fam.__name__
        for label, s in [("too-many", MAX_STAGES + 1), ("400", 400), ("zero", 0),
                         ("negative", -2), ("float", 2.0), ("bool", True), ("string", "3"),
                         ("none", None)]:
            cases.append((f"{nm}[s={label}]", (lambda fam=fam, s=s: fam(s)), "s"))
    for meth, arg in [("B_residual", "p"), ("C_residual", "q"), ("D_residual", "r"),
                      ("satisfies_B", "p"), ("satisfies_C", "q"), ("satisfies_D", "r"),
                      ("order_condition_residuals", "n"), ("failing_trees", "n")]:
        fn = getattr(T, meth)
        for label, k in [("negative", -1), ("float", 2.5), ("huge", 10**9), ("string", "2"),
                         ("bool", True)]:
            cases.append((f"Tableau.{meth}[{arg}={label}]", (lambda fn=fn, k=k: fn(k)), arg))
    for label, tol in [("nan", np.nan), ("negative", -1.0), ("zero", 0.0), ("inf", np.inf),
                       ("string", "x")]:
        for meth in ("satisfies_B", "satisfies_C", "satisfies_D"):
            cases.append((f"Tableau.{meth}[tol={label}]",
                          (lambda meth=meth, tol=tol: getattr(T, meth)(2, tol=tol)), "tol"))
        for meth in ("simplifying_orders", "stage_order", "is_symplectic", "is_symmetric",
                     "is_stiffly_accurate", "check_symplecticity"):
            cases.append((f"Tableau.{meth}[tol={label}]",
                          (lambda meth=meth, tol=tol: getattr(T, meth)(tol=tol)), "tol"))
        cases.append((f"Tableau.order[tol={label}]", (lambda tol=tol: T.order(tol=tol)), "tol"))
        cases.append((f"Pair.is_symplectic[tol={label}]",
                      (lambda tol=tol: P.is_symplectic(tol=tol)), "tol"))
        cases.append((f"Pair.mixed_orders[tol={label}]",
                      (lambda tol=tol: P.mixed_orders(tol=tol)), "tol"))
    for label, atol in [("nan", np.nan), ("negative", -1.0), ("string", "x")]:
        cases.append((f"Tableau.isclose[atol={label}]",
                      (lambda atol=atol: T.isclose(T, atol=atol)), "atol"))
    for label, m in [("negative", -1), ("float", 2.5), ("string", "4")]:
        cases.append((f"Tableau.order[max_order={label}]",
                      (lambda m=m: T.order(max_order=m)), "max_order"))
        cases.append((f"Pair.order[max_order={label}]",
                      (lambda m=m: P.order(max_order=m)), "max_order"))
    for label, k in [("negative", -1), ("float", 2.5), ("huge", 10**9)]:
        cases += [
            (f"Pair.CC_hat_residual[Q={label}]", (lambda k=k: P.CC_hat_residual(k)), "Q"),
            (f"Pair.DD_hat_residual[R={label}]", (lambda k=k: P.DD_hat_residual(k)), "R"),
            (f"Pair.order_condition_residuals[n={label}]",
             (lambda k=k: P.order_condition_residuals(k)), "n"),
        ]
    for label, m in [("21", 21), ("negative", -1), ("float", 2.5), ("string", "3")]:
        cases += [
            (f"rooted_trees[max_order={label}]", (lambda m=m: rooted_trees(m)), "max_order"),
            (f"bicoloured_trees[max_order={label}]", (lambda m=m: bicoloured_trees(m)),
             "max_order"),
        ]
    for label, d in [("negative", -1), ("zero", 0), ("float", 2.5), ("string", "3")]:
        cases.append((f"Tableau.to_latex[digits={label}]",
                      (lambda d=d: T.to_latex(digits=d)), "digits"))
        cases.append((f"Pair.to_latex[digits={label}]",
                      (lambda d=d: P.to_latex(digits=d)), "digits"))
    cases += [
        ("Tableau.B_residual[basis=unknown]", lambda: T.B_residual(2, basis="x"), "basis"),
        ("symplectic_conjugate[t=str]", lambda: symplectic_conjugate("x"), "Tableau"),
        ("symplectic_conjugate[t=b_i=0]",
         lambda: symplectic_conjugate(Tableau([[0, 0], [0.5, 0]], [1, 0])), "b"),
        ("symplectic_pair[t=str]", lambda: symplectic_pair(None), "Tableau"),
        ("PartitionedTableau[first=str]", lambda: PartitionedTableau("x", T), "first"),
        ("PartitionedTableau[second=array]", lambda: PartitionedTableau(T, np.eye(2)),
         "second"),
        ("PartitionedTableau[stages-mismatch]", lambda: PartitionedTableau(T, gauss(3)),
         "stages"),
        ("properties_table[stages=too-many]", lambda: properties_table([MAX_STAGES + 1]), "s"),
        ("properties_table[stages=string]", lambda: properties_table("ab"), "s"),
        ("properties_table[stages=float]", lambda: properties_table([2.5]), "s"),
    ]
    return cases


CASES = _cases()


def _names_argument(msg: str, arg: str) -> bool:
    return arg in msg


@pytest.mark.parametrize(("thunk", "arg"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_raises_typed_error_naming_argument(thunk, arg):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning / RuntimeWarning on the way
        with pytest.raises(TableauError) as info:
            thunk()
    assert _names_argument(str(info.value), arg), str(info.value)


def test_stage_limit_is_fast_and_says_why():
    """gauss(400) used to run for minutes: now refused at once, naming the limit and the fix."""
    t0 = time.perf_counter()
    with pytest.raises(TableauError, match=r"s <= 16 \(MAX_STAGES\).*Tableau\(a, b, c\)"):
        gauss(400)
    assert time.perf_counter() - t0 < 1.0
    assert gauss(MAX_STAGES).stages == MAX_STAGES  # the limit itself builds


def test_complex_stability_argument_still_allowed():
    """Complex z is legitimate (stability regions); only non-finite or non-numeric z is refused."""
    z = np.array([-1.0 + 2.0j, 0.5j])
    assert np.all(np.isfinite(T.stability_function(z)))


def classify(cases=None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"GOOD": [], "POOR": [], "BAD": []}
    for cid, thunk, arg in cases or CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                thunk()
            except TableauError as exc:
                out["GOOD" if _names_argument(str(exc), arg) else "POOR"].append(cid)
                continue
            except Exception as exc:
                out["POOR"].append(f"{cid}: {type(exc).__name__}: {str(exc)[:80]}")
                continue
        out["BAD"].append(cid)
    return out


if __name__ == "__main__":
    import sys

    v = classify()
    print({k: len(x) for k, x in v.items()})
    if "-v" in sys.argv:
        for k in ("POOR", "BAD"):
            for cid in v[k]:
                print(k, cid)
