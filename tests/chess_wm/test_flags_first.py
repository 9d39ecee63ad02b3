"""--checkpoint is checked before any input is read (issue 22 item 10)."""

from __future__ import annotations


def test_predict_missing_checkpoint_is_named_before_the_input_is_read(run_cli, tmp_path, one_line_error):
    proc = run_cli(["chess-wm", "predict", tmp_path / "no-input.txt", "--checkpoint", tmp_path / "no-run"])
    one_line_error(proc, "chess-wm", "no-run", "no such checkpoint")


def test_eval_checks_every_checkpoint_before_the_data(run_cli, tmp_path, one_line_error):
    proc = run_cli(["chess-wm", "eval", "--checkpoint", tmp_path / "no-run", f"x={tmp_path / 'no-data'}"])
    one_line_error(proc, "chess-wm", "no-run", "no such checkpoint")
