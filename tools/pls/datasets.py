"""PLS regression data sets from Debian's r-cran-caret / r-cran-pls (`pls-test datasets --fetch`).

All are registered with methodkit.core.datasets, so `methodkit-data list` shows them with
their source and licence; until fetched their loader raises DataError, which the listing
shows as "unavailable: ... run 'pls-test datasets --fetch'". `pls-test` reaches them as
`builtin:NAME[:target]`, with the X columns below as the default.
"""

from __future__ import annotations

from dataclasses import dataclass

from methodkit.core.datasets import Dataset, register
from methodkit.tools.pls import debian_data


@dataclass(frozen=True)
class PlsSet:
    name: str
    package: str
    licence: str
    target: str
    x: str  # default X glob
    description: str


SETS = [
    PlsSet(
        "tecator",
        "r-cran-caret (Debian)",
        "StatLib tecator: free for non-commercial use; caret GPL-2+",
        "fat",
        "absorp_*",
        "Tecator meat NIR: 215 samples, 100 absorbances (850-1050 nm); moisture, fat, protein",
    ),
    PlsSet(
        "bloodbrain",
        "r-cran-caret (Debian)",
        "caret GPL-2+ (Mente & Lombardo 2005)",
        "logBBB",
        "*",
        "Blood-brain barrier: 208 compounds, 134 descriptors; logBBB",
    ),
    PlsSet(
        "cox2",
        "r-cran-caret (Debian)",
        "caret GPL-2+ (Sutherland et al. 2003)",
        "IC50",
        "*",
        "COX-2 inhibitors: 462 compounds, 255 descriptors; IC50",
    ),
    PlsSet(
        "gasoline",
        "r-cran-pls (Debian)",
        "pls GPL-2 (Kalivas 1997)",
        "octane",
        "NIR_*",
        "Gasoline NIR: 60 samples, 401 wavelengths (900-1700 nm); octane",
    ),
    PlsSet(
        "yarn",
        "r-cran-pls (Debian)",
        "pls GPL-2 (Swierenga et al. 1999)",
        "density",
        "NIR_*",
        "PET yarn NIR: 28 samples, 268 wavelengths; density (train flag kept)",
    ),
    PlsSet(
        "mayonnaise",
        "r-cran-pls (Debian)",
        "pls GPL-2 (Indahl et al. 1999)",
        "oil_type",
        "NIR_*",
        "Mayonnaise NIR: 162 spectra, 351 wavelengths; oil type (1-6), design, train flag",
    ),
    PlsSet(
        "oliveoil",
        "r-cran-pls (Debian)",
        "pls GPL-2 (Massart et al. 1998)",
        "sensory_1",
        "chemical_*",
        "Olive oil: 16 oils, 5 chemical and 6 sensory (sensory_1..6) measurements",
    ),
]
BY_NAME = {s.name: s for s in SETS}


def _loader(name: str):
    def load():
        return debian_data.load(name)

    return load


for _set in SETS:
    register(Dataset(_set.name, _loader(_set.name), _set.package, _set.licence, _set.description, _set.target))
