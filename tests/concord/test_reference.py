"""The published-throughput check (Narayanan et al. 2021, Table 1) and its fixture."""

from __future__ import annotations

import copy

import pytest
import yaml

from methodkit.core.errors import DataError
from methodkit.tools.concord import narayanan2021, reference, spec
from methodkit.tools.concord.search import model_flops_per_step

PROG = "concord-plan"


def _rows():
    return [dict(zip(narayanan2021.COLUMNS, r)) for r in narayanan2021.ROWS]


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['params_b']}B")
def test_table_rows_agree_with_each_other_and_with_our_parameter_count(row):
    """A typo in the hand-copied table shows up as a disagreement between its own columns."""
    setting = narayanan2021.SETTING
    assert reference.paper_params(row, setting) / 1e9 == pytest.approx(row["params_b"], abs=0.051)  # 1 decimal
    assert round(100 * row["tflops_per_gpu"] / 312) == row["percent_peak"]
    assert row["tflops_per_gpu"] * row["gpus"] / 1000 == pytest.approx(
        row["aggregate_pflops"], abs=0.5 * row["gpus"] / 1000 + 0.05
    )  # TFLOP/s per GPU are rounded to integers
    model = spec.load_model(reference.model_doc(row, setting))
    # ours has no learned position embeddings (s*h) and no biases: within 0.5% of Eq. 2
    assert model.param_count() == pytest.approx(reference.paper_params(row, setting), rel=5e-3)
    assert row["gpus"] % (row["tp"] * row["pp"]) == 0


def test_eq3_flops_are_our_flops_plus_one_recomputed_forward_of_the_blocks():
    """Eq. 3 counts 4 forward passes of every block (recompute) and 3 of the LM head: our FLOP
    templates (3 passes, c = 1 without flash attention) must reproduce it exactly."""
    setting = narayanan2021.SETTING
    for row in _rows()[:3] + _rows()[-1:]:
        model = spec.load_model(reference.model_doc(row, setting))
        ours = model_flops_per_step(model)
        head = 3 * 2.0 * row["batch"] * setting["seq"] * row["hidden"] * setting["vocab"]
        assert ours + (ours - head) / 3 == pytest.approx(reference.paper_flops(row, setting), rel=1e-12)


def test_smallest_and_largest_rows_are_predicted_within_20_percent():
    table = reference.load_table(reference.builtin_table())
    rows = table.rows
    table.rows = rows[:1]
    result = reference.check(table, mbs=(1, 8), vpp=(1, 2))
    table.rows = rows[-1:]
    result.rows += reference.check(table, mbs=(1,), vpp=(1, 2)).rows
    small, big = result.rows
    assert small["mbs"] == 8 and small["vpp"] == 1  # pp = 1: no interleaving
    assert big["dp"] == 6 and big["bubble_fraction"] > 0
    for r in result.rows:
        assert r["within"] and 0.8 <= r["ratio"] <= 1.2, r
    assert result.summary()["within"] == 2


@pytest.mark.slow
def test_all_ten_rows_within_20_percent():
    result = reference.check(reference.load_table(reference.builtin_table()))
    assert result.within == 10, [(r["params_b"], r["ratio"]) for r in result.rows]


def test_bad_tables_name_the_key_path():
    doc = reference.builtin_table()
    bad = copy.deepcopy(doc)
    bad["rows"][1]["tp"] = "eight"
    with pytest.raises(DataError, match=r"rows\[1\]\.tp: expected a number"):
        reference.load_table(bad, "t.yaml")
    bad = copy.deepcopy(doc)
    bad["rows"][2]["gpus"] = 102
    with pytest.raises(DataError, match=r"rows\[2\]\.gpus: 102 is not a multiple of tp\*pp = 4"):
        reference.load_table(bad, "t.yaml")
    bad = copy.deepcopy(doc)
    bad["setting"]["recompute"] = "most"
    with pytest.raises(DataError, match="setting.recompute"):
        reference.load_table(bad, "t.yaml")
    with pytest.raises(DataError, match="rows"):
        reference.load_table({"rows": []}, "t.yaml")


def test_cli_reference_check_passes_and_fails(run_cli, one_line_error, tmp_path):
    doc = reference.builtin_table()
    doc["rows"] = doc["rows"][:1]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(doc))
    proc = run_cli([PROG, "reference", "t.yaml", "--mbs", "8", "--vpp", "1", "--check"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    header, line = proc.stdout.decode().splitlines()
    row = dict(zip(header.split(","), line.split(",")))
    assert row["published_tflops"] == "137.0" and 0.8 <= float(row["ratio"]) <= 1.2
    assert b"1/1 rows within" in proc.stderr
    doc["rows"][0]["tflops_per_gpu"] = 300  # a doctored figure: the check must fail
    (tmp_path / "t2.yaml").write_text(yaml.safe_dump(doc))
    args = [PROG, "reference", "t2.yaml", "--mbs", "8", "--vpp", "1", "--check", "-o", "out.csv"]
    proc = run_cli(args, cwd=tmp_path)
    assert proc.returncode == 3 and b"outside +-20%: 1.7B" in proc.stderr
    assert (tmp_path / "out.csv").exists()  # the table is written before the check fails
    doc["rows"][0]["layers"] = -3
    (tmp_path / "t3.yaml").write_text(yaml.safe_dump(doc))
    one_line_error(run_cli([PROG, "reference", "t3.yaml"], cwd=tmp_path), PROG, "rows[0].layers")
