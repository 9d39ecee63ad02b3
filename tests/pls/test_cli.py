"""pls-test through the installed executable: the command-line contract."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

FAST = ["-j", "1", "--splits", "10", "--perms", "49"]


@pytest.fixture(scope="module")
def sim_csv(tmp_path_factory):
    from methodkit.tools.pls.simulate import simulate

    X, y = simulate("toeplitz0.5", 60, 12, snr=0.5, rng=np.random.default_rng(4))
    frame = pd.DataFrame(X, columns=[f"x{j + 1}" for j in range(12)]).assign(y=y)
    path = tmp_path_factory.mktemp("pls") / "sim.csv"
    frame.to_csv(path, index=False)
    return path


def _rows(proc):
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def test_help_lists_verbs(run_cli):
    proc = run_cli(["pls-test", "--help"])
    assert proc.returncode == 0
    for verb in ("test", "sim", "power", "datasets", "bench"):
        assert verb in proc.stdout.decode()
    assert "EXIT STATUS" in run_cli(["pls-test", "test", "--help"]).stdout.decode()


def test_stdin_to_stdout_jsonl_with_all_fields(run_cli, sim_csv):
    rows = _rows(run_cli(["pls-test", "test", "-k", "1,2", "--method", "all", *FAST], input=sim_csv.read_bytes()))
    assert [(r["method"], r["k"]) for r in rows] == [
        (m, k) for k in (1, 2) for m in ("nb", "nb-perm", "cvq2-perm", "jackknife")
    ]
    for key in ("statistic", "mean_r", "heldout_r2", "t", "df", "pvalue", "n_splits", "n_perm", "n_folds", "q2",
                "gate", "rho_hat", "rotation_delta", "n_fits", "seconds", "seed", "version"):  # fmt: skip
        assert key in rows[0]
    assert set(rows[0]["gate"]) == {"fired", "reason", "stable_rank", "n_eff"}
    assert rows[0]["pvalue"] < 0.05  # snr 0.5 at n = 60 is found


def test_file_to_output_file_and_side_files(run_cli, sim_csv, tmp_path):
    out = tmp_path / "res.jsonl"
    args = ["pls-test", "test", sim_csv, "-k", "2", "--method", "all", *FAST, "-o", out]
    args += ["--per-split", tmp_path / "s.csv", "--null", tmp_path / "null.npz", "--loadings", tmp_path / "w.csv"]
    args += ["--coef", tmp_path / "coef.csv", "--rotate", "varimax"]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b""
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(r["rotation_delta"] <= 1e-9 for r in rows)
    splits = pd.read_csv(tmp_path / "s.csv")
    assert list(splits.columns[:7]) == ["method", "k", "split", "n_train", "n_test", "r", "z"]
    assert len(splits) == 20  # nb and nb-perm, 10 splits each
    np.testing.assert_allclose(np.tanh(splits.groupby("method")["z"].mean()), rows[0]["statistic"])
    with np.load(tmp_path / "null.npz") as nulls:
        assert sorted(nulls.files) == ["cvq2-perm_k2", "nb-perm_k2"] and nulls["nb-perm_k2"].shape == (49,)
    w = pd.read_csv(tmp_path / "w.csv")
    assert set(w["block"]) == {"W", "W_varimax", "rotation"}
    coef = pd.read_csv(tmp_path / "coef.csv")
    assert list(coef.columns) == ["k", "variable", "coef", "sd", "t", "df", "p", "p_holm"] and len(coef) == 12


def test_same_seed_same_bytes(run_cli, sim_csv):
    args = ["pls-test", "test", sim_csv, "-k", "2", "--method", "nb-perm", *FAST, "--seed", "5"]
    a, b = run_cli(args), run_cli(args)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in _rows(a)]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in _rows(b)]
    assert strip[0]["seed"] == 5
    s1 = run_cli(["pls-test", "sim", "-n", "30", "-p", "5", "--seed", "2"])
    s2 = run_cli(["pls-test", "sim", "-n", "30", "-p", "5", "--seed", "2"])
    assert s1.stdout == s2.stdout and s1.stdout.count(b"\n") == 31


@pytest.mark.parametrize(
    "content,args,fragments",
    [
        ("x1,x2,y\n1,2,3\n", ["-k", "auto"], ["-k auto is refused"]),
        ("a,b,c,d,e,y\n" + "".join(f"{i},{i * i % 7},{i % 3},{i % 5},{i % 4},{i % 2}\n" for i in range(8)),
         ["-k", "4"], ["n = 8 rows is too few for K = 4"]),
        ("x1,x2,y\n1,2,1\n2,1,1\n3,5,1\n", ["-k", "1"], ["target 'y' is constant"]),
        ("x1,x2,y\n1,2,1\n2,,1\n3,5,2\n", ["-k", "1"], ["line 3: column 'x2' is empty/NaN"]),
        ("x1,s,y\n1,a,1\n2,b,0\n", ["-k", "1"], ["non-numeric column(s) 's'", "--drop-nonnumeric"]),
        ("x1,x2\n1,2\n", ["-k", "1"], ["no --target given"]),
        ("x1,x2,z\n1,2,3\n", ["-k", "1", "--target", "q"], ["column 'q' not found", "--target"]),
        ("x1,x2,w,y\n" + "".join(f"{i},{i * i % 7},{-1 if i == 3 else 1},{i % 5}\n" for i in range(30)),
         ["-k", "1", "--weights", "w"], ["--weights column 'w': weight of row 3 is negative (-1)"]),
        ("x1,x2,w,y\n" + "".join(f"{i},{i * i % 7},{100 if i < 2 else 1},{i % 5}\n" for i in range(30)),
         ["-k", "1", "--weights", "w"], ["Kish effective n = 2.6 < 25"]),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(run_cli, one_line_error, tmp_path, content, args, fragments):
    out = tmp_path / "keep.jsonl"
    out.write_text("precious\n")
    proc = run_cli(["pls-test", "test", "-", *args, "-j", "1", "-o", out, "--force"], input=content)
    one_line_error(proc, "pls-test", *fragments)
    assert out.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.jsonl"]


def test_existing_output_is_refused_before_work(run_cli, one_line_error, sim_csv, tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text("old\n")
    proc = run_cli(["pls-test", "test", sim_csv, "-k", "1", "-o", out])
    one_line_error(proc, "pls-test", "already exists; pass --force")
    assert out.read_text() == "old\n"


def test_fixed_directions_shape_and_npz_inputs(run_cli, one_line_error, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6))
    y = X[:, 0] + rng.normal(size=40)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    np.save(tmp_path / "W.npy", rng.normal(size=(5, 2)))
    proc = run_cli(["pls-test", "test", tmp_path / "d.npz", "-k", "2", "--directions", f"fixed:{tmp_path / 'W.npy'}"])
    one_line_error(proc, "pls-test", "W has shape (5, 2), expected (6, >= 2)")
    np.save(tmp_path / "W.npy", rng.normal(size=(6, 2)))
    proc = run_cli(
        ["pls-test", "test", tmp_path / "d.npz", "-k", "2", "-j", "1", "--directions", f"fixed:{tmp_path / 'W.npy'}"]
    )
    assert "independent data" in proc.stderr.decode()
    assert _rows(proc)[0]["directions"] == "fixed"
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y[:-1])
    proc = run_cli(["pls-test", "test", tmp_path / "X.npy", "--y", tmp_path / "y.npy", "-k", "1"])
    one_line_error(proc, "pls-test", "X has 40 rows but y has 39")


def test_gate_warns_and_names_clause(run_cli):
    csv = "x1,x2,x3,y\n" + "".join(f"{i},{(i * 7) % 11},{(i * 3) % 5},{(i * 5) % 13}\n" for i in range(30))
    proc = run_cli(["pls-test", "test", "-k", "1", "--perms", "99", "-j", "1"], input=csv)
    row = _rows(proc)[0]
    assert row["method"] == "nb-perm" and row["gate"]["fired"] and "p = 3 <= 4" in row["gate"]["reason"]
    assert "gate fired (p = 3 <= 4" in proc.stderr.decode()


def test_fail_if_reject_exits_3(run_cli, sim_csv):
    proc = run_cli(["pls-test", "test", sim_csv, "-k", "1", "--method", "nb", "-j", "1", "--fail-if-reject"])
    assert proc.returncode == 3 and b"--fail-if-reject" in proc.stderr


def test_builtin_sklearn_and_unknown(run_cli, one_line_error):
    args = ["pls-test", "test", "builtin:diabetes", "-k", "2", "--method", "nb", "--force-nb", "-j", "1"]
    row = _rows(run_cli(args))[0]
    assert row["n"] == 442 and row["p"] == 10 and row["pvalue"] < 1e-6
    assert row["method"] == "nb" and row["gate"]["fired"]  # stable rank 2.x: forced past the gate
    one_line_error(run_cli(["pls-test", "test", "builtin:nosuch", "-k", "1"]), "pls-test", "unknown data set 'nosuch'")


def test_power_and_summary(run_cli, tmp_path):
    proc = run_cli(["pls-test", "power", "-n", "30,50", "--reps", "4", "-p", "10", "--perms", "19", "--splits", "8",
                    "--methods", "nb,cvq2-perm", "-j", "1", "--summary", tmp_path / "s.json"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    frame = pd.read_csv(__import__("io").BytesIO(proc.stdout))
    assert len(frame) == 4 and set(frame["method"]) == {"nb", "cvq2-perm"}
    assert frame["rejected"].between(0, 4).all()
    assert "n80" in json.loads((tmp_path / "s.json").read_text())


def test_datasets_listing(run_cli):
    proc = run_cli(["pls-test", "datasets"])
    assert proc.returncode == 0
    names = pd.read_csv(__import__("io").BytesIO(proc.stdout))["name"].tolist()
    assert {"tecator", "gasoline", "yarn", "mayonnaise", "oliveoil"} <= set(names)


def test_head_is_quiet(shell):
    proc = shell("pls-test sim -n 3000 -p 20 | head -1")
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.decode().startswith("x1,x2")


def test_weights_column_is_not_in_x_and_unit_weights_change_nothing(run_cli, sim_csv, tmp_path):
    weighted = tmp_path / "w.csv"
    pd.read_csv(sim_csv).assign(wt=3.0).to_csv(weighted, index=False)
    args = ["-k", "2", "--method", "nb", *FAST, "--seed", "3"]
    plain = _rows(run_cli(["pls-test", "test", sim_csv, *args]))[0]  # the all-splits pass (fused.py)
    row = _rows(run_cli(["pls-test", "test", weighted, "--weights", "wt", *args]))[0]  # weighted split loop
    assert row["p"] == 12 and row["gate"]["n_eff"] == pytest.approx(60)
    assert plain["pvalue"] == pytest.approx(row["pvalue"], abs=1e-12)
    assert plain["statistic"] == pytest.approx(row["statistic"], abs=1e-12)


def test_select_k_is_loud_and_exclusive_with_k(run_cli, one_line_error, sim_csv):
    proc = run_cli(["pls-test", "test", sim_csv, "--select-k", "4", *FAST])
    row = _rows(proc)[0]
    assert row["exploratory"] is True and row["k"] == row["selection"]["chosen"] <= 4
    assert "NOT valid" in row["selection"]["warning"] and "NOT valid" in proc.stderr.decode()
    one_line_error(run_cli(["pls-test", "test", sim_csv, "-k", "2", "--select-k", "4"]), "pls-test", "not both")


@pytest.mark.slow  # starts two worker processes: ~40 s on a loaded 2-core machine
def test_power_local_cluster_equals_sync(run_cli, tmp_path):
    pytest.importorskip("distributed", reason="dask[distributed] comes with methodkit[pls]")
    args = [
        "pls-test",
        "power",
        "-p",
        "10",
        "--snr",
        "0.5",
        "-n",
        "30",
        "--reps",
        "4",
        "--splits",
        "8",
        "--perms",
        "29",
    ]
    args += ["--methods", "nb,cvq2-perm", "--seed", "4"]
    for name, extra in (("a.csv", []), ("b.csv", ["--scheduler", "local", "--workers", "2"])):
        proc = run_cli([*args, *extra, "-o", tmp_path / name])
        assert proc.returncode == 0, proc.stderr.decode()
    sync, dask = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    cols = ["method", "n", "reps", "rejected", "power", "mean_fits"]
    pd.testing.assert_frame_equal(sync[cols], dask[cols])


def test_bench_measures_every_figure_in_one_run(run_cli, one_line_error, sim_csv, tmp_path):
    out = tmp_path / "bench.csv"
    args = ["pls-test", "bench", "--data", str(sim_csv), "-k", "2", "--perms", "9", "--rounds", "1", "-j", "1"]
    proc = run_cli([*args, "--ref-perms", "1", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr.decode()
    frame = pd.read_csv(out).set_index("case")
    assert list(frame.index) == [
        "cvq2perm_vs_sklearn",
        "nb_vs_cvq2perm",
        "nb_vs_sklearn_cvq2perm",
        "fits_nb_vs_cvq2perm",
        "coef_vs_sklearn",
    ]
    assert (frame.loc["fits_nb_vs_cvq2perm", ["ours", "ref"]] == [50, 50]).all()  # J = 50 vs (B + 1) F = 50
    assert frame.loc["coef_vs_sklearn", "ratio"] < 1e-8
    times = frame[frame.unit == "cpu_s"]
    assert (times.ours > 0).all() and np.allclose(times.ratio, times.ref / times.ours)
    assert frame.loc["nb_vs_cvq2perm", "ref"] == frame.loc["cvq2perm_vs_sklearn", "ours"]
    one_line_error(run_cli([*args, "--ref-perms", "0"]), "pls-test", "--ref-perms must be >= 1")


@pytest.mark.parametrize("alpha", ["2", "-1", "0", "1", "nan", "inf"])
def test_alpha_outside_0_1_or_not_finite_is_refused(run_cli, one_line_error, sim_csv, tmp_path, alpha):
    split = tmp_path / "splits.csv"
    proc = run_cli(["pls-test", "test", sim_csv, "-k", "1", "--alpha", alpha, "--per-split", split, "-j", "1"])
    one_line_error(proc, "pls-test", "--alpha")
    assert not split.exists()
