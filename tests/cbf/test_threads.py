"""The thread dispatch of the serial kernels: every job once, and the same bytes for any thread count."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from methodkit.tools.cbf import kernels, threads


@pytest.fixture
def two_threads():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba was started with one thread")
    before = numba.get_num_threads()
    yield
    numba.set_num_threads(before)


def test_ranges_cover_every_job_once(two_threads):
    numba.set_num_threads(2)
    seen = np.zeros(11, dtype=int)
    threads.over_ranges(11, lambda lo, hi: np.add.at(seen, np.arange(lo, hi), 1))
    assert (seen == 1).all()
    calls = []
    threads.over_ranges(11, lambda lo, hi: calls.append((lo, hi)), min_per_thread=8)
    assert calls == [(0, 11)]  # too few jobs for two threads of 8


def _filters(task_outcome):
    rng = np.random.default_rng(0)
    S, R, (B, T) = 9, 2, task_outcome.shape
    outcome = np.ascontiguousarray(np.broadcast_to(task_outcome, (S, B, T)))
    valid = np.ones((S, B, T), dtype=bool)
    cbf_out = [np.empty((S, B, T)) for _ in range(8)] + [np.empty(S)]
    nodes = np.sort(rng.uniform(1, 80, (S, 5)), axis=1)
    kernels.cbf_filter(outcome, valid, nodes, nodes[::-1].copy(), 60.0, 10.0, 0.0, False, *cbf_out)
    pf_out = [np.empty((S, R, B, T)) for _ in range(4)] + [np.zeros((S, R), dtype=np.int64)]
    params = np.column_stack([rng.uniform(0.1, 0.5, (S, 3)), np.ones(S)])
    seeds = np.arange(S * R, dtype=np.int64).reshape(S, R)
    tables, use = np.zeros((S, 2, 1, 4)), np.zeros((S, 2), dtype=np.int64)
    kernels.pf_filter(kernels.PF_HPL, outcome, valid, params, 200, seeds, 60.0, 10.0, *pf_out, True, tables, use)
    return b"".join(a.tobytes() for a in cbf_out + pf_out)


def test_filters_give_the_same_bytes_on_one_and_two_threads(two_threads, task):
    numba.set_num_threads(1)
    one = _filters(task.outcome.T)
    numba.set_num_threads(2)
    assert _filters(task.outcome.T) == one


@pytest.mark.parametrize("n_threads", [1, 2])
def test_pieces_cover_every_job_once_in_short_ranges(two_threads, n_threads):
    numba.set_num_threads(n_threads)
    calls = []
    threads.over_ranges(40, lambda lo, hi: calls.append((lo, hi)), piece=3)
    assert sorted(calls) == [(lo, min(lo + 3, 40)) for lo in range(0, 40, 3)]


@pytest.mark.parametrize("n_threads", [1, 2])
def test_an_interrupt_drops_the_pieces_not_yet_started(two_threads, n_threads):
    import time

    numba.set_num_threads(n_threads)
    calls = []

    def job(lo, hi):
        calls.append(lo)
        if lo == 0:
            raise KeyboardInterrupt  # as Ctrl-C would surface in the waiting main thread
        time.sleep(0.01)

    with pytest.raises(KeyboardInterrupt):
        threads.over_ranges(200, job, piece=1)
    time.sleep(0.5)  # pieces still queued would run now (10 ms each)
    assert len(calls) < 10


def test_particle_filters_give_the_same_bytes_in_pieces_of_one_run(two_threads, task, monkeypatch):
    numba.set_num_threads(2)
    whole = _filters(task.outcome.T)
    monkeypatch.setattr(kernels, "PF_PIECE_STEPS", 1)  # one run per piece
    assert _filters(task.outcome.T) == whole


def test_pieces_are_small_enough_to_share_out(two_threads):
    numba.set_num_threads(2)
    calls = []
    threads.over_ranges(16, lambda lo, hi: calls.append(hi - lo), piece=12)
    assert sorted(calls) == [2] * 8  # at least four pieces per thread, not 12 + 4
