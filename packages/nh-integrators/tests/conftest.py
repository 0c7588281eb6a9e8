"""Fixtures for the chetaev.nh_integrators tests.

The models live in the public module ``chetaev.nh_integrators.testing`` (shared with the
benchmarks and the examples package); ``nh`` exposes that module to the tests.
"""

from __future__ import annotations

import pytest
from chetaev.nh_integrators import testing as _testing
from chetaev.nh_integrators.testing import (
    chaotic_system,
    cvt_system,
    particle_system,
    sleigh_system,
)


@pytest.fixture(scope="session")
def nh():
    """The public test-model module ``chetaev.nh_integrators.testing``."""
    return _testing


@pytest.fixture
def particle():
    return particle_system()


@pytest.fixture
def cvt():
    return cvt_system(0.5)


@pytest.fixture
def chaotic():
    return chaotic_system(3)


@pytest.fixture
def sleigh():
    return sleigh_system()
