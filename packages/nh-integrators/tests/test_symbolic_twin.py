"""``vertical_disc(symbolic=True)``: the disc built by ``from_trivialized_lagrangian`` is the
hand-written model (every derivative block, the constraint and the multiplier) for both
constraints, on a seeded batch of states on SE(2) (needs sympy)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sympy")

from chetaev.discrete_lagrangian.testing import assert_systems_agree
from chetaev.liegroups import SE2
from chetaev.nh_integrators.testing import disc_initial, vertical_disc


@pytest.mark.parametrize("constraint", ["linear", "nonlinear"])
def test_symbolic_disc_is_the_hand_written_one(constraint: str) -> None:
    kw = {"mass": 1.3, "inertia_z": 0.7, "constraint": constraint}
    sym, hand = vertical_disc(**kw, symbolic=True), vertical_disc(**kw)
    g0, eta0 = disc_initial()
    assert_systems_agree(sym, hand, g0, eta0)
    rng = np.random.default_rng(9)
    g = g0 @ SE2.exp(0.5 * rng.standard_normal((4, 3)))
    assert_systems_agree(sym, hand, g, eta0 + 0.5 * rng.standard_normal((4, 3)))
