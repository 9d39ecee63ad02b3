"""cbf-sim and cbf-fit through the installed executables."""

from __future__ import annotations

import json

import pytest

TASK = ["cbf-sim", "task", "--seed", "1", "--trials", "12"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from tests.conftest import _run

    folder = tmp_path_factory.mktemp("cbf")
    task = _run([*TASK, "-o", folder / "task.csv"])
    assert task.returncode == 0, task.stderr
    agents = _run(
        [
            "cbf-sim",
            "agents",
            folder / "task.csv",
            "--agent",
            "kf",
            "--population",
            "healthy:2,vol-blind:1",
            "-o",
            folder / "a.csv",
            "--params-out",
            folder / "truth.csv",
        ]
    )
    assert agents.returncode == 0, agents.stderr
    return folder


def test_help_names_examples(run_cli):
    for exe in ("cbf-sim", "cbf-fit"):
        out = run_cli([exe, "--help"]).stdout.decode()
        assert "EXAMPLES" in out and "EXIT STATUS" in out


def test_task_to_stdout_is_the_long_table_and_seeded(run_cli):
    a, b = run_cli(TASK), run_cli(TASK)
    assert a.returncode == 0 and a.stdout == b.stdout
    lines = a.stdout.decode().splitlines()
    assert lines[0] == "subject,block,trial,condition,true_vol,true_sto,outcome,response,rt_ms,latent"
    assert len(lines) == 1 + 4 * 12
    assert run_cli([*TASK[:3], "2", *TASK[4:]]).stdout != a.stdout


def test_agents_from_stdin(run_cli):
    task = run_cli(TASK).stdout
    out = run_cli(["cbf-sim", "agents", "--agent", "kf", "--population", "healthy:2"], input=task)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.decode().splitlines()
    assert len(rows) == 1 + 2 * 4 * 12 and rows[0].endswith(",group")


def test_fit_is_byte_identical_and_signals_and_analyze_run(run_cli, files, tmp_path):
    # Cold against warm: the first run compiles the Numba kernels into an empty cache, the second loads them
    # from it (a cached parallel fastmath kernel once gave other gradients at ~1e-9); and 1 against 2 threads.
    args = ["cbf-fit", "fit", files / "a.csv", "--k", "5", "--restarts", "2"]
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    one = run_cli([*args, "-j", "1", "-o", files / "p1.csv"], env=env)
    assert one.returncode == 0, one.stderr
    assert list((tmp_path / "numba").rglob("kernels.cbf_value_adjoint-*.nbi")), "the first run did not fill the cache"
    two = run_cli([*args, "-j", "2", "-o", files / "p2.csv"], env=env)
    assert two.returncode == 0, two.stderr
    assert (files / "p1.csv").read_bytes() == (files / "p2.csv").read_bytes()
    summary = json.loads(one.stdout)
    assert summary["n_subjects"] == 3 and summary["n_failed"] == 0
    sig = run_cli(
        ["cbf-fit", "signals", files / "a.csv", "--params", files / "p1.csv", "--k", "5", "-o", files / "s.parquet"]
    )
    assert sig.returncode == 0, sig.stderr
    import pandas as pd

    frame = pd.read_parquet(files / "s.parquet")
    assert list(frame.columns) == [
        "subject",
        "block",
        "trial",
        "pred_mean",
        "pred_var",
        "lr",
        "vol_mean",
        "sto_mean",
        "ambiguity",
        "entropy",
    ]
    res = run_cli(
        [
            "cbf-fit",
            "analyze",
            files / "a.csv",
            "--params",
            files / "p1.csv",
            "--signals",
            files / "s.parquet",
            "--out",
            files / "sub.csv",
        ]
    )
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert set(result) >= {"glm", "phenotype", "rt"} and (files / "sub.csv").exists()


def test_bad_response_exits_2_and_keeps_the_output(run_cli, files, one_line_error):
    text = (files / "a.csv").read_text().splitlines()
    cells = text[3].split(",")
    cells[7] = "95"
    (files / "bad.csv").write_text("\n".join([*text[:3], ",".join(cells), *text[4:]]) + "\n")
    (files / "keep.csv").write_text("precious\n")
    proc = run_cli(["cbf-fit", "fit", files / "bad.csv", "-o", files / "keep.csv", "--force"])
    one_line_error(
        proc,
        "cbf-fit",
        f"{files / 'bad.csv'}: line 4: response 95 is outside the response range [10, 90]; fix the row or pass --clip LO,HI",
    )
    assert (files / "keep.csv").read_text() == "precious\n"


def test_existing_output_needs_force(run_cli, files, one_line_error):
    (files / "exists.csv").write_text("x\n")
    proc = run_cli([*TASK, "-o", files / "exists.csv"])
    one_line_error(proc, "cbf-sim", "already exists; pass --force")
    assert (files / "exists.csv").read_text() == "x\n"


def test_bad_rt_formula_and_population(run_cli, files, one_line_error):
    proc = run_cli(["cbf-sim", "agents", files / "task.csv", "--rt", "rt=3"])
    one_line_error(proc, "cbf-sim", "--rt must look like")
    proc = run_cli(["cbf-sim", "agents", files / "task.csv", "--population", "happy:3"])
    one_line_error(proc, "cbf-sim", "--population: 'happy:3' must be GROUP:N")


def test_params_for_another_model_is_named(run_cli, files, one_line_error):
    proc = run_cli(["cbf-fit", "signals", files / "a.csv", "--params", files / "truth.csv"])
    one_line_error(proc, "cbf-fit", "no 'model' column")


def test_head_is_quiet(shell):
    proc = shell("cbf-sim task | head -1")
    assert proc.returncode == 0 and proc.stderr == b""


@pytest.mark.slow  # ~30 s; tests/cbf/test_derivfree.py covers the optimiser in `make test`
def test_pf_hpl_fit_by_bayesian_optimisation_is_reproducible(run_cli, files):
    args = ["cbf-fit", "fit", files / "a.csv", "--model", "pf-hpl", "--optimizer", "bo"]
    args += ["--particles", "50", "--runs", "1", "--evaluations", "6", "--seed", "2"]
    one = run_cli([*args, "-o", files / "bo1.csv"])
    assert one.returncode == 0, one.stderr
    assert run_cli([*args, "-o", files / "bo2.csv"]).returncode == 0
    assert (files / "bo1.csv").read_bytes() == (files / "bo2.csv").read_bytes()
    header = (files / "bo1.csv").read_text().splitlines()[0].split(",")
    assert {"mu_v", "mu_s", "sigma", "sse", "evaluations"} <= set(header)


def test_pf_params_outside_their_range_are_named(run_cli, files, one_line_error):
    rows = "".join(f"{s},pf-beta,{lam},0.2,10,30\n" for s, lam in (("s0001", 0.2), ("s0002", 1.5), ("s0003", 0.2)))
    (files / "badpf.csv").write_text("subject,model,lambda_v,lambda_s,v0,s0\n" + rows)
    proc = run_cli(["cbf-fit", "signals", files / "a.csv", "--params", files / "badpf.csv"])
    one_line_error(proc, "cbf-fit", "badpf.csv: subject s0002: 'lambda_v' = 1.5 is outside [0, 1)")


def test_device_cuda_without_a_gpu_fails_with_one_line(run_cli, files, one_line_error):
    from methodkit.core.backend import cuda_available

    if cuda_available():
        pytest.skip("a CUDA device is present")
    proc = run_cli(["cbf-fit", "fit", files / "a.csv", "--model", "pf-beta", "--device", "cuda", "--evaluations", "6"])
    one_line_error(proc, "cbf-fit", "--device cuda", code=1)
