"""integrate_ensemble (issue 18): chunks equal the whole batch bitwise, per-member failure,
store and resume, observables, bad input; the Dask engine on a LocalCluster started here
(loopback, 2 worker processes): the same numbers, one BLAS thread per task, a killed worker,
an interrupted run resumed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    VPRK,
    EnsembleResult,
    InputError,
    ObservableError,
    StoreMismatchError,
    integrate,
    integrate_ensemble,
    take_members,
)
from chetaev.discrete_lagrangian.testing import double_pendulum, henon_heiles
from chetaev.rktableaux import gauss

H, N_STEPS, N = 0.1, 30, 20


def _ensemble(n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.3, 0.3, (n, 2)), rng.uniform(-0.3, 0.3, (n, 2))


def _chunk_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith("chunk_"))


def _settled_chunk_files(path: Path, quiet: float = 1.5, timeout: float = 60.0) -> list[str]:
    """The chunk files once none has appeared for ``quiet`` s: after an interrupted client
    run, chunks that were running on a worker still finish and are written."""
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        now = _chunk_files(path)
        if now == seen:
            break
        seen = now
        time.sleep(quiet)
    return seen


def _same(res: EnsembleResult, traj) -> None:
    """Bitwise equality of every saved field and time."""
    assert np.array_equal(res.t, traj.t)
    for name in ("q", "v", "p", "lam"):
        a, b = getattr(res, name), getattr(traj, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.dtype == b.dtype and np.array_equal(a, b), name


# ----------------------------------------------------------------------------- bitwise
@pytest.mark.parametrize("model", [henon_heiles, double_pendulum])
@pytest.mark.parametrize("chunk_size", [1, 7, N])
def test_chunks_equal_one_batched_integrate_bitwise(model, chunk_size):
    system, method = model(), VPRK(gauss(2))
    q0, v0 = _ensemble()
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS)
    res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS,
                             chunk_size=chunk_size)
    assert res.all_success and res.n_members == N
    assert res.chunks[0] == (0, chunk_size) and res.chunks[-1][1] == N
    _same(res, whole)
    assert np.array_equal(res.final_q, whole.q[-1])
    assert res.stats["chunks_computed"] == res.stats["chunks_total"] == -(-N // chunk_size)


@pytest.mark.parametrize("chunk_size", [1, 7, 70])
def test_lie_chunks_equal_one_batched_integrate_bitwise(chunk_size):
    """LieVPRK on SO(3): chetaev.liegroups switches its series evaluation at 64 entries
    (``SMALL_SERIES``); 70 members with rotation vectors from 1e-6 to 1 (the series region
    and beyond) cross it, and the chunks still equal the whole batch bitwise."""
    from chetaev.discrete_lagrangian import LieVPRK
    from chetaev.discrete_lagrangian.testing import heavy_top
    from chetaev.liegroups import SO3

    rng = np.random.default_rng(3)
    g0 = SO3.random(rng, (70,))
    eta0 = rng.normal(size=(70, 3)) * np.logspace(-6, 0, 70)[:, None]
    system, method = heavy_top(), LieVPRK(gauss(2))
    whole = integrate(system, method, g0, eta0, h=0.05, n_steps=5)
    _same(integrate_ensemble(system, method, g0, eta0, h=0.05, n_steps=5,
                             chunk_size=chunk_size), whole)


def test_save_every_and_t_final():
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble()
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS, save_every=4)
    res = integrate_ensemble(system, method, q0, v0, h=H, t_final=N_STEPS * H,
                             chunk_size=6, save_every=4)
    assert res.t.shape == (N_STEPS // 4 + 2,)  # every 4th node and the last
    _same(res, whole)


def test_symbolic_parameter_sweep_is_split_with_the_members():
    sp = pytest.importorskip("sympy")
    from chetaev.discrete_lagrangian.symbolic import from_lagrangian

    th, w, g, ell = sp.symbols("theta omega g ell")
    lengths = np.linspace(0.5, 2.0, 10)
    sweep = from_lagrangian(ell**2 * w**2 / 2 + g * ell * sp.cos(th), [th], [w],
                            params={g: 0.8, ell: lengths})
    q0, v0 = np.linspace(0.2, 1.0, 10)[:, None], np.zeros((10, 1))
    method = VPRK(gauss(2))
    whole = integrate(sweep, method, q0, v0, h=H, n_steps=N_STEPS)
    for chunk_size in (1, 3, 10):
        _same(integrate_ensemble(sweep, method, q0, v0, h=H, n_steps=N_STEPS,
                                 chunk_size=chunk_size), whole)
    # take_members: member 4's system is the pendulum of length lengths[4]
    four = take_members(sweep, slice(4, 5), 10)
    one = integrate(four, method, q0[4:5], v0[4:5], h=H, n_steps=N_STEPS)
    assert np.array_equal(one.q[:, 0], whole.q[:, 4])
    qs, vs = np.full((10, 1), 0.7), np.full((10, 1), 0.3)
    assert np.array_equal(four.energy(qs[:1], vs[:1]), sweep.energy(qs, vs)[4:5])
    assert not np.array_equal(four.energy(qs[:1], vs[:1]), sweep.energy(qs, vs)[5:6])
    assert take_members(henon_heiles(), slice(0, 2)) is not None  # nothing batched: unchanged
    with pytest.raises(InputError, match=r"parameter array of shape \(10,\).*12 members"):
        integrate_ensemble(sweep, method, np.zeros((12, 1)), np.zeros((12, 1)), h=H,
                           n_steps=2)


# ----------------------------------------------------------------------------- failures
def test_a_failing_member_is_reported_and_the_others_complete():
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(12)
    q0[5] = [0.0, -5.0]  # escapes: Newton fails at step 21 (t = 2.1)
    assert not integrate(system, method, q0, v0, h=H, n_steps=60).success  # the whole batch stops
    res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=60, chunk_size=4)
    assert res.success.tolist() == [i != 5 for i in range(12)]
    assert "Newton did not converge at step 21" in res.messages[5]
    assert res.messages[4].startswith("Integration finished: 60 steps")
    good = np.arange(12) != 5
    others = integrate(system, method, q0[good], v0[good], h=H, n_steps=60)
    assert np.array_equal(res.q[:, good], others.q)  # the others: bitwise the batched run
    assert np.all(np.isfinite(res.q[:22, 5])) and np.all(np.isnan(res.q[22:, 5]))
    assert np.all(np.isnan(res.final_q[5]))
    # thinned (save_every = 4): the failed member's nodes 0, 4, ..., 20 at the grid times
    thin = integrate_ensemble(system, method, q0, v0, h=H, n_steps=60, chunk_size=12,
                              save_every=4)
    assert np.array_equal(thin.t, np.arange(16) * 4 * H)
    assert np.array_equal(thin.q[:, good],
                          integrate(system, method, q0[good], v0[good], h=H, n_steps=60,
                                    save_every=4).q)
    assert np.array_equal(thin.q[:6, 5], res.q[0:21:4, 5]) and np.all(np.isnan(thin.q[6:, 5]))


def test_bad_input(tmp_path):
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(6)
    integrate_ensemble(system, method, q0[:4], v0[:4], h=H, n_steps=2, chunk_size=2,
                       store=tmp_path)
    stored = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(InputError, match="same number of members"):
        integrate_ensemble(system, method, q0, v0[:5], h=H, n_steps=2)
    with pytest.raises(InputError, match="leading batch axis"):
        integrate_ensemble(system, method, q0[0], v0[0], h=H, n_steps=2)
    for bad in (0, -3, 1.5, True):
        with pytest.raises(InputError, match="chunk_size"):
            integrate_ensemble(system, method, q0, v0, h=H, n_steps=2, chunk_size=bad)
    with pytest.raises(InputError, match="exactly one"):
        integrate_ensemble(system, method, q0, v0, h=H)
    with pytest.raises(InputError, match="observables"):
        integrate_ensemble(system, method, q0, v0, h=H, n_steps=2, observables={"E": 3})
    for bad in ({"v0": v0[:3]}, {"chunk_size": 0}, {"n_steps": None}, {"h": -H}):
        kwargs = {"q0": q0[:4], "v0": v0[:4], "h": H, "n_steps": 2, "chunk_size": 2, **bad}
        with pytest.raises(InputError):
            integrate_ensemble(system, method, store=tmp_path, **kwargs)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == stored  # store untouched
    assert issubclass(StoreMismatchError, ValueError)
    assert issubclass(ObservableError, ValueError) and issubclass(ObservableError, RuntimeError)


def test_store_of_another_run_is_refused(tmp_path):
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(6)
    integrate_ensemble(system, method, q0, v0, h=H, n_steps=4, chunk_size=4, store=tmp_path)
    before = _chunk_files(tmp_path)
    for kwargs, field in [({"h": 0.05}, "h"), ({"n_steps": 5}, "n_steps"),
                          ({"save_every": 2}, "save_every"), ({"q0": q0 + 1e-15}, "q0"),
                          ({"method": VPRK(gauss(3))}, "method"),
                          ({"system": double_pendulum()}, "system"),
                          ({"observables": {"x": lambda tr: tr.q[-1]}}, "observables")]:
        args = {"system": system, "method": method, "q0": q0, "v0": v0, "h": H, "n_steps": 4,
                "chunk_size": 4, "store": tmp_path, **kwargs}
        with pytest.raises(StoreMismatchError, match=rf"{field} differ"):
            integrate_ensemble(**args)
    assert _chunk_files(tmp_path) == before


def test_store_resume_after_an_interrupt(tmp_path):
    """A KeyboardInterrupt after 2 chunks (from an observable): the 2 finished chunks stay in
    the store; the second call computes only the 3 missing ones; the result is identical."""
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(10)
    calls = []

    def final_energy(tr):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return system.energy(tr.q[-1], tr.v[-1])

    obs = {"E": final_energy}
    with pytest.raises(KeyboardInterrupt):
        integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS, chunk_size=2,
                           store=tmp_path, observables=obs)
    assert _chunk_files(tmp_path) == ["chunk_0000000000_0000000002.npz",
                                      "chunk_0000000002_0000000004.npz"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS, chunk_size=2,
                             store=tmp_path, observables=obs, progress=True)
    assert res.stats["chunks_loaded"] == 2 and res.stats["chunks_computed"] == 3
    assert len(calls) == 3 + 3
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS)
    assert np.array_equal(res.observables["E"], system.energy(whole.q[-1], whole.v[-1]))
    assert np.array_equal(res.final_v, whole.v[-1])
    with pytest.raises(InputError, match="observables"):
        _ = res.q  # trajectories are not kept with observables
    # a third call with another chunk size loads everything
    again = integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS, chunk_size=3,
                               store=tmp_path, observables=obs)
    assert again.stats["chunks_computed"] == 0 and len(calls) == 6
    assert np.array_equal(again.observables["E"], res.observables["E"])


def test_store_chunk_format_and_lazy_result(tmp_path):
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(7)
    res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=5, chunk_size=3,
                             store=tmp_path)
    assert res._memory == {}  # nothing held in memory: the chunks are read on access
    with np.load(tmp_path / "chunk_0000000003_0000000006.npz") as f:
        meta = json.loads(str(f["meta"]))
    assert (meta["lo"], meta["hi"], meta["h"]) == (3, 6, H)
    assert "VPRK" in meta["method"] and meta["system"] and len(meta["probe"]) == 64
    assert [c["lo"] for c in res.iter_chunks()] == [0, 3, 6]
    _same(res, integrate(system, method, q0, v0, h=H, n_steps=5))


def test_failing_observable_names_the_chunk_and_keeps_finished_chunks(tmp_path):
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(10)

    def bad(tr):
        if tr.q.shape[1] == 3 and np.array_equal(tr.q[0], q0[3:6]):
            raise ZeroDivisionError("boom")
        return tr.q[-1]

    with pytest.raises(ObservableError, match=r"'x' failed on the members \[3, 6\).*boom"):
        integrate_ensemble(system, method, q0, v0, h=H, n_steps=3, chunk_size=3,
                           store=tmp_path, observables={"x": bad})
    assert _chunk_files(tmp_path) == ["chunk_0000000000_0000000003.npz"]
    with pytest.raises(ObservableError,
                       match=r"shape \(2, 3\) on the members \[0, 3\).*first axis"):
        integrate_ensemble(system, method, q0, v0, h=H, n_steps=3, chunk_size=3,
                           observables={"x": lambda tr: tr.q[-1].T})


def test_progress_embedded_tqdm_or_a_stderr_line(capsys, monkeypatch):
    """progress=True on the embedded engine: tqdm when installed (not a dependency), else a
    line on stderr with chunks done / total and an ETA."""
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(10)
    whole = integrate(system, method, q0, v0, h=H, n_steps=3)
    if importlib.util.find_spec("tqdm") is not None:
        res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=3, chunk_size=2,
                                 progress=True)
        err = capsys.readouterr().err
        assert "ensemble" in err and "5/5" in err
        _same(res, whole)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    res = integrate_ensemble(system, method, q0, v0, h=H, n_steps=3, chunk_size=2,
                             progress=True)
    lines = capsys.readouterr().err.split("\r")
    assert lines[1].startswith("ensemble: 0/5 chunks, elapsed") and lines[1].endswith("ETA ?")
    assert re.fullmatch(r"ensemble: 5/5 chunks, elapsed \d+\.\d s, ETA 0\.0 s\n", lines[-1])
    assert len(lines) == 7  # "", then 0/5 ... 5/5
    _same(res, whole)
    integrate_ensemble(system, method, q0, v0, h=H, n_steps=3, chunk_size=2)
    assert capsys.readouterr().err == ""  # progress=False: silent


# ----------------------------------------------------------------------------- Dask engine
@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip(
        "distributed", reason="the [distributed] extra (dask, distributed) is not installed")
    import logging

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       silence_logs=logging.ERROR)
    cl = distributed.Client(cluster, timeout=60)
    yield cl
    cl.close()
    cluster.close()


def _bounded(fn, timeout: float = 240.0):
    """Run fn() in a thread; fail the test if it does not finish within ``timeout`` s."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as err:  # re-raised in the test's thread
            out["error"] = err

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), f"integrate_ensemble did not finish within {timeout} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_client_equals_embedded_bitwise_with_one_blas_thread(client):
    system, method = double_pendulum(), VPRK(gauss(2))
    q0, v0 = _ensemble()
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS)
    res = _bounded(lambda: integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS,
                                              chunk_size=7, client=client))
    _same(res, whole)

    def blas_threads(tr):
        from threadpoolctl import threadpool_info

        n = max([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"],
                default=1)
        return np.full(tr.q.shape[1], n)

    pytest.importorskip("threadpoolctl")
    res = _bounded(lambda: integrate_ensemble(system, method, q0, v0, h=H, n_steps=2,
                                              chunk_size=7, client=client,
                                              observables={"blas": blas_threads}))
    assert res.observables["blas"].tolist() == [1] * N


def test_client_survives_a_killed_worker(client, tmp_path):
    """SIGKILL one worker process (its own pid) once the first chunk is stored: the run
    completes, equals the undisturbed result, and every chunk is stored exactly once."""
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble()
    pids = client.run(os.getpid)

    def slow_final(tr):
        time.sleep(0.4)
        return tr.q[-1]

    job = {}

    def run():
        return integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS, chunk_size=2,
                                  client=client, store=tmp_path, observables={"x": slow_final})

    th = threading.Thread(target=lambda: job.setdefault("res", run()), daemon=True)
    th.start()
    deadline = time.monotonic() + 120
    while not _chunk_files(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _chunk_files(tmp_path), "no chunk finished within 120 s"
    assert len(_chunk_files(tmp_path)) < 10, "the run finished before the kill"
    victim = sorted(pids.values())[0]
    os.kill(victim, signal.SIGKILL)
    th.join(240)
    assert not th.is_alive() and "res" in job, "the run did not complete after the kill"
    res = job["res"]
    assert len(_chunk_files(tmp_path)) == 10 and res.stats["chunks_computed"] == 10
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS)
    assert np.array_equal(res.observables["x"], whole.q[-1])
    assert victim not in client.run(os.getpid).values()  # it really died (and was replaced)


