"""Issue 37 items 4 (and the shared finite-float check): inputs that used to exit 0 with a useless result."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_draw_refuses_non_finite_skew(run_cli, one_line_error, tmp_path, value):
    proc = run_cli(
        ["irt-sim", "draw", "-N", "10", "-J", "5", "--capability", "skewed", "--skew", value, "-o", "d.npz"],
        cwd=tmp_path,
    )
    one_line_error(proc, "irt-sim", "--skew", "is not a finite number")
    assert not (tmp_path / "d.npz").exists()


def test_drawspec_refuses_non_finite_skew():
    from methodkit.core.errors import UsageError
    from methodkit.tools.irt.simulate import DrawSpec

    with pytest.raises(UsageError, match="--skew must be a finite number"):
        DrawSpec(capability="skewed", skew=float("nan")).check()


@pytest.mark.parametrize("cell", [0, 1])
def test_constant_matrix_is_refused(run_cli, one_line_error, tmp_path, cell):
    rows = "\n".join(",".join([str(cell)] * 12) for _ in range(15))
    (tmp_path / "c.csv").write_text(",".join(f"i{j}" for j in range(12)) + "\n" + rows + "\n")
    proc = run_cli(["irt-fit", "fit", "c.csv", "--out-dir", "f"], cwd=tmp_path)
    one_line_error(proc, "irt-fit", f"every observed response is {cell}", "no item or ability parameter is identified")
    assert not (tmp_path / "f").exists()


def test_extreme_items_warn_for_mml(tmp_path):
    from methodkit.tools.irt import data as data_mod
    from methodkit.tools.irt.simulate import DrawSpec, draw

    data = draw(DrawSpec(n_models=40, n_items=10), 3)
    Y = data.Y.copy()
    Y[:, 0] = 1  # an all-correct item
    data = data_mod.ResponseData(Y=Y, model_id=data.model_id, item_id=data.item_id)
    _, screen = data_mod.screen(data, "x", model="2pl", method="mml")
    assert screen.all_correct_items >= 1
    assert any("all-correct or all-wrong" in w and "--drop-extreme" in w for w in screen.warnings)
    Y = data.Y.copy()
    Y[0, :] = 1  # one all-correct model of 40 (2.5%): MML holds it at its bound, no warning
    few = data_mod.ResponseData(Y=Y, model_id=data.model_id, item_id=data.item_id)
    if data_mod.extremes(Y)[2].sum() + data_mod.extremes(Y)[3].sum() == 0:
        assert not data_mod.screen(few, "x", model="2pl", method="mml")[1].warnings
    assert data_mod.screen(few, "x", model="2pl", method="vi")[1].warnings


def test_finite_float_range():
    import click
    from click.testing import CliRunner

    from methodkit.cli._common import FiniteFloatRange

    @click.command()
    @click.option("--a", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.5)
    @click.option("--b", type=FiniteFloatRange(), default=1.0, show_default=True)
    def cmd(a, b):
        click.echo(f"{a} {b}")

    runner = CliRunner()
    assert runner.invoke(cmd, ["--a", "0.2", "--b", "-3"]).output == "0.2 -3.0\n"
    for args in (["--a", "nan"], ["--b", "inf"], ["--b", "nan"], ["--a", "2"]):
        assert runner.invoke(cmd, args).exit_code == 2
    assert "x<=None" not in runner.invoke(cmd, ["--help"]).output
