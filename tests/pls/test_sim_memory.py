"""pls-test sim refuses a table that cannot fit in memory before drawing it (issue 22 item 10)."""

from __future__ import annotations


def test_sim_too_big_for_memory_is_refused_with_the_flags(run_cli, tmp_path, one_line_error):
    proc = run_cli(["pls-test", "sim", "-n", "100000000", "-p", "100000", "-o", tmp_path / "s.csv"])
    one_line_error(proc, "pls-test", "-n/--rows", "100,000,000 x 100,000 table", "of memory")
    assert not (tmp_path / "s.csv").exists()
