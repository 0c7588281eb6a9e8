"""Scalar kernels of left-trivialized systems for the compiled Lie backend (issue 17).

The system side of :mod:`chetaev.discrete_lagrangian.core._compiled_lie`: from the sympy
expressions of :func:`~chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian`
(ℓ(g, η), the nonholonomic Φ(g, η)) the left-trivialized derivatives (paper §6.1: the
configuration derivative is ``[j] = d/dε f(g·exp(ε E_j))|₀``, the builder's ``ltgrad``) are
emitted as scalar source text by the vector-space emitter's printer
(:func:`~chetaev.discrete_lagrangian.symbolic._kernel_emit._kernel_source`), with the group
element passed *flattened* (C order) as the kernel's ``q`` argument, so ``q[k]`` is
``g[k // K, k % K]`` of the ``K × K`` matrix. Each kernel is ``def NAME(q, v, out)``.

Kernels (``d = group.dim``, ``m`` constraints):

mechanical ℓ = ½ ηᵀ𝕀η − V(g) (``mechanical=True``, the constant 𝕀 in ``mass``)
    ``lt_force`` ``(d,)`` = −(left-trivialized ∇V), ``lt_force_jac`` ``(d, d)`` its
    left-trivialized derivative (``[i, j] = ∂F_i/∂g_j``): the engine's L*_g D₁ℓ and D₁₁ℓ.
general ℓ (``mechanical=False``)
    ``D1L, D2L`` ``(d,)``; ``D11L, D12L = ∂D1L/∂η, D21L, D22L`` ``(d, d)`` (left-trivialized
    in g, as ``TrivializedLagrangianSystem``).
nonholonomic Φ(g, η) (``constraint="velocity"``)
    ``phi`` ``(m,)``, ``phi_g`` ``(m, d)`` (left-trivialized), ``phi_v`` ``(m, d)``,
    ``phi_vg[a, i, j] = ∂(∂Φ_a/∂η_i)/∂g_j`` and ``phi_vv`` ``(m, d, d)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core._compiled_lie import LieKernelSet
from ._kernel_emit import _kernel_source

__all__ = ["emit_lie_kernels"]


def emit_lie_kernels(b: Any, ell: Any, system: Any, *, nonholonomic: list = (),
                     forced: bool = False) -> LieKernelSet | None:
    """The :class:`LieKernelSet` of a system built by ``from_trivialized_lagrangian`` (``b``
    its builder, ``ell`` the prepared ℓ, ``system`` the built system), or None when the group
    is stored as a vector (Rⁿ: use ``from_lagrangian``), a parameter is an array, or an
    expression has no ``math``-module form."""
    sp = b.sp
    group = b.group
    if b.array_syms or len(tuple(group.shape)) != 2:
        return None
    inner = getattr(system, "system", system)
    d = int(group.dim)
    gs = list(b.gsyms)  # flat, C order
    vs = list(b.v)
    zero = dict.fromkeys(vs, 0)
    inertia = getattr(inner, "inertia", None) if getattr(inner, "is_mechanical", False) else None
    if inertia is not None:
        V = -ell.xreplace(zero)
        gradV = b.ltgrad([V])
        parts = [("lt_force", [-e for e in gradV], (d,)),
                 ("lt_force_jac", [-e for e in b.ltgrad(gradV)], (d, d))]
    else:
        d1 = b.ltgrad([ell])
        d2 = b.grad([ell], vs)
        parts = [("D1L", d1, (d,)), ("D2L", d2, (d,)), ("D11L", b.ltgrad(d1), (d, d)),
                 ("D12L", b.grad(d1, vs), (d, d)), ("D21L", b.ltgrad(d2), (d, d)),
                 ("D22L", b.grad(d2, vs), (d, d))]
    m = len(nonholonomic)
    if m:
        pv = b.grad(list(nonholonomic), vs)
        parts += [("phi", list(nonholonomic), (m,)), ("phi_g", b.ltgrad(list(nonholonomic)),
                                                      (m, d)),
                  ("phi_v", pv, (m, d)), ("phi_vg", b.ltgrad(pv), (m, d, d)),
                  ("phi_vv", b.grad(pv, vs), (m, d, d))]
    try:
        sources = tuple(_kernel_source(sp, name, gs, vs, ex, shape) for name, ex, shape in parts)
    except Exception:  # a printer refusal: no compiled kernels for this system
        return None
    mass = None
    if inertia is not None:
        mass = tuple(map(tuple, np.asarray(inertia, dtype=float).tolist()))
    return LieKernelSet(
        source="\n\n".join(sources),
        names=tuple(name for name, _, _ in parts),
        n=d,
        m=m,
        constraint="velocity" if m else None,
        mechanical=inertia is not None,
        mass=mass,
        forced=bool(forced),
        group=group,
    )
