"""``compiled_source`` / ``compiled_support``: the group's maps as numba source text.

The numeric agreement of every compiled map with the numpy kernels it mirrors is tested where
numba is installed (``chetaev-discrete-lagrangian``'s ``tests/test_compiled_lie.py``); here,
without numba, the source must define every map for each supported group and parse, and an
unsupported pair must give a reason naming what is supported.
"""

import ast

import pytest
from chetaev.liegroups import (
    S2,
    SE2,
    SE3,
    SO2,
    SO3,
    Product,
    Rn,
    compiled_source,
    compiled_support,
)

MAPS = ("grp_tau", "grp_dL", "grp_tensor", "grp_S", "grp_Ad_pair", "grp_compose", "grp_coad")
SUPPORTED = [(SO3, "cayley"), (SE2, "cayley"), (SE3, "cayley"), (Product(SO3, Rn(2)), "cayley"),
             (SO3, "exp"), (SE2, "exp"), (SE3, "exp"), (SO2, "exp"),
             (Product(SE2, SO2, Rn(1)), "exp")]


@pytest.mark.parametrize(("group", "kind"), SUPPORTED,
                         ids=[f"{g.name}-{k}" for g, k in SUPPORTED])
def test_source_defines_every_map(group, kind):
    assert compiled_support(group, kind) == ""
    tree = ast.parse(compiled_source(group, kind))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert set(MAPS) <= defined


@pytest.mark.parametrize(("group", "kind", "says"), [
    (S2, "exp", "S2"), (Rn(3), "cayley", "R3"), (SO3, "pade", "'cayley' and 'exp'")])
def test_unsupported_pairs_give_the_reason(group, kind, says):
    why = compiled_support(group, kind)
    assert says in why
    with pytest.raises(ValueError, match="no compiled source"):
        compiled_source(group, kind)