def test_client_interrupted_run_resumes(client, tmp_path):
    """An observable fails on the worker for the chunk [6, 8): the error names the range, the
    chunks finished before stay; the second call computes only the missing chunks."""
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(12)

    def failing(tr):
        if np.array_equal(tr.q[0], q0[6:8]):
            raise RuntimeError("disk full")
        return tr.q[-1]

    with pytest.raises(ObservableError, match=r"members \[6, 8\).*disk full"):
        _bounded(lambda: integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS,
                                            chunk_size=2, client=client, store=tmp_path,
                                            observables={"x": failing}))
    present = len(_settled_chunk_files(tmp_path))  # chunks in flight may still land
    assert 1 <= present < 6
    res = _bounded(lambda: integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS,
                                              chunk_size=2, client=client, store=tmp_path,
                                              observables={"x": lambda tr: tr.q[-1]}))
    assert res.stats["chunks_loaded"] == present
    assert res.stats["chunks_computed"] == 6 - present
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS)
    assert np.array_equal(res.observables["x"], whole.q[-1])


def _no_progress_plugins(client) -> bool:
    """No progress feed left on the scheduler (each bar removes its plugin when it stops)."""
    names = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins))
    return not [n for n in names if n.startswith("progress-")]


def test_client_progress_is_dasks_progress_and_does_not_block(client, capsys, monkeypatch):
    """progress=True with a client: Dask's progress feed of the chunk futures (the scheduler's
    ``Progress`` plugin, as ``distributed.progress``), drawn on stderr as chunks done / total
    with an ETA, in a thread of its own while the driver collects the chunks."""
    from chetaev.discrete_lagrangian.driver import _ensemble as engine

    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble(12)
    bars = []
    make = engine._dask_progress_bar

    def recording(futures, cl):
        bar = make(futures, cl)
        bars.append((len(futures), bar))
        return bar

    monkeypatch.setattr(engine, "_dask_progress_bar", recording)
    res = _bounded(lambda: integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS,
                                              chunk_size=2, client=client, progress=True,
                                              observables={"x": lambda tr: tr.q[-1]}))
    threads = {t.name for t in threading.enumerate()}
    assert np.array_equal(res.observables["x"],
                          integrate(system, method, q0, v0, h=H, n_steps=N_STEPS).q[-1])
    assert len(bars) == 1 and bars[0][0] == 6  # one bar, fed with the 6 chunk futures
    assert bars[0][1]._last_response["status"] == "finished"
    err = capsys.readouterr().err
    assert "ensemble (dask): " in err
    assert re.search(r"ensemble \(dask\): 6/6 chunks, elapsed \d+\.\d s, ETA 0\.0 s\n$", err)
    assert "chetaev-ensemble-progress" not in threads  # the bar's thread has ended
    assert _no_progress_plugins(client)


