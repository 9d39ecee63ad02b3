"""Synthetic participants: a learner's predictions plus response noise, rounded and clipped like the real
task, and response times from a log-linear formula in the learner's ambiguity (or entropy)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from methodkit.core.errors import UsageError
from methodkit.tools.cbf import grid as gridmod
from methodkit.tools.cbf import models
from methodkit.tools.cbf.data import Cohort
from methodkit.tools.cbf.forward import FilterOptions
from methodkit.tools.cbf.signals import model_signals, params_values

GROUPS = ("healthy", "vol-blind", "sto-blind")
DEFAULT_RT = "logrt=8.4+0.05*amb+N(0,0.1)"


@dataclass(frozen=True)
class RTModel:
    """log RT_t = intercept + sum coef * signal_t + N(0, sd^2); signals: amb (ambiguity), entropy."""

    intercept: float
    terms: tuple[tuple[float, str], ...]
    sd: float


_SIGNALS = {"amb": "ambiguity", "entropy": "entropy"}


def parse_rt(text: str) -> RTModel:
    """Parse 'logrt=8.4+0.05*amb+N(0,0.1)' (terms in any order; coefficients may be negative)."""
    body = text.replace(" ", "")
    if not body.startswith("logrt="):
        raise UsageError(f"--rt must look like '{DEFAULT_RT}', got {text!r}")
    body = body[len("logrt=") :]
    sd = 0.0
    noise = re.search(r"\+?N\(0,([0-9.eE+-]+)\)", body)
    if noise:
        sd = float(noise.group(1))
        body = body[: noise.start()] + body[noise.end() :]
    intercept, terms = 0.0, []
    for sign, term in re.findall(r"([+-]?)((?:[0-9.]+(?:[eE][+-]?[0-9]+)?)(?:\*[a-z]+)?)", body):
        value, _, name = term.partition("*")
        coef = float(value) * (-1 if sign == "-" else 1)
        if not name:
            intercept += coef
        elif name in _SIGNALS:
            terms.append((coef, _SIGNALS[name]))
        else:
            raise UsageError(f"--rt: unknown signal '{name}' (known: {', '.join(_SIGNALS)})")
    leftover = re.sub(r"([+-]?)((?:[0-9.]+(?:[eE][+-]?[0-9]+)?)(?:\*[a-z]+)?)", "", body)
    if leftover or sd < 0:
        raise UsageError(f"--rt: cannot read {leftover or text!r}; expected e.g. '{DEFAULT_RT}'")
    return RTModel(intercept, tuple(terms), sd)


def parse_population(text: str) -> list[str]:
    """'healthy:40,vol-blind:40' -> a group label per agent."""
    labels = []
    for part in text.split(","):
        name, _, count = part.strip().partition(":")
        if name not in GROUPS or not count.isdigit():
            raise UsageError(f"--population: {part!r} must be GROUP:N with GROUP one of {', '.join(GROUPS)}")
        labels += [name] * int(count)
    if not labels:
        raise UsageError("--population names no agents")
    return labels


def population_params(agent: str, labels: list[str], rng: np.random.Generator, sigma_r: float) -> pd.DataFrame:
    """Per-agent parameters: healthy from the model's prior (cbf) or a typical range; blind groups lose one source."""
    n = len(labels)
    blind_v = np.array([g == "vol-blind" for g in labels])
    blind_s = np.array([g == "sto-blind" for g in labels])
    if agent == "cbf":
        spec = models.CBF
        theta = rng.normal(spec.prior_mean, spec.prior_sd, size=(n, 5))
        theta[blind_v, 1] = rng.normal(math.log(400.0), 0.5, blind_v.sum())  # a collapsed v grid
        theta[blind_s, 3] = rng.normal(math.log(400.0), 0.5, blind_s.sum())
        values = models.natural("cbf", theta)
    elif agent == "kf":
        values = {
            "v": np.exp(rng.uniform(math.log(2), math.log(60), n)),
            "s": np.exp(rng.uniform(math.log(8), math.log(100), n)),
        }
        values["v"][blind_v] = 0.5
        values["s"][blind_s] = 0.5
    elif agent == "pf-beta":
        values = {
            "lambda_v": np.full(n, 0.2),
            "lambda_s": np.full(n, 0.2),
            "v0": rng.uniform(4, 40, n),
            "s0": rng.uniform(10, 80, n),
        }
        values["lambda_v"][blind_v] = 0.0  # the lesion models of Piray & Daw 2021
        values["lambda_s"][blind_s] = 0.0
    elif agent == "pf-hpl":
        values = {"mu_v": rng.uniform(0.1, 0.5, n), "mu_s": rng.uniform(0.1, 0.5, n), "sigma": rng.uniform(0.2, 0.8, n)}
        values["mu_v"][blind_v] = 0.0
        values["mu_s"][blind_s] = 0.0
    else:
        raise UsageError(f"--agent must be one of {', '.join(models.MODELS)}")
    frame = pd.DataFrame(values)
    frame["sigma_r"] = sigma_r
    frame["group"] = labels
    return frame


@dataclass
class AgentsResult:
    cohort: Cohort
    params: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        return self.cohort.to_frame()

    def to_dict(self) -> dict:
        return {"n_agents": self.cohort.n_subjects, "groups": pd.Series(self.params["group"]).value_counts().to_dict()}


def simulate(
    cohort: Cohort,
    agent: str,
    params: pd.DataFrame,
    *,
    seed: int = 0,
    clip=(10.0, 90.0),
    step: float = 2.0,
    rt: RTModel | None = None,
    grid: gridmod.GridSpec | None = None,
    fopts: FilterOptions | None = None,
    particles: int = 1000,
) -> AgentsResult:
    """Responses (and RTs) of agents with `params` (one row per subject of `cohort`, in order) on its outcomes."""
    grid = grid or gridmod.GridSpec()
    fopts = fopts or FilterOptions()
    values = params_values(params.assign(subject=cohort.subjects), agent, cohort.subjects)
    sig = model_signals(cohort, agent, values, grid=grid, fopts=fopts, particles=particles, runs=1, seed=seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    S, B, T = cohort.outcome.shape
    sigma = values.get("sigma_r", np.full(S, 4.0))[:, None, None]
    response = sig.arrays["pred_mean"] + rng.standard_normal((S, B, T)) * sigma
    if step > 0:
        response = np.round(response / step) * step
    if clip is not None:
        response = np.clip(response, clip[0], clip[1])
    response[~cohort.valid] = np.nan
    rt = rt or parse_rt(DEFAULT_RT)
    logrt = rt.intercept + rng.standard_normal((S, B, T)) * rt.sd
    for coef, name in rt.terms:
        logrt = logrt + coef * np.nan_to_num(sig.arrays[name], nan=0.0)
    out = Cohort(
        subjects=cohort.subjects,
        outcome=cohort.outcome,
        response=response,
        rt_ms=np.round(np.exp(logrt), 1),
        valid=cohort.valid,
        true_vol=cohort.true_vol,
        true_sto=cohort.true_sto,
        condition=cohort.condition,
        group=list(params["group"]) if "group" in params.columns else [],
        latent=cohort.latent,
    )
    return AgentsResult(out, params.assign(subject=cohort.subjects))
