"""Wide CSVs with short or long rows are refused with the line; a draw too big for memory is refused first."""

from __future__ import annotations

import pytest

ROWS = ["1,0,1,1", "0,1,1,0", "1,1,0,1", "0,0,1,1", "1,0,0,1", "1,1,1,0"]


@pytest.mark.parametrize("bad, saw", [("0,1", 2), ("0,1,1,0,1", 5)])
def test_headerless_wide_csv_with_a_ragged_row_names_the_line(run_cli, tmp_path, one_line_error, bad, saw):
    path = tmp_path / "wide.csv"
    path.write_text("\n".join([*ROWS[:3], bad, *ROWS[3:]]) + "\n")
    proc = run_cli(["irt-fit", "fit", "--no-header", path, "--out-dir", tmp_path / "fit"])
    one_line_error(proc, "irt-fit", "wide.csv: line 4", f"expected 4 fields, saw {saw}")
    assert not (tmp_path / "fit").exists()


def test_wide_csv_with_header_and_a_short_row_names_the_line(run_cli, tmp_path, one_line_error):
    path = tmp_path / "wide.csv"
    rows = [f"m{i},{r}" for i, r in enumerate(ROWS)]
    rows[2] = "m2,1,0"
    path.write_text("\n".join(["model_id,a,b,c,d", *rows]) + "\n")
    proc = run_cli(["irt-fit", "fit", path, "--out-dir", tmp_path / "fit"])
    one_line_error(proc, "irt-fit", "wide.csv: line 4", "expected 5 fields, saw 3")


def test_draw_too_big_for_memory_is_refused_with_the_flags(run_cli, tmp_path, one_line_error):
    proc = run_cli(["irt-sim", "draw", "-N", "10000000", "-J", "1000000", "-o", tmp_path / "d.npz"])
    one_line_error(proc, "irt-sim", "-N/--n-models", "response matrix", "of memory")
    assert not (tmp_path / "d.npz").exists()
