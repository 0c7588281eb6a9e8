"""Every system function broadcasts over leading batch axes: a batched evaluation equals
the element-by-element one (batch shapes (), (1,), (3, 1, 2))."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import HypothesisError, LieVPRK, integrate
from chetaev.discrete_lagrangian.testing import (
    assert_rounding_close,
    cartesian_pendulum,
    double_pendulum,
    heavy_top,
    henon_heiles,
)
from chetaev.liegroups import SO3
from chetaev.rktableaux import gauss

BATCHES = [(), (1,), (3, 1, 2)]
NAMES = ("lagrangian", "D1L", "D2L", "D11L", "D12L", "D21L", "D22L", "energy",
         "legendre", "acceleration")


def _inputs(system, batch, rng):
    n = system.n
    if getattr(system, "group", None) is not None:
        q = SO3.random(rng, batch)
    elif hasattr(system, "constraint"):  # Cartesian pendulum: a point on the circle
        th = rng.uniform(-2, 2, batch)
        q = np.stack([np.sin(th), -np.cos(th)], -1)
        v = rng.normal(size=batch)[..., None] * np.stack([np.cos(th), np.sin(th)], -1)
        return q, v
    else:
        q = rng.uniform(-0.5, 0.5, (*batch, n))
    return q, rng.normal(size=(*batch, n))


@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("model", ["henon_heiles", "double_pendulum", "double_pendulum_fd",
                                   "heavy_top", "cartesian_pendulum"])
def test_batched_evaluation_equals_elementwise(model, batch):
    system = {
        "henon_heiles": henon_heiles,
        "double_pendulum": double_pendulum,
        "double_pendulum_fd": lambda: double_pendulum(general=True, analytic=False),
        "heavy_top": heavy_top,
        "cartesian_pendulum": cartesian_pendulum,
    }[model]()
    rng = np.random.default_rng(11)
    q, v = _inputs(system, batch, rng)
    names = NAMES + (("multiplier",) if hasattr(system, "multiplier") else ())
    qcore = q.ndim - len(batch)
    for name in names:
        f = getattr(system, name)
        out = np.asarray(f(q, v))
        assert out.shape[: len(batch)] == batch, (name, out.shape)
        for idx in np.ndindex(*batch):
            one = np.asarray(f(q[idx] if qcore else q, v[idx]))
            # same formulas, batched vs one element: numpy may sum in another order (einsum/
            # matmul over n terms), so a rounding bound, norm-wise on the block's magnitude.
            # measured: worst 2.2e-16 = 0.094 of the bound (bitwise for most seeds; seed
            # offsets 0-7, OPENBLAS_NUM_THREADS=1 and unset): margin 10.6
            assert_rounding_close(out[idx], one, n_terms=system.n, what=f"{name}{idx}")


def test_lie_holonomic_needs_h1_h3():
    from chetaev.discrete_lagrangian import ConstrainedSystem, HolonomicConstraint

    e1 = np.array([1.0, 0.0, 0.0])
    c = HolonomicConstraint(lambda R: R[..., 2, :1],  # e₃·R e₁
                            lambda R: np.cross(e1, R[..., 2, :])[..., None, :])
    system = ConstrainedSystem(heavy_top(), c)
    R0 = SO3.exp(np.array([0.0, 0.0, 0.4]))
    with pytest.raises(HypothesisError, match=r"§6\.3.*H1"):
        integrate(system, LieVPRK(gauss(2)), R0, [0.0, 0.0, 0.3], h=0.1, n_steps=1)
