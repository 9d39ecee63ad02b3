"""Real data from Debian's r-cran-caret / r-cran-pls (slow: needs `pls-test datasets --fetch` once).

These fail, not skip, when the data have not been fetched: `make test-all` must show it.
"""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.pls import api, debian_data, sources
from methodkit.tools.pls.data import from_frame

pytestmark = pytest.mark.slow


def _tecator(target):
    path = debian_data.parquet_path("tecator")
    assert path.exists(), f"{path} missing: run 'pls-test datasets --fetch' first (apt-get download r-cran-caret)"
    frame, target, x = sources.builtin(f"builtin:tecator:{target}", None, None, None)
    return from_frame(frame, target, x_glob=x)


def test_every_data_set_reads_with_its_shape():
    shapes = {"tecator": (215, 103), "gasoline": (60, 402), "yarn": (28, 270), "mayonnaise": (162, 358),
              "oliveoil": (16, 11), "bloodbrain": (208, 135), "cox2": (462, 256)}  # fmt: skip
    for name, shape in shapes.items():
        assert debian_data.load(name).shape == shape, name


@pytest.mark.parametrize("target,plskit_statistic", [("moisture", 0.917), ("fat", 0.912), ("protein", 0.786)])
def test_tecator_k3_all_methods_reject_and_statistic_matches_plskit(target, plskit_statistic):
    d = _tecator(target)
    assert d.n == 215 and d.p == 100
    opts = api.Options(method="all", seed=42, force_nb=True, perms=999, rotate="varimax")
    rows = {r.method: r for r in api.run(d, [3], opts)}
    assert rows["nb"].gate["fired"] and rows["nb"].gate["stable_rank"] == pytest.approx(1.01, abs=0.01)
    for m in ("nb", "nb-perm", "cvq2-perm"):
        assert rows[m].pvalue < 0.001 + 1e-12, m
        assert rows[m].rotation_delta <= 1e-9
    assert abs(rows["nb"].statistic - plskit_statistic) < 0.02
    assert np.isfinite(rows["jackknife"].pvalue)
