"""cuvet-assign through the installed executable."""

from __future__ import annotations

import json
import os

import pytest

PROG = "cuvet-assign"
SYN = ["--treatment", "treatment", "--value", "conversion", "--arm-costs", "0,1,2,3,4", "--cost-on-outcome"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from methodkit.tools.cuvet import synth

    folder = tmp_path_factory.mktemp("cuvet")
    frame, _ = synth.synthetic(6000, 0)
    frame.to_csv(folder / "s.csv", index=False)
    return folder


def test_help(run_cli):
    proc = run_cli([PROG, "--help"])
    assert proc.returncode == 0 and b"EXAMPLES" in proc.stdout
    for verb in ("gen", "fit", "assign", "evaluate", "bench", "tree"):
        assert run_cli([PROG, verb, "--help"]).returncode == 0


FIT = ["--budget-frac", "0.4", "--bayes", "--lookahead", "--max-depth", "2", "--seed", "2"]


@pytest.fixture(scope="module")
def model_file(synthetic):
    """fit FILE -o FILE (CUVET-B with the lookahead splits), shared by the tests below."""
    from tests.conftest import _run

    d = synthetic
    fit = _run([PROG, "fit", d / "s.csv", *SYN, *FIT, "-o", d / "m.json"])
    assert fit.returncode == 0, fit.stderr
    summary = json.loads(fit.stdout)
    assert summary["variant"] == "cuvet-b" and summary["model"] == str(d / "m.json")
    return d / "m.json"


def test_fit_stdin_to_stdout_is_seeded(run_cli, synthetic, model_file):
    """stdin -> stdout gives the same model as the file -> -o file run with the same seed."""
    data = (synthetic / "s.csv").read_bytes()
    a = run_cli([PROG, "fit", "-", *SYN, *FIT], input=data)
    assert a.returncode == 0, a.stderr
    streamed = json.loads(a.stdout)
    assert streamed["format"] == "cuvet-model/1" and streamed["seed"] == 2
    assert streamed == json.loads(model_file.read_text())


def test_pipeline_files(run_cli, synthetic, model_file):
    d = synthetic
    out = run_cli([PROG, "assign", model_file, d / "s.csv", "-o", d / "a.parquet", "--seed", "1"])
    assert out.returncode == 0, out.stderr
    again = run_cli([PROG, "assign", model_file, d / "s.csv", "-o", d / "b.parquet", "--seed", "1"])
    assert (d / "a.parquet").read_bytes() == (d / "b.parquet").read_bytes() and again.returncode == 0
    budget = str(json.loads(model_file.read_text())["budget_per_user"] * 6000)
    # one run for the result and the gate: the result JSON is written before --fail-below exits 3
    ev = run_cli(
        [PROG, "evaluate", d / "s.csv", d / "a.parquet", *SYN, "--n-boot", "20", "--budget", budget]
        + ["--fail-below", "1e9"]
    )
    assert ev.returncode == 3 and b"below --fail-below" in ev.stderr
    result = json.loads(ev.stdout)
    assert result["feasible"] and result["n"] == 6000
    tree = run_cli([PROG, "tree", model_file])
    assert tree.returncode == 0 and b"leaf 0" in tree.stdout


def test_gen_thornton_has_the_dose_bins(run_cli, tmp_path):
    proc = run_cli([PROG, "gen", "thornton", "-o", tmp_path / "t.csv"])
    assert proc.returncode == 0, proc.stderr
    side = json.loads((tmp_path / "t.csv.json").read_text())
    assert len(side["arm_costs"]) == 6 and side["arm_costs"][0] == 0.0
    assert (tmp_path / "t.csv").read_text().count("\n") == 2835


def test_bad_inputs_exit_2_and_keep_outputs(run_cli, synthetic, tmp_path, one_line_error):
    d = synthetic
    keep = tmp_path / "m.json"
    keep.write_text("precious")
    both = run_cli([PROG, "fit", d / "s.csv", *SYN, "--cost", "x", "--budget", "1", "-o", keep, "--force"])
    one_line_error(both, PROG, "either --cost or --arm-costs")
    neg = run_cli(
        [PROG, "fit", d / "s.csv", *SYN[:4], "--arm-costs", "0,-1,2,3,4", "--budget", "1", "-o", keep, "--force"]
    )
    one_line_error(neg, PROG, "non-negative")
    zero = run_cli([PROG, "fit", d / "s.csv", *SYN, "--budget", "0", "-o", keep, "--force"])
    one_line_error(zero, PROG, "budget must be positive")
    assert keep.read_text() == "precious"
    bad = tmp_path / "bad.csv"
    bad.write_text("treatment,conversion,x\n0,1,2\n1,0,3\nfoo,1,2\n")
    one_line_error(
        run_cli([PROG, "fit", bad, *SYN[:4], "--arm-costs", "0,1", "--budget", "1"]),
        PROG,
        "line 4: treatment 'treatment' is not an integer arm",
    )
    nomodel = run_cli([PROG, "assign", d / "s.csv", d / "s.csv"])
    one_line_error(nomodel, PROG, "invalid JSON")
    exists = run_cli([PROG, "fit", d / "s.csv", *SYN, "--budget-frac", "0.4", "-o", keep])
    one_line_error(exists, PROG, "already exists")


def test_head_is_quiet(shell, synthetic):
    proc = shell("cuvet-assign gen synthetic --n 2000 | head -1")
    assert proc.stderr == b"" and proc.stdout.startswith(b"id,")


def test_flags_are_checked_before_the_input_is_read(run_cli, tmp_path, one_line_error):
    """issue 22 item 10: the input is garbage, so a flag checked after reading it would be a parse error."""
    missing = tmp_path / "garbage.csv"
    missing.write_bytes(bytes(range(256)))
    one_line_error(run_cli([PROG, "fit", missing, "--budget-frac", "0.4"]), PROG, "pass --treatment COL")
    one_line_error(run_cli([PROG, "fit", missing, "--treatment", "t"]), PROG, "pass exactly one of --budget")
    one_line_error(run_cli([PROG, "bench", missing, "--value", "v"]), PROG, "pass --treatment COL")
    proc = run_cli([PROG, "evaluate", missing, tmp_path / "a.csv", "--treatment", "t"])
    one_line_error(proc, PROG, "pass --value COL")


def test_gen_refuses_a_table_that_cannot_fit_with_the_estimate(run_cli, tmp_path, one_line_error):
    out = tmp_path / "big.parquet"
    proc = run_cli([PROG, "gen", "synthetic", "--n", str(10**13), "-o", out])
    one_line_error(proc, PROG, "--n: a synthetic table of 10,000,000,000,000 rows needs about")
    assert "lower --n" in proc.stderr.decode() and not out.exists() and not (tmp_path / "big.parquet.json").exists()


def test_default_threads_parallel_only_with_chunks_of_rows(run_cli, synthetic):
    """No -j: one thread until the histogram has two chunks of rows per tree half (bench/threads)."""
    from methodkit.tools.cuvet.parallel import CHUNK_ROWS, default_threads

    assert default_threads(20000) == 1
    assert default_threads(4 * CHUNK_ROWS - 2) == 1 and default_threads(4 * CHUNK_ROWS) == 0
    assert default_threads(2 * CHUNK_ROWS, honest=False) == 0
    script = (
        "import sys\n"
        "from methodkit.cli.cuvet_assign import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "import numba\n"
        "print(numba.config.NUMBA_NUM_THREADS, numba.get_num_threads(), file=sys.stderr)\n"
    )
    args = ["fit", synthetic / "s.csv", *SYN, "--budget-frac", "0.4", "--max-depth", "1", "-o", "-", "-q"]
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.endswith("NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-P", "-c", script, *map(str, args)], capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().split()[-2:] == ["1", "1"], proc.stderr  # 6,000 rows: the -j 1 pool


def test_bench_summary_in_a_log_is_csv_with_whole_columns(run_cli, synthetic):
    """Issue 35 item 6: stderr that is not a terminal gets the summary as CSV, not a rich table cut to 5 chars."""
    proc = run_cli(
        [
            PROG,
            "bench",
            synthetic / "s.csv",
            *SYN,
            "--methods",
            "uniform,cuvet",
            "--budgets",
            "0.4",
            "--seeds",
            "1",
            "--folds",
            "2",
            "-o",
            synthetic / "b.csv",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.decode()
    assert "┃" not in err and "━" not in err
    header = next(line for line in err.splitlines() if "," in line)
    assert "method" in header.split(","), header
