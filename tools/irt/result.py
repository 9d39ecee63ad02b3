"""What every estimator returns: point estimates, uncertainty and a run record."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Estimate:
    """Item and ability estimates of one fit.

    a, b, c: point estimates (posterior means for MCMC/VI, modes for MML, network outputs for PSN).
    *_sd: standard errors (MML with --se louis) or posterior sds; *_low/*_high: 95% intervals. None where
    the estimator gives none. info: the fit.json record (status, n_iter, converged, trace summary...).
    """

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    theta: np.ndarray
    theta_sd: np.ndarray | None = None
    a_sd: np.ndarray | None = None
    b_sd: np.ndarray | None = None
    c_sd: np.ndarray | None = None
    a_low: np.ndarray | None = None
    a_high: np.ndarray | None = None
    b_low: np.ndarray | None = None
    b_high: np.ndarray | None = None
    c_low: np.ndarray | None = None
    c_high: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    def interval(self, name: str):
        low, high = getattr(self, f"{name}_low"), getattr(self, f"{name}_high")
        return None if low is None or high is None else (low, high)


@dataclass(frozen=True)
class TimeBudget:
    """A fit's budget: wall-clock seconds and/or CPU seconds of this process (all threads)."""

    wall: float | None = None
    cpu: float | None = None

    def to_dict(self) -> dict:
        return {"wall": self.wall, "cpu": self.cpu}


class Clock:
    """Budget of one fit: `expired()` turns True after `limit` wall seconds (None = never), or when a
    TimeBudget is given, after its wall seconds or its CPU seconds (CPU time is the fair measure on
    a shared machine, where wall time depends on the other jobs)."""

    def __init__(self, limit: float | TimeBudget | None):
        import time

        budget = limit if isinstance(limit, TimeBudget) else TimeBudget(wall=limit)
        self._time, self._cpu = time.monotonic, time.process_time
        self.start, self.cpu_start = self._time(), self._cpu()
        self.limit, self.cpu_limit = budget.wall, budget.cpu

    def seconds(self) -> float:
        return self._time() - self.start

    def cpu_seconds(self) -> float:
        return self._cpu() - self.cpu_start

    def expired(self) -> bool:
        return (self.limit is not None and self.seconds() > self.limit) or (
            self.cpu_limit is not None and self.cpu_seconds() > self.cpu_limit
        )


class torch_threads_for:
    """Run small torch problems on one thread: below ~1e6 cells thread overhead dominates each op."""

    def __init__(self, n_cells: int, small: int = 1_000_000):
        self.small = n_cells < small

    def __enter__(self):
        import torch

        self.before = torch.get_num_threads()
        if self.small:
            torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.before)


class numba_threads_for:
    """Small fits run Numba kernels and BLAS on one thread: waking thread pools costs more than the work.

    (OpenBLAS threads spin while waiting; on a busy machine a 1 ms GEMM then takes 100 ms.)
    """

    def __init__(self, n_cells: int, small: int = 200_000):
        self.small = n_cells < small

    def __enter__(self):
        import numba
        from threadpoolctl import threadpool_limits

        self.before = numba.get_num_threads()
        self.blas = threadpool_limits(limits=1, user_api="blas") if self.small else None
        if self.small:
            numba.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        import numba

        numba.set_num_threads(self.before)
        if self.blas is not None:
            self.blas.restore_original_limits()
