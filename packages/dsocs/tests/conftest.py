"""Finite-difference helpers for the theorem tests (independent of the analytic Jacobians)."""

from __future__ import annotations

import numpy as np
import pytest


def _flow(ds, z):
    n = z.shape[-1] // 2
    q0, q1 = z[:n], z[n:]
    q2, _ = ds.step(q0, q1)
    return np.concatenate([q1, q2])


def _xi(ds, z):
    n = z.shape[-1] // 2
    q0, q1 = z[:n], z[n:]
    return ds.xi(q0, q1)


def _fd(f, z, eps):
    cols = []
    for j in range(z.size):
        e = np.zeros_like(z)
        e[j] = eps * (1 + abs(z[j]))
        cols.append((f(z + e) - f(z - e)) / (2 * e[j]))
    return np.stack(cols, -1)  # [b, a] = ∂f_b/∂z_a


@pytest.fixture
def fd_flow_jacobian():
    """DF by central differences of the step (ε = 1e-6)."""
    return lambda ds, z, eps=1e-6: _fd(lambda x: _flow(ds, x), z, eps)


@pytest.fixture
def fd_dxi():
    """dξ by central differences of ξ(z) (ε = 1e-6): (dξ)_ab = ∂_a ξ_b − ∂_b ξ_a."""

    def dxi(ds, z, eps=1e-6):
        D = _fd(lambda x: _xi(ds, x), z, eps)  # [b, a] = ∂_a ξ_b
        K = D.T  # [a, b]
        return K - K.T

    return dxi