def test_client_driver_interrupted_resumes(client, tmp_path, capsys):
    """SIGINT to the driver (this thread) once the first chunk is stored: KeyboardInterrupt,
    the finished chunks stay; the same call again loads them, computes only the missing
    ones, and equals the undisturbed result. Dask's progress bar (on) stops with the run."""
    system, method = henon_heiles(), VPRK(gauss(2))
    q0, v0 = _ensemble()

    def slow_final(tr):
        time.sleep(0.4)
        return tr.q[-1]

    def call():
        return integrate_ensemble(system, method, q0, v0, h=H, n_steps=N_STEPS, chunk_size=2,
                                  client=client, store=tmp_path, progress=True,
                                  observables={"x": slow_final})

    main = threading.get_ident()
    sent = []

    def interrupt():
        deadline = time.monotonic() + 120
        while not _chunk_files(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        sent.append(len(_chunk_files(tmp_path)))
        signal.pthread_kill(main, signal.SIGINT)

    # Python's own SIGINT handler (a shell starting pytest in the background ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        watcher = threading.Thread(target=interrupt, daemon=True)
        watcher.start()
        with pytest.raises(KeyboardInterrupt):
            call()
            time.sleep(60)  # not reached unless the run ended first: a late SIGINT lands here
        watcher.join(5)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert sent and 1 <= sent[0] < 10, sent
    seen = _settled_chunk_files(tmp_path)  # chunks running when the driver stopped land
    present = len(seen)
    assert 1 <= present < 10, seen
    assert "stopped" in capsys.readouterr().err
    assert _no_progress_plugins(client)
    res = _bounded(call)
    assert res.stats["chunks_loaded"] == present
    assert res.stats["chunks_computed"] == 10 - present
    assert len(_chunk_files(tmp_path)) == 10
    whole = integrate(system, method, q0, v0, h=H, n_steps=N_STEPS)
    assert np.array_equal(res.observables["x"], whole.q[-1])
