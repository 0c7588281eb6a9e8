"""integrate_ensemble on a Dask cluster equals one batched integrate bitwise for a
nonholonomic method too (issue 18): the chaotic ensemble of the high-order paper (§7.3)
with NonholonomicPRK (Lobatto IIIA-IIIB, s = 3, carried multipliers), in chunks that are
Dask tasks on a LocalCluster started here (loopback, 2 worker processes, one thread each).
The VPRK counterpart is ``test_client_equals_embedded_bitwise_with_one_blas_thread`` in
packages/discrete-lagrangian/tests/test_ensemble.py."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import distributed  # the integration session installs discrete-lagrangian[test]: dask too
import numpy as np
import pytest
from chetaev.discrete_lagrangian import integrate, integrate_ensemble
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.nh_integrators.testing import chaotic_ensemble, chaotic_system
from chetaev.rktableaux import lobatto_iiia_iiib

H, N_STEPS, N_MEMBERS, CHUNK = 0.1, 20, 12, 5  # chunks (0, 5), (5, 10), (10, 12)
TIMEOUT = 240.0  # s, for each run on the cluster (measured: ~3 s on the loaded machine)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster, timeout=60) as cl:
        yield cl


def test_nh_chaotic_ensemble_on_a_cluster_equals_one_batched_integrate_bitwise(client):
    system = chaotic_system()
    q0, v0 = chaotic_ensemble(N_MEMBERS - 1)
    method = NonholonomicPRK(lobatto_iiia_iiib(3), multiplier_rule="carry")
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS)

    def blas_threads(tr):  # evaluated on the worker, inside the task
        from threadpoolctl import threadpool_info

        n = max([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"],
                default=1)
        return np.full(tr.q.shape[1], n)

    def run(**kw):  # on the cluster, in bounded time (a worker's error is re-raised)
        pool = ThreadPoolExecutor(1)
        try:
            return pool.submit(integrate_ensemble, system, method, q0, v0, h=H,
                               chunk_size=CHUNK, client=client, **kw).result(TIMEOUT)
        finally:
            pool.shutdown(wait=False)

    res = run(n_steps=N_STEPS)
    assert res.n_members == N_MEMBERS and res.chunks == [(0, 5), (5, 10), (10, 12)]
    assert res.success.tolist() == [True] * N_MEMBERS and res.all_success
    assert np.array_equal(res.t, whole.t)
    for name in ("q", "v", "p", "lam"):
        a, b = getattr(res, name), getattr(whole, name)
        assert a is not None and b is not None, name  # NonholonomicPRK saves all four
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b), name

    # the tasks ran with one BLAS thread (an observable keeps no trajectory: a second,
    # short run)
    res = run(n_steps=2, observables={"blas": blas_threads})
    assert res.all_success
    assert res.observables["blas"].tolist() == [1] * N_MEMBERS
