"""The properties table of every family, as reStructuredText (for the documentation)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ._explicit import EXPLICIT
from ._families import FAMILIES, lobatto_iiic, lobatto_iiic_star
from ._partitioned import PartitionedTableau, lobatto_iiia_iiib
from ._tableau import Tableau
from ._validation import as_stage_count

__all__ = ["properties_table"]


def _fmt_rinf(x: float) -> str:
    if np.isinf(x):
        return "∞"
    r = round(x)
    if abs(x - r) < 1e-10:
        return str(int(r))
    return f"{x:.4g}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _tableau_row(t: Tableau) -> list[str]:
    so = t.simplifying_orders()
    return [
        t.name,
        str(t.stages),
        str(t.order()),
        str(t.stage_order()),
        str(so.B),
        str(so.C),
        str(so.D),
        _fmt_rinf(t.R_inf),
        _yes(t.is_symplectic()),
        _yes(t.is_symmetric()),
        _yes(t.is_stiffly_accurate()),
    ]


def _pair_row(p: PartitionedTableau) -> list[str]:
    mo = p.mixed_orders()
    hyp = p.satisfies_constrained_hypotheses()
    return [
        p.name,
        str(p.stages),
        str(p.order()),
        _yes(p.is_symplectic()),
        str(mo.CC_hat),
        str(mo.DD_hat),
        str(mo.C_hatC),
        str(mo.D_hatD),
        _yes(hyp.all),
    ]


def _list_table(title: str, header: list[str], rows: list[list[str]], widths: str) -> str:
    lines = [
        f".. list-table:: {title}",
        "   :header-rows: 1",
        f"   :widths: {widths}",
        "",
    ]
    for row in [header, *rows]:
        first, *rest = row
        lines.append(f"   * - {first}")
        lines.extend(f"     - {cell}" for cell in rest)
    return "\n".join(lines)


def properties_table(stages: Iterable[int] = range(2, 6), explicit: bool = True) -> str:
    """reStructuredText tables of the computed properties of every family.

    Parameters
    ----------
    stages : the numbers of stages listed for each family (s ≥ 2).
    explicit : also list the fixed classical tableaux (Euler, RK4, Dormand–Prince ...).

    Returns
    -------
    str
        Two ``list-table`` directives: the one-tableau properties (order from the rooted-tree
        conditions, stage order, B/C/D orders, R(∞), symplectic, symmetric, stiffly accurate)
        and the partitioned pairs (order from the bi-coloured trees, symplecticity, mixed
        assumptions CĈ, DD̂, ĈC, D̂D, and H1–H3 ∧ H1'–H2'). Everything is computed on call.
    """
    stages = [as_stage_count(s, "properties_table", 2) for s in stages]
    rows = [_tableau_row(f(s)) for f in FAMILIES.values() for s in stages]
    if explicit:
        rows += [_tableau_row(f()) for f in EXPLICIT]
    header = [
        "method", "s", "order", "stage order", "B", "C", "D", "R(∞)",
        "symplectic", "symmetric", "stiffly accurate",
    ]
    single = _list_table(
        "Runge–Kutta tableaux (computed)", header, rows, "22 4 6 7 4 4 4 6 9 9 9"
    )
    pairs = [lobatto_iiia_iiib(s) for s in stages if 2 * s - 2 <= 8]
    pairs += [
        PartitionedTableau(lobatto_iiic(s), lobatto_iiic_star(s), name=f"Lobatto IIIC–IIIC*({s})")
        for s in stages
        if 2 * s - 2 <= 8
    ]
    prow = [_pair_row(p) for p in pairs]
    pheader = ["pair", "s", "order", "symplectic", "CĈ", "DD̂", "ĈC", "D̂D", "H1–H3, H1'–H2'"]
    double = _list_table(
        "Partitioned pairs (computed; order from bi-coloured trees up to 8)",
        pheader, prow, "30 4 6 9 5 5 5 5 12",
    )
    return single + "\n\n" + double + "\n"
