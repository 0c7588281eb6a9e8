"""Scalar kernels for the compiled backend (issue 17): sympy expressions to plain-Python
source text that numba compiles.

Each kernel is ``def NAME(q, v, out):`` on 1-D float64 arrays ``q``, ``v`` (one
configuration), writing every entry of ``out`` (``(n,)``, ``(n, n)``, ``(m, n, n)``...) with
``math``-module arithmetic after common-subexpression elimination (``sympy.cse``). Scalar
parameters are already substituted (module constants); array parameters are not supported
(no kernels then). Generating kernels needs sympy only; numba is needed only to compile
them (:mod:`chetaev.discrete_lagrangian.core._kernels`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core._kernels import KernelSet

__all__ = ["emit_vector_kernels"]


def _kernel_source(sp: Any, name: str, qs: list, vs: list, exprs: list,
                   shape: tuple[int, ...]) -> str:
    """Source of one kernel writing the C-order ``exprs`` into ``out`` of ``shape``."""
    from sympy.printing.pycode import PythonCodePrinter

    printer = PythonCodePrinter({"fully_qualified_modules": True, "standard": "python3",
                                 "strict": True})
    exprs = [sp.sympify(e) for e in exprs]
    used = set().union(*(e.free_symbols for e in exprs)) if exprs else set()
    names: dict = {}
    lines = [f"def {name}(q, v, out):"]
    for arg, syms in (("q", qs), ("v", vs)):
        for i, s in enumerate(syms):
            if s in used:
                local = sp.Symbol(f"_{arg}{i}")
                names[s] = local
                lines.append(f"    {local} = {arg}[{i}]")
    exprs = [e.xreplace(names) for e in exprs]
    temps, reduced = sp.cse(exprs, symbols=sp.numbered_symbols("_t"))
    for t, e in temps:
        lines.append(f"    {t} = {printer.doprint(e)}")
    for flat, e in enumerate(reduced):
        idx = np.unravel_index(flat, shape) if shape else ()
        where = ", ".join(str(int(j)) for j in idx) if shape else "0"
        text = repr(float(e)) if e.is_number else printer.doprint(e)
        lines.append(f"    out[{where}] = {text}")
    if len(lines) == 1:
        lines.append("    pass")
    src = "\n".join(lines) + "\n"
    if "numpy" in src or "Not supported" in src:
        raise ValueError(f"kernel {name}: an expression has no math-module form")
    return src


def emit_vector_kernels(sp: Any, qs: list, vs: list, L: Any, *, nonholonomic: list = (),
                        holonomic: list = (), mass: np.ndarray | None = None,
                        forced: bool = False) -> KernelSet | None:
    """The :class:`KernelSet` of a system on Rⁿ built by ``from_lagrangian``, or None when an
    expression has no ``math``-module form.

    Kernels (``[i, j]`` as in ``SystemInterface``):
    ``D1L, D2L`` ``(n,)``; ``D11L``, ``D12L = ∂D1L/∂v``, ``D21L = ∂D2L/∂q``, ``D22L``
    ``(n, n)``; for velocity constraints ``phi`` ``(m,)``, ``phi_q``, ``phi_v`` ``(m, n)``,
    ``phi_vq[a, i, j] = ∂²Φ_a/∂v_i∂q_j``, ``phi_vv`` ``(m, n, n)``; for holonomic constraints
    ``hol_phi`` ``(m,)``, ``hol_jac`` ``(m, n)``, ``hol_hess`` ``(m, n, n)`` (functions of
    ``q``; ``v`` unused).
    """
    n = len(qs)

    def grad(exprs, syms):
        return [e.diff(s) for e in exprs for s in syms]

    d1 = grad([L], qs)
    d2 = grad([L], vs)
    parts = [
        ("D1L", d1, (n,)),
        ("D2L", d2, (n,)),
        ("D11L", grad(d1, qs), (n, n)),
        ("D12L", grad(d1, vs), (n, n)),
        ("D21L", grad(d2, qs), (n, n)),
        ("D22L", grad(d2, vs), (n, n)),
    ]
    m = 0
    kind = None
    if nonholonomic:
        m, kind = len(nonholonomic), "velocity"
        pv = grad(nonholonomic, vs)
        parts += [("phi", list(nonholonomic), (m,)), ("phi_q", grad(nonholonomic, qs), (m, n)),
                  ("phi_v", pv, (m, n)), ("phi_vq", grad(pv, qs), (m, n, n)),
                  ("phi_vv", grad(pv, vs), (m, n, n))]
    elif holonomic:
        m, kind = len(holonomic), "holonomic"
        jac = grad(holonomic, qs)
        parts += [("hol_phi", list(holonomic), (m,)), ("hol_jac", jac, (m, n)),
                  ("hol_hess", grad(jac, qs), (m, n, n))]
    mechanical = not any(e.free_symbols & set(vs) for _, ex, _ in parts[5:6] for e in ex)
    try:
        sources = tuple(_kernel_source(sp, name, qs, vs, ex, shape) for name, ex, shape in parts)
    except Exception:  # a printer refusal: no compiled kernels for this system
        return None
    return KernelSet(
        source="\n\n".join(sources),
        names=tuple(name for name, _, _ in parts),
        n=n,
        m=m,
        constraint=kind,
        mechanical=bool(mechanical),
        mass=None if mass is None else tuple(map(tuple, np.asarray(mass, float).tolist())),
        forced=bool(forced),
    )
