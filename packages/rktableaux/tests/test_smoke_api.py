"""The pinned interface used by other packages (CORE_API.md) exists and behaves."""

import numpy as np
from chetaev.rktableaux import (
    PartitionedTableau,
    Tableau,
    TableauError,
    gauss,
    lobatto_iiia,
    lobatto_iiia_iiib,
    lobatto_iiib,
    symplectic_conjugate,
)


def test_pinned_names():
    pair = lobatto_iiia_iiib(3)
    assert isinstance(pair, PartitionedTableau)
    assert pair.stages == 3
    assert isinstance(pair.first, Tableau) and isinstance(pair.second, Tableau)
    assert pair.first.a.shape == (3, 3) and pair.second.a.shape == (3, 3)
    assert pair.first.b.shape == (3,) and pair.first.c.shape == (3,)
    assert pair.first == lobatto_iiia(3)
    assert pair.second == lobatto_iiib(3)
    hyp = pair.satisfies_constrained_hypotheses()
    assert hyp.all and hyp.H1 and hyp.H2 and hyp.H3 and hyp.H1p and hyp.H2p
    assert isinstance(hyp.message, str)
    assert gauss(2).stages == 2
    # measured: 1.4e-16 (deterministic; same for BLAS threads 1, unset): margin 72
    assert symplectic_conjugate(lobatto_iiia(3)).isclose(lobatto_iiib(3))
    assert issubclass(TableauError, ValueError)
    assert not pair.first.a.flags.writeable
    # bitwise by design: Lobatto IIIA rows are set exactly (a[0] = 0, a[-1] = b: H3)
    np.testing.assert_array_equal(pair.first.a[0], 0.0)
    np.testing.assert_array_equal(pair.first.a[-1], pair.first.b)
