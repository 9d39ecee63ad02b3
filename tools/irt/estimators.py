"""The estimator registry and run(): one fit with its budget, memory check and run record."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.irt import mcmc, mml, psn, vi
from methodkit.tools.irt.data import ResponseData
from methodkit.tools.irt.models import MODELS
from methodkit.tools.irt.result import Estimate, TimeBudget, numba_threads_for

SETTINGS = {"mml": mml.MMLSettings, "mcmc": mcmc.MCMCSettings, "vi": vi.VISettings, "psn": psn.PSNSettings}
METHODS = tuple(SETTINGS)


def make_settings(method: str, **options):
    """The method's settings dataclass from keyword options; options of other methods are ignored."""
    if method not in SETTINGS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}")
    cls = SETTINGS[method]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in options.items() if k in names and v is not None})


def memory_estimate_mb(N: int, J: int, method: str, settings) -> float:
    """Bytes the fit will hold at its peak (the arrays it allocates), in MB."""
    cells = N * J
    if method == "mml":
        q = settings.n_nodes
        width = 4 if settings.float32 else 8
        total = 2 * cells * width + cells + 4 * N * q * 8 + 6 * J * q * 8
        if settings.se == "louis":
            total += cells + J * 9 * 8
    elif method == "mcmc":
        total = 2 * cells + settings.draws * (N + 3 * J) * 4 * settings.chains
    elif method == "vi":
        total = cells * (8 + 8 + 4) * 4
    else:
        total = cells * (8 + 8 + 4) * 3 + (N + J) * settings.hidden * 4 * 4
    return total / 2**20


