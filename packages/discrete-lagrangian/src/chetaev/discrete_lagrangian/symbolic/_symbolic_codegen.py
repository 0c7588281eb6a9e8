"""Code generation for :mod:`chetaev.discrete_lagrangian.symbolic`: sympy expressions to
broadcasting numpy functions.

A :class:`GeneratedFunction` holds the *source text* of one plain-numpy function (written
with common-subexpression elimination, ``sympy.cse``) and the values of the array parameters
it reads. It compiles the source when it is built and again when it is unpickled, so a
generated system pickles (the source is plain Python + numpy) and runs without sympy.

The function of ``(x_1, ..., x_k)`` (each with its core shape: ``(n,)`` for coordinates and
velocities, ``(k, k)`` for a group element) evaluates every entry over the broadcast leading
batch axes of its arguments and of the parameter arrays, and writes them into one output array
of shape ``(*batch, *out_shape)``: a constant entry is broadcast to the batch, a zero entry is
left at zero. A small batch (one trajectory: its point and its stages) without parameter
arrays is evaluated by a loop in Python floats and the ``math`` module instead, which is
several times cheaper there than numpy calls on tiny arrays; both paths compute the same
common subexpressions in the same order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["GeneratedFunction", "align_param", "broadcast_shapes", "generate_source"]


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """``numpy.broadcast_shapes`` with a fast path for equal or empty shapes (the common
    calls of a step: the numpy function costs a few µs, comparable to a small kernel)."""
    out = shapes[0]
    for s in shapes[1:]:
        if s == out or not s:
            continue
        out = s if not out else np.broadcast_shapes(out, s)
    return out


def align_param(p: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """Align a parameter array with the leading axes of the state batch ``batch``.

    A parameter of shape ``P`` and a state batch ``B`` whose leading axes are ``P`` (``B[:len(P)]
    == P``: the state batch plus trailing stage axes a method adds) get the parameter
    reshaped to ``P + (1,) * (len(B) - len(P))``; otherwise ordinary numpy broadcasting
    applies (trailing alignment).
    """
    k = p.ndim
    if k and len(batch) > k and batch[:k] == p.shape:
        return p.reshape(p.shape + (1,) * (len(batch) - k))
    return p


class GeneratedFunction:
    """A generated numpy function, picklable through its source text.

    Parameters
    ----------
    source : str
        Python source defining a function called ``name`` (numpy is ``numpy``, the parameter
        arrays are ``_P0``, ``_P1``, ...).
    name : str
        Name of the function in ``source``.
    params : tuple of ndarray
        Parameter arrays the function reads (batch axes broadcast against the state batch).
    """

    __slots__ = ("_fn", "name", "params", "source")

    def __init__(self, source: str, name: str, params: tuple = ()) -> None:
        self.source = source
        self.name = name
        self.params = tuple(params)
        namespace: dict[str, Any] = {"numpy": np, "math": math, "_align": align_param,
                                     "_bshape": broadcast_shapes}
        for i, p in enumerate(self.params):
            namespace[f"_P{i}"] = p
        exec(compile(source, f"<chetaev.symbolic:{name}>", "exec"), namespace)
        self._fn = namespace[name]

    def __call__(self, *args):
        return self._fn(*args)

    def __reduce__(self):
        return (GeneratedFunction, (self.source, self.name, self.params))

    def __repr__(self) -> str:
        return f"<generated function {self.name}>"


def generate_source(sympy: Any, name: str, args: list, out: Any, out_shape: tuple[int, ...],
                    params: list) -> str:
    """Source text of one broadcasting numpy function.

    Parameters
    ----------
    sympy : module
        The sympy module (imported lazily by the caller).
    name : str
        Function name.
    args : list of (str, int, dict)
        Per argument: its name, its number of core axes, and a map symbol -> index tuple
        inside the core (``(i,)`` for a vector entry, ``(a, b)`` for a matrix entry).
    out : sequence of sympy expressions
        The output entries in C order (``prod(out_shape)`` of them).
    out_shape : tuple of int
        Core shape of the output (``()`` for a scalar).
    params : list of sympy Symbol
        Array parameters (read from ``_P{i}``, aligned to the batch).
    """
    from sympy.printing.numpy import NumPyPrinter
    from sympy.printing.pycode import PythonCodePrinter

    exprs = [sympy.sympify(e) for e in out]
    used = set().union(*(e.free_symbols for e in exprs)) if exprs else set()
    names: dict[Any, Any] = {}
    lines = [f"def {name}({', '.join(a for a, _, _ in args)}):"]
    for a, _, _ in args:
        lines.append(f"    {a} = numpy.asarray({a}, dtype=float)")
    batch = ", ".join(f"{a}.shape[:{a}.ndim - {core}]" for a, core, _ in args)
    lines.append(f"    _b = _bshape({batch})" if len(args) > 1
                 else f"    _b = {args[0][0]}.shape[:{args[0][0]}.ndim - {args[0][1]}]")
    k = 0
    unpack_scalar: list[str] = []
    unpack_array: list[str] = []
    rows: list[str] = []
    for a, core, index in args:
        if any(sym in used for sym in index):
            rows.append(f"            _r{a} = {a}.reshape((_n,) + {a}.shape[{a}.ndim - {core}:])"
                        ".tolist()")
            unpack_scalar.append(f"                _s{a} = _r{a}[_i]")
        for sym, idx in index.items():
            if sym in used:
                local = sympy.Symbol(f"_x{k}")
                k += 1
                names[sym] = local
                unpack_scalar.append(
                    f"                {local} = _s{a}{''.join(f'[{i}]' for i in idx)}")
                unpack_array.append(f"    {local} = {a}[..., {', '.join(str(i) for i in idx)}]")
    param_lines = []
    for i, sym in enumerate(params):
        if sym in used:
            local = sympy.Symbol(f"_p{i}")
            names[sym] = local
            param_lines.append(f"    {local} = _align(_P{i}, _b)")
            param_lines.append(f"    _b = _bshape(_b, {local}.shape)")
    exprs = [e.xreplace(names) for e in exprs]
    # constant entries (zeros included) are written at once from a template array
    const = [e.is_number for e in exprs]
    varying = [(i, e) for i, e in enumerate(exprs) if not const[i]]
    temps, reduced = sympy.cse([e for _, e in varying], symbols=sympy.numbered_symbols("_t"))
    printer = NumPyPrinter({"fully_qualified_modules": True})
    template = [float(e) if c else 0.0 for e, c in zip(exprs, const)]
    shape = tuple(out_shape)
    head: list[str] = []
    if any(template):
        values = np.array(template).reshape(shape).tolist()
        head = [f"_K = numpy.array({values!r})", ""]
    # A few configurations and no parameter arrays (one trajectory: its point and its stages):
    # plain Python floats and the math module, one array built at the end. A numpy operation
    # on a small array costs ~1 µs whatever its size, a float operation ~50 ns, so the loop
    # is faster up to `small` configurations (the cost model of _small_batch). Arithmetic
    # the math module refuses (a pole, a log of 0, an overflow) falls through to the numpy
    # code below, which gives numpy's inf/nan.
    scalar = _scalar_code(PythonCodePrinter, unpack_scalar, temps, template, varying, reduced,
                          shape)
    if scalar is not None and not any(sym in used for sym in params):
        body, nested = scalar
        small = _small_batch(len(temps), len(varying), len(template), len(unpack_array))
        same = " and ".join(f"{a}.ndim - {core} == len(_b)" for a, core, _ in args)
        lines.append("    _n = math.prod(_b)")
        if not varying:  # a constant: copies of the template
            const_src = "_K" if head else f"numpy.zeros({shape!r})"
            lines.append("    if not _b:")
            lines.append(f"        return {const_src}.copy()")
        lines.append(f"    if _n <= {small} and {same}:")
        lines.append("        try:")
        lines += rows
        lines.append("            _res = []")
        lines.append("            for _i in range(_n):")
        lines += body
        lines.append(f"                _res.append({nested})")
        lines.append(f"            return numpy.array(_res, dtype=float).reshape(_b + {shape!r})")
        lines.append("        except (ArithmeticError, ValueError):")
        lines.append("            pass")
    lines += unpack_array + param_lines
    for t, e in temps:
        lines.append(f"    {t} = {printer.doprint(e)}")
    if not any(template):
        alloc = "empty" if len(varying) == len(exprs) else "zeros"
        lines.append(f"    _out = numpy.{alloc}(_b + {shape!r})")
    else:
        lines.append(f"    _out = numpy.empty(_b + {shape!r})")
        lines.append("    _out[...] = _K")
    for (i, _), e in zip(varying, reduced):
        idx = np.unravel_index(i, out_shape) if out_shape else ()
        where = ", ".join(["...", *(str(int(j)) for j in idx)])
        lines.append(f"    _out[{where}] = {printer.doprint(e)}")
    lines.append("    return _out")
    return "\n".join(head + lines) + "\n"


def _scalar_code(printer_cls, unpack, temps, template, varying, reduced, shape):
    """(body lines, output source) of the one-configuration branch, or None when an
    expression has no ``math``-module equivalent (the numpy branch alone is generated)."""
    try:
        spr = printer_cls({"fully_qualified_modules": True, "standard": "python3",
                           "strict": True})
        body = list(unpack) + [f"                {t} = {spr.doprint(e)}" for t, e in temps]
        entries = list(template)
        for (i, _), e in zip(varying, reduced):
            entries[i] = spr.doprint(e)
    except Exception:  # any printer refusal means: no scalar branch
        return None
    if any("numpy" in ln or "Not supported" in ln for ln in body + [str(e) for e in entries]):
        return None
    return body, _nest([repr(x) if isinstance(x, float) else x for x in entries], shape)


def _small_batch(n_temps: int, n_varying: int, n_entries: int, n_inputs: int) -> int:
    """Largest batch evaluated by the Python-float loop rather than numpy.

    Cost model (µs; measured on the project's models, single core): numpy ≈ 1 per operation,
    per entry written and per input extracted, + 3 fixed; the loop ≈ 0.05 per operation and
    per entry of the output list, + 0.5 per configuration.
    """
    numpy_cost = n_temps + n_varying + n_inputs + 3.0
    loop_cost = 0.05 * (n_temps + n_varying + n_entries) + 0.5
    return int(max(1, min(64, numpy_cost // loop_cost)))


def _nest(flat: list[str], shape: tuple[int, ...]) -> str:
    """Source of a nested list of ``shape`` from its C-order entries (source strings)."""
    if not shape:
        return flat[0]
    step = len(flat) // shape[0]
    return "[" + ", ".join(_nest(flat[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"
