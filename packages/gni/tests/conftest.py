import numpy as np
import pytest
from chetaev.gni.testing import nonholonomic_particle


@pytest.fixture(scope="session")
def particle():
    return nonholonomic_particle(affine=False)


@pytest.fixture(scope="session")
def affine_particle():
    return nonholonomic_particle(affine=True)


def run(method, problem, h, n_steps, q0=None, v0=None):
    """All states of ``n_steps`` steps (list), starting from the problem's data."""
    s = method.initial_state(problem.system, problem.q0 if q0 is None else q0,
                             problem.v0 if v0 is None else v0)
    out = [s]
    for _ in range(n_steps):
        s = method.step(problem.system, s, h)
        out.append(s)
    return out


@pytest.fixture(scope="session")
def runner():
    return run


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(20261122)