class PeakRSS:
    """Samples this process' resident memory in a thread; `.peak_mb` after the block."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.peak_mb = 0.0
        self._stop = threading.Event()

    @staticmethod
    def current_mb() -> float:
        try:
            with open("/proc/self/statm") as handle:
                return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except OSError:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def _watch(self):
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self.current_mb())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.peak_mb = self.current_mb()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self.current_mb())


@dataclass
class FitResult:
    estimate: Estimate
    item_id: np.ndarray
    model_id: np.ndarray
    info: dict = field(default_factory=dict)

    def items_frame(self):
        import pandas as pd

        e = self.estimate
        cols = {"item_id": self.item_id, "a": e.a, "b": e.b, "c": e.c}
        for name in ("a", "b", "c"):
            sd = getattr(e, f"{name}_sd")
            if sd is not None:
                cols[f"{name}_sd"] = sd
            interval = e.interval(name)
            if interval is not None:
                cols[f"{name}_ci_low"], cols[f"{name}_ci_high"] = interval
        return pd.DataFrame(cols)

    def abilities_frame(self):
        import pandas as pd

        e = self.estimate
        sd = e.theta_sd if e.theta_sd is not None else np.full(len(e.theta), np.nan)
        return pd.DataFrame({"model_id": self.model_id, "theta": e.theta, "sd": sd})

    def to_dict(self) -> dict:
        """The one-line summary `irt-fit fit` prints."""
        keep = ("estimator", "model", "status", "converged", "n_iter", "seconds", "peak_rss_mb", "n_models", "n_items")
        out = {k: self.info.get(k) for k in keep}
        optional = ("loglik", "elbo", "val_loss", "rhat_max", "ess_min", "sign_reflected", "n_negative_a")
        for k in (*optional, "n_items_at_bound", "convergence", "warnings"):
            if self.info.get(k) is not None:
                out[k] = self.info[k]
        return out


def reliability_warnings(info: dict, settings) -> list[str]:
    """The reasons not to trust a fit that ended with status ok, one sentence each (printed by the CLI)."""
    out = []
    bound = info.get("items_at_bound") or {}
    upper, lower = bound.get("a_upper", []), bound.get("a_lower", [])
    if upper:
        out.append(
            f"{len(upper)} item(s) have a at the upper bound {settings.a_max:g} (first: {', '.join(upper[:5])}): "
            "their responses are (nearly) separated along the ability order, so the ML a does not exist; "
            "fit.json lists them under items_at_bound, and --prior weak estimates them"
        )
    if lower:
        out.append(
            f"{len(lower)} item(s) have a at the lower bound {mml.A_MIN:.3g} (first: "
            f"{', '.join(lower[:5])}): they discriminate in the wrong direction or not at all"
        )
    if info.get("status") == "ok" and not info.get("converged"):
        out.append(unconverged_message(info))
    return out


def unconverged_message(info: dict) -> str:
    """Why a fit that ran to its end did not converge, and what to change."""
    d, method = info.get("convergence") or {}, info.get("estimator")
    if method == "mml":
        return (
            f"MML stopped after {info.get('n_iter')} EM cycles (--max-cycles) with max |change| "
            f"{d.get('last_change', float('nan')):.3g} above --tol {d.get('tol')}: not converged; raise --max-cycles "
            "or pass --accelerate squarem"
        )
    if method == "mcmc":
        if d.get("rhat_max") is None:
            return "MCMC with one chain has no R-hat, so convergence is not checked; pass --chains 2 or more"
        return (
            f"MCMC not converged: R-hat max {d['rhat_max']:.3g} (needs < {d['rhat_below']:g}), bulk ESS min "
            f"{d['ess_min']:.3g} (needs >= {d['ess_above']:g}); raise --warmup and --draws, or use --sampler pg"
        )
    if method == "vi":
        change, window = d.get("elbo_rel_change"), d.get("window")
        if change is None:
            return (
                f"VI ran {info.get('n_iter')} steps, fewer than two windows of {window}: not converged; raise --steps"
            )
        return (
            f"VI not converged after {info.get('n_iter')} steps: the mean ELBO of the last {window} steps moved "
            f"by {change:.3g} (relative; needs < {d.get('elbo_rtol')}); raise --steps"
        )
    return (
        f"PSN used all {d.get('max_epochs')} epochs without early stopping (validation loss still falling); "
        "raise --epochs"
    )


def run(
    data: ResponseData,
    model: str = "2pl",
    method: str = "mml",
    settings=None,
    *,
    seed=0,
    time_limit: float | TimeBudget | None = None,
    mem_limit_mb: float | None = None,
    callback=None,
) -> FitResult:
    """Fit `model` by `method` to `data`; refuse before starting when the memory estimate exceeds the limit."""
    if model not in MODELS:
        raise UsageError(f"--model must be one of {', '.join(MODELS)}")
    settings = make_settings(method) if settings is None else settings
    N, J = data.shape
    need = memory_estimate_mb(N, J, method, settings)
    if mem_limit_mb is not None and need > mem_limit_mb:
        raise UsageError(
            f"{method} on {N} models x {J} items needs about {need:.0f} MB, over --mem-limit {mem_limit_mb:g} MB; "
            "raise the limit or fit fewer items"
        )
    Y = np.ascontiguousarray(data.Y, dtype=np.uint8)
    started, cpu_started = time.monotonic(), time.process_time()
    with PeakRSS() as rss, numba_threads_for(N * J):
        if method == "mml":
            est = mml.fit(Y, model, settings, time_limit=time_limit, callback=callback)
        elif method == "mcmc":
            est = mcmc.fit(Y, model, settings, seed=seed, time_limit=time_limit, callback=callback)
        elif method == "vi":
            est = vi.fit(Y, model, settings, seed=seed, time_limit=time_limit, callback=callback)
        else:
            est = psn.fit(Y, model, settings, seed=seed, time_limit=time_limit, callback=callback)
    info = {
        "estimator": method,
        "model": model,
        "n_models": N,
        "n_items": J,
        **est.info,
        "seconds": round(time.monotonic() - started, 4),
        "cpu_seconds": round(time.process_time() - cpu_started, 4),
        "peak_rss_mb": round(rss.peak_mb, 1),
        "memory_estimate_mb": round(need, 2),
        "time_limit": time_limit.wall if isinstance(time_limit, TimeBudget) else time_limit,
        "cpu_limit": time_limit.cpu if isinstance(time_limit, TimeBudget) else None,
    }
    for key in ("rhat_max", "ess_min"):
        info.setdefault(key, None)
    if "at_bound" in info:
        info["items_at_bound"] = {k: [str(data.item_id[i]) for i in v] for k, v in info.pop("at_bound").items()}
    info["warnings"] = reliability_warnings(info, settings)
    est.info = info
    return FitResult(est, np.asarray(data.item_id), np.asarray(data.model_id), info)
