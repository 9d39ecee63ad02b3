"""Registry of real data sets that ship inside installed packages (name -> loader).

Nothing here downloads: each loader reads files that a PyPI or Debian package put
on disk. Methods add their own entries with `register(...)` in a module of their
own topic and list it in `_PROVIDERS`, so `methodkit-data list` shows them all.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from methodkit.core.errors import DataError


@dataclass(frozen=True)
class Dataset:
    name: str
    loader: Callable  # () -> pandas.DataFrame
    source: str  # the package that ships the file
    licence: str
    description: str
    target: str | None = None  # the conventional response column, if any


_REGISTRY: dict[str, Dataset] = {}
# Modules that register more data sets when imported: core ones listed here, and every
# `methodkit.tools.<method>.datasets` module, found by name so a method adds data without editing this file.
_PROVIDERS: list[str] = ["methodkit.core.images", "methodkit.core.text.corpora"]
# Name prefixes that open a user's file instead of a registered set ("text:FILE"): prefix -> loader(FILE).
_SCHEMES: dict[str, Callable] = {}
_loaded_providers = False


def _tool_providers() -> list[str]:
    import pkgutil

    import methodkit.tools as tools

    found = []
    for package in pkgutil.iter_modules(tools.__path__):
        if package.ispkg:
            spec = importlib.util.find_spec(f"methodkit.tools.{package.name}.datasets")
            if spec is not None:
                found.append(spec.name)
    return sorted(found)


def register(dataset: Dataset) -> Dataset:
    if dataset.name in _REGISTRY:
        raise ValueError(f"data set {dataset.name!r} is registered twice")
    _REGISTRY[dataset.name] = dataset
    return dataset


def register_scheme(prefix: str, loader: Callable) -> None:
    _SCHEMES[prefix] = loader


def _load_providers() -> None:
    global _loaded_providers
    if not _loaded_providers:
        _loaded_providers = True
        for module in [*_PROVIDERS, *_tool_providers()]:
            registrar = getattr(importlib.import_module(module), "_register_tables", None)
            if registrar is not None:
                registrar()


def names() -> list[str]:
    _load_providers()
    return sorted(_REGISTRY)


def info(name: str) -> Dataset:
    _load_providers()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown data set '{name}'; run 'methodkit-data list' to see the names") from None


def load(name: str):
    """The data set as a pandas DataFrame (one column per variable, target last where there is one)."""
    _load_providers()
    prefix, colon, path = name.partition(":")
    frame = _SCHEMES[prefix](path) if colon and prefix in _SCHEMES else info(name).loader()
    frame.attrs["source"] = name
    return frame


# ---------------------------------------------------------------- scikit-learn's bundled files


def _sklearn(loader_name: str, target_name: str = "y"):
    def load_frame():
        import sklearn.datasets as skd

        bunch = getattr(skd, loader_name)(as_frame=True)
        frame = bunch.frame.copy()
        if "target" in frame.columns:
            frame = frame.rename(columns={"target": target_name})
        return frame

    return load_frame


def _linnerud():
    import sklearn.datasets as skd

    bunch = skd.load_linnerud(as_frame=True)
    return bunch.data.join(bunch.target)


_SKLEARN_LICENCE = "BSD-3-Clause (scikit-learn)"
for _name, _loader, _target, _desc in [
    (
        "breast_cancer",
        "load_breast_cancer",
        "y",
        "Wisconsin diagnostic breast cancer: 30 cell-nucleus features, y = benign (1)",
    ),
    (
        "diabetes",
        "load_diabetes",
        "y",
        "Efron et al. diabetes: 10 standardised baseline variables, y = progression after 1 year",
    ),
    ("digits", "load_digits", "y", "UCI optical digits: 8x8 images as 64 pixel columns (0-16), y = digit"),
    ("wine", "load_wine", "y", "UCI wine recognition: 13 chemical measurements, y = cultivar (0-2)"),
]:
    register(Dataset(_name, _sklearn(_loader, _target), "scikit-learn", _SKLEARN_LICENCE, _desc, _target))
register(
    Dataset(
        "linnerud",
        _linnerud,
        "scikit-learn",
        _SKLEARN_LICENCE,
        "Linnerud fitness: 3 exercises (Chins, Situps, Jumps) and 3 physiological targets (Weight, Waist, Pulse)",
        None,
    )
)


# ---------------------------------------------------------------- statsmodels' bundled files


def _statsmodels(module: str, endog_name: str):
    def load_frame():
        data = importlib.import_module(f"statsmodels.datasets.{module}").load_pandas()
        exog = data.exog.copy()
        endog = data.endog
        if hasattr(endog, "to_frame") and getattr(endog, "ndim", 1) == 1:
            endog = endog.rename(endog_name).to_frame()
        frame = exog.join(endog) if endog_name not in exog.columns else exog
        return frame.reset_index(drop=True)

    return load_frame


for _name, _module, _target, _desc in [
    (
        "longley",
        "longley",
        "TOTEMP",
        "Longley (1967) US macro series 1947-62: 6 collinear regressors, TOTEMP = total employment",
    ),
    (
        "stackloss",
        "stackloss",
        "STACKLOSS",
        "Brownlee stack loss: 21 plant days, air flow/water temp/acid conc, STACKLOSS",
    ),
    (
        "star98",
        "star98",
        "NABOVE",
        "California STAR 1998 test scores: 303 districts, NABOVE = students above national median",
    ),
    ("cpunish", "cpunish", "EXECUTIONS", "US capital punishment 1997: 17 states, EXECUTIONS count with 6 covariates"),
    ("scotland", "scotland", "YES", "Scottish parliament vote 1997: 32 council areas, YES = share for tax powers"),
    ("spector", "spector", "GRADE", "Spector & Mazzeo economics teaching: 32 students, GRADE improved (0/1)"),
]:
    register(
        Dataset(_name, _statsmodels(_module, _target), "statsmodels", "BSD-3-Clause (statsmodels)", _desc, _target)
    )
