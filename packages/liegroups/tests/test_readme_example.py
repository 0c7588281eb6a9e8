"""The example of the root README and packages/liegroups/README.md must run."""

import numpy as np
from chetaev.liegroups import SO3, retraction


def test_readme_example():
    cay = retraction(SO3, "cayley")
    xi = np.array([0.3, -0.2, 0.5])
    R = cay(xi)
    assert SO3.is_element(R)
    assert np.allclose(cay.inv(R), xi)
    assert np.allclose(cay.dL_inv(xi) @ cay.dL(xi), np.eye(3))
    xis = 0.5 * np.random.default_rng(0).normal(size=(1000, 3))
    Rs = SO3.exp(xis)
    assert np.allclose(SO3.log(Rs), xis)
