"""Hostile input to every public entry point of chetaev.liegroups (issue 21).

Table-driven: every public function that takes user data is called with wrong shapes, wrong
dtypes (complex, boolean, strings/objects), NaN/inf, invalid values (non-group elements,
non-tangent vectors, off-sphere points, matrices outside the algebra) and mismatched batches.
Each case must raise :class:`LieGroupError` (a ``ValueError``) whose message names the
offending argument in backquotes (or, for a bad constructor argument, the argument name).

``CASES`` is also used by ``classify`` below (run this file as a script) to count verdicts:
GOOD = LieGroupError naming the argument, POOR = any other exception (or a typed error that
does not name the argument), BAD = a value returned.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from chetaev.liegroups import (
    S2,
    SE2,
    SE3,
    SO2,
    SO3,
    LieGroupError,
    Product,
    Rn,
    Sphere2,
    retraction,
)

GROUPS = [SO2, SO3, SE2, SE3, Rn(3), Product(SO3, Rn(2))]

_RNG = np.random.default_rng(12345)


def _good_element(G, batch=()):
    return G.random(np.random.default_rng(7), batch)


def _good_algebra(G, batch=()):
    return 0.3 * np.random.default_rng(8).normal(size=(*batch, G.dim))


def _bad_elements(G):
    """(label, value) pairs that are not valid elements of G."""
    g = _good_element(G)
    out = [
        ("wrong-shape", np.zeros((*G.shape[:-1], G.shape[-1] + 1))),
        ("complex", g.astype(complex)),
        ("bool", np.ones(G.shape, dtype=bool)),
        ("strings", np.full(G.shape, "a")),
        ("nan", np.full(G.shape, np.nan)),
        ("inf", np.where(np.eye(*G.shape) if len(G.shape) == 2 else np.ones(G.shape, bool),
                         np.inf, g)),
    ]
    if G.shape == (G.matrix_dim, G.matrix_dim):  # matrix groups: off the group
        off = g.copy()
        off[..., 0, 0] *= 1.5
        out.append(("non-element", off))
    return out


def _bad_algebra(G):
    xi = _good_algebra(G)
    return [
        ("wrong-shape", np.zeros(G.dim + 1)),
        ("complex", xi + 1j),
        ("bool", np.ones(G.dim, dtype=bool)),
        ("object", np.array([object()] * G.dim)),
        ("nan", np.full(G.dim, np.nan)),
        ("inf", np.full(G.dim, -np.inf)),
    ]


def _bad_algebra_matrix(G):
    n = G.matrix_dim
    return [
        ("wrong-shape", np.zeros((n + 1, n + 1))),
        ("complex", G.hat(_good_algebra(G)) + 0j),
        ("nan", np.full((n, n), np.nan)),
    ]


def _element_cases(G):
    """Functions of group elements: (name, fn(args) -> value, arg names)."""
    tau_e, tau_c = retraction(G, "exp"), retraction(G, "cayley")
    fns = [
        ("compose", G.compose, ("g", "h")),
        ("between", G.between, ("g", "h")),
        ("inverse", G.inverse, ("g",)),
        ("Ad", G.Ad, ("g",)),
        ("Ad_star", G.Ad_star, ("g",)),
        ("as_matrix", G.as_matrix, ("g",)),
        ("log", G.log, ("g",)),
        ("cay_inv", G.cay_inv, ("g",)),
        ("exp.inv", tau_e.inv, ("g",)),
        ("cayley.inv", tau_c.inv, ("g",)),
    ]
    if hasattr(G, "element_parts"):
        fns.append(("element_parts", G.element_parts, ("g",)))
    return fns


def _algebra_cases(G):
    out = [
        ("hat", G.hat, ("xi",)),
        ("ad", G.ad, ("xi",)),
        ("ad_star", G.ad_star, ("xi",)),
        ("bracket", G.bracket, ("xi", "eta")),
        ("exp", G.exp, ("xi",)),
        ("cay", G.cay, ("xi",)),
        ("exp_dL", G.exp_dL, ("xi",)),
        ("exp_dL_inv", G.exp_dL_inv, ("xi",)),
        ("exp_dL_deriv", G.exp_dL_deriv, ("xi", "eta")),
        ("exp_dL_inv_deriv", G.exp_dL_inv_deriv, ("xi", "eta")),
        ("exp_dL_hess", G.exp_dL_hess, ("xi", "eta", "u")),
        ("cay_dL", G.cay_dL, ("xi",)),
        ("cay_dL_inv", G.cay_dL_inv, ("xi",)),
        ("cay_dL_deriv", G.cay_dL_deriv, ("xi", "eta")),
        ("cay_dL_inv_deriv", G.cay_dL_inv_deriv, ("xi", "eta")),
        ("cay_dL_hess", G.cay_dL_hess, ("xi", "eta", "u")),
    ]
    if hasattr(G, "split"):
        out.append(("split", G.split, ("xi",)))
    if G is SO3:
        out += [
            ("exp_dL_third", SO3.exp_dL_third, ("xi", "eta", "v", "u")),
            ("exp_dL_apply", SO3.exp_dL_apply, ("xi", "eta")),
        ]
    for kind in ("exp", "cayley"):
        t = retraction(G, kind)
        out += [
            (f"{kind}.tau", t, ("xi",)),
            (f"{kind}.dL", t.dL, ("xi",)),
            (f"{kind}.dR", t.dR, ("xi",)),
            (f"{kind}.dL_inv", t.dL_inv, ("xi",)),
            (f"{kind}.dR_inv", t.dR_inv, ("xi",)),
            (f"{kind}.dL_deriv", t.dL_deriv, ("xi", "eta", "mu")),
            (f"{kind}.dR_deriv", t.dR_deriv, ("xi", "eta", "mu")),
            (f"{kind}.dL_inv_deriv", t.dL_inv_deriv, ("xi", "eta", "mu")),
            (f"{kind}.dR_inv_deriv", t.dR_inv_deriv, ("xi", "eta", "mu")),
            (f"{kind}.dL_hess", t.dL_hess, ("xi", "eta", "u")),
            (f"{kind}.dR_hess", t.dR_hess, ("xi", "eta", "u")),
            (f"{kind}.dL_inv_hess", t.dL_inv_hess, ("xi", "eta", "u")),
            (f"{kind}.dR_inv_hess", t.dR_inv_hess, ("xi", "eta", "u")),
            (f"{kind}.ddL", t.ddL, ("xi", "eta")),
            (f"{kind}.ddL_star", t.ddL_star, ("xi", "eta", "pi")),
        ]
    return out


def _cases():
    cases = []  # (id, thunk, argument name)
    for G in GROUPS:
        for fname, fn, args in _element_cases(G):
            good = {a: _good_element(G) for a in args}
            for a in args:
                for label, bad in _bad_elements(G):
                    kw = dict(good, **{a: bad})
                    cases.append((f"{G.name}.{fname}[{a}={label}]",
                                  (lambda fn=fn, kw=kw, args=args: fn(*[kw[x] for x in args])),
                                  a))
            if len(args) == 2:
                kw = {args[0]: _good_element(G, (2,)), args[1]: _good_element(G, (3,))}
                cases.append((f"{G.name}.{fname}[batch-mismatch]",
                              (lambda fn=fn, kw=kw, args=args: fn(*[kw[x] for x in args])),
                              args[1]))
        for fname, fn, args in _algebra_cases(G):
            params = list(inspect.signature(fn).parameters)
            if params[: len(args)] != list(args) and not fname.startswith(("exp.", "cayley.")):
                args = tuple(params[: len(args)])  # e.g. SO3.exp_dL_hess(xi, eta, v)
            good = {a: _good_algebra(G) for a in args}
            for a in args:
                for label, bad in _bad_algebra(G):
                    kw = dict(good, **{a: bad})
                    cases.append((f"{G.name}.{fname}[{a}={label}]",
                                  (lambda fn=fn, kw=kw, args=args: fn(*[kw[x] for x in args])),
                                  a))
            if len(args) >= 2:
                kw = {x: _good_algebra(G, (2,)) for x in args}
                kw[args[1]] = _good_algebra(G, (3,))
                cases.append((f"{G.name}.{fname}[batch-mismatch]",
                              (lambda fn=fn, kw=kw, args=args: fn(*[kw[x] for x in args])),
                              args[1]))
        for label, bad in _bad_algebra_matrix(G):
            cases.append((f"{G.name}.vee[X={label}]", (lambda G=G, bad=bad: G.vee(bad)), "X"))
        for label, bad in _bad_algebra_matrix(G):
            cases.append((f"{G.name}.from_matrix[M={label}]",
                          (lambda G=G, bad=bad: G.from_matrix(bad)), "M"))

    # products: from_parts / join
    P = Product(SO3, Rn(2))
    R = SO3.random(np.random.default_rng(1))
    skew = R.copy()
    skew[0, 1] += 0.1
    for label, parts in [
        ("non-orthogonal-block", [skew, np.zeros(2)]),
        ("nan-block", [np.full((3, 3), np.nan), np.zeros(2)]),
        ("complex-block", [R + 0j, np.zeros(2)]),
        ("wrong-shape-part", [R, np.zeros(3)]),
        ("batch-mismatch", [SO3.random(np.random.default_rng(2), 2), np.zeros((3, 2))]),
    ]:
        arg = "parts[1]" if label in ("wrong-shape-part", "batch-mismatch") else "parts[0]"
        cases.append((f"{P.name}.from_parts[{label}]",
                      (lambda parts=parts: P.from_parts(parts)), arg))
    cases.append((f"{P.name}.from_parts[count]", lambda: P.from_parts([R]), "parts"))
    cases.append((f"{P.name}.from_parts[array]", lambda: P.from_parts(np.eye(5)), "parts"))
    cases.append((f"{P.name}.join[batch-mismatch]",
                  lambda: P.join([np.zeros((2, 3)), np.zeros((3, 2))]), "parts[1]"))
    cases.append((f"{P.name}.join[wrong-shape]", lambda: P.join([np.zeros(3), np.zeros(3)]),
                  "parts[1]"))
    cases.append((f"{P.name}.join[complex]", lambda: P.join([np.zeros(3) + 1j, np.zeros(2)]),
                  "parts[0]"))

    # S^2
    g = SO3.random(np.random.default_rng(3))
    x = S2.random(np.random.default_rng(4))
    skew = g.copy()
    skew[0, 0] += 0.2
    normal = g @ S2.x0  # normal to S^2 at g x0
    bad_g = [("non-orthogonal", skew), ("nan", np.full((3, 3), np.nan)),
             ("wrong-shape", np.eye(4)), ("complex", g + 0j)]
    bad_x = [("off-sphere", 2.0 * x), ("nan", np.array([np.nan, 0, 1.0])),
             ("wrong-shape", np.ones(4)), ("complex", x + 0j)]
    bad_v = [("nan", np.array([np.inf, 0, 0])), ("wrong-shape", np.ones(2)),
             ("complex", x + 1j)]
    for label, bg in bad_g:
        cases += [
            (f"S2.project[g={label}]", (lambda bg=bg: S2.project(bg)), "g"),
            (f"S2.action[g={label}]", (lambda bg=bg: S2.action(bg, x)), "g"),
            (f"S2.velocity[g={label}]", (lambda bg=bg: S2.velocity(bg, x)), "g"),
            (f"S2.lift[g={label}]", (lambda bg=bg: S2.lift(bg, np.cross(normal, x))), "g"),
            (f"S2.pullback_gradient[g={label}]",
             (lambda bg=bg: S2.pullback_gradient(bg, x)), "g"),
        ]
    for label, bx in bad_x:
        cases += [
            (f"S2.action[x={label}]", (lambda bx=bx: S2.action(g, bx)), "x"),
            (f"S2.section[x={label}]", (lambda bx=bx: S2.section(bx)), "x"),
            (f"S2.inf_action[x={label}]", (lambda bx=bx: S2.inf_action(x, bx)), "x"),
            (f"S2.tangent_projector[x={label}]", (lambda bx=bx: S2.tangent_projector(bx)), "x"),
        ]
    for label, bv in bad_v:
        cases += [
            (f"S2.lift[v={label}]", (lambda bv=bv: S2.lift(g, bv)), "v"),
            (f"S2.velocity[eta={label}]", (lambda bv=bv: S2.velocity(g, bv)), "eta"),
            (f"S2.pullback_gradient[grad={label}]",
             (lambda bv=bv: S2.pullback_gradient(g, bv)), "grad"),
            (f"S2.inf_action[xi={label}]", (lambda bv=bv: S2.inf_action(bv, x)), "xi"),
            (f"S2.split[xi={label}]", (lambda bv=bv: S2.split(bv)), "xi"),
            (f"S2.hat[xi={label}]", (lambda bv=bv: S2.hat(bv)), "xi"),
        ]
    cases += [
        ("S2.lift[v=normal]", lambda: S2.lift(g, normal), "v"),
        ("S2.lift[batch-mismatch]",
         lambda: S2.lift(SO3.random(np.random.default_rng(5), 2), np.zeros((3, 3))), "v"),
        ("S2.action[batch-mismatch]",
         lambda: S2.action(SO3.random(np.random.default_rng(5), 2), S2.random(_RNG, 3)), "x"),
        ("Sphere2[x0=off-sphere]", lambda: Sphere2((0.0, 0.0, 2.0)), "x0"),
        ("Sphere2[x0=complex]", lambda: Sphere2(np.array([0, 0, 1.0 + 0j])), "x0"),
        ("retraction[kind=unknown]", lambda: retraction(SO3, "foo"), "kind"),
        ("retraction[kind=int]", lambda: retraction(SO3, 3), "kind"),
        ("retraction[group=str]", lambda: retraction("SO3", "exp"), "group"),
        ("Rn[n=0]", lambda: Rn(0), "n"),
        ("Rn[n=float]", lambda: Rn(2.5), "n"),
        ("Product[factor=str]", lambda: Product(SO3, "R2"), "factors"),
    ]
    return cases


CASES = _cases()


def _names_argument(msg: str, arg: str) -> bool:
    return f"`{arg}`" in msg or f"{arg} " in msg or f" {arg}" in msg


@pytest.mark.parametrize(("thunk", "arg"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_raises_typed_error_naming_argument(thunk, arg):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning / RuntimeWarning on the way
        with pytest.raises(LieGroupError) as info:
            thunk()
    assert _names_argument(str(info.value), arg), str(info.value)


def test_integer_input_is_accepted_and_exact():
    """Integer arrays are real data: converted exactly, not refused."""
    eye = np.eye(3, dtype=int)
    assert np.array_equal(SO3.compose(eye, eye), np.eye(3))
    assert np.array_equal(SO3.hat(np.array([1, 2, 3])), SO3.hat(np.array([1.0, 2.0, 3.0])))
    assert np.array_equal(retraction(SO3, "cayley")(np.zeros(3, dtype=np.int64)), np.eye(3))


def test_check_false_skips_value_checks_but_not_shapes():
    off = np.eye(3)
    off[0, 0] = 1.5
    assert np.array_equal(SO3.inverse(off, check=False), off.T)  # caller's responsibility
    with pytest.raises(LieGroupError, match="`g` with shape"):
        SO3.inverse(np.eye(4), check=False)
    tau = retraction(SO3, "exp")
    with pytest.raises(LieGroupError, match="`xi` with shape"):
        tau.dL_inv(np.zeros(4), check=False)


def test_vee_reads_the_algebra_part_of_any_matrix():
    """Documented projection (finite-difference code relies on it): vee(I + hat(xi)) = xi."""
    xi = np.array([0.1, -0.2, 0.3])
    # measured: exactly 0 (vee reads the entries back)
    assert np.allclose(SO3.vee(np.eye(3) + SO3.hat(xi)), xi, rtol=0, atol=1e-16)


def test_membership_tolerance_scales_with_dtype():
    """A float32-rounded rotation is an element in float32 (tolerance 3 sqrt(eps32) ~ 1e-3) but a
    matrix off by 1e-6 is refused in float64 (tolerance 3 sqrt(eps64) ~ 4.5e-8)."""
    R = SO3.random(np.random.default_rng(0))
    SO3.inverse(R.astype(np.float32))
    off = R * (1.0 + 1e-6)
    with pytest.raises(LieGroupError, match="tolerance 4e-08"):
        SO3.inverse(off)


def classify(cases=None) -> dict[str, list[str]]:
    """GOOD / POOR / BAD verdicts of ``cases`` (default: ``CASES``)."""
    out: dict[str, list[str]] = {"GOOD": [], "POOR": [], "BAD": []}
    for cid, thunk, arg in cases or CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                thunk()
            except LieGroupError as exc:
                out["GOOD" if _names_argument(str(exc), arg) else "POOR"].append(cid)
                continue
            except Exception as exc:
                out["POOR"].append(f"{cid}: {type(exc).__name__}: {str(exc)[:80]}")
                continue
        out["BAD"].append(cid)
    return out


if __name__ == "__main__":  # python tests/test_hostile.py: print the verdict counts
    import sys

    v = classify()
    print({k: len(x) for k, x in v.items()})
    if "-v" in sys.argv:
        for k in ("POOR", "BAD"):
            for cid in v[k]:
                print(k, cid)
