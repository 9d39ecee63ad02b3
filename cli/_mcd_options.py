"""mcd-distill's option groups (sqlite-utils' decorator pattern): the training options `teacher`,
`transcoders` and `distill` share, the run folder, and one group per verb; cli/mcd_distill.py stays a thin
command."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, option_group

KD_CHOICES = ("sft", "fkl", "rkl", "jsd", "tvd", "skl", "srkl")
PRESETS = ("base", "small", "moderate", "aggressive", "tiny", "micro")

DEMO = [
    DemoStep(
        "mcd-distill data --task mix --n-tasks 600 --eval-n 8 -o tok.npz -q > /dev/null && "
        "mcd-distill teacher tok.npz --preset micro --ctx 32 --steps 30 -o t -q > /dev/null && "
        "mcd-distill transcoders tok.npz --model t --steps 60 --lr 3e-3 -o tc -q > /dev/null && "
        "mcd-distill distill tok.npz --teacher t --teacher-tc tc --student micro --width 8 --ctx 32 --steps 6 "
        "--batch-size 4 --targets 2 --kd fkl --mcd 0.1 --max-fvu 10 -o s -q",
        "micro teacher, 6 MCD steps",
        "mcd_batches",
        "batches with MCD terms",
    ),
]


def out_dir(help_text: str):
    """-o DIR, the verb's run folder (checked as required after INPUT is read)."""
    return click.option("-o", "--output", "out_dir", type=OutputPath(folder=True), default=None, metavar="DIR",
                        help=help_text + " [required]")  # fmt: skip


def train_options(steps: int, batch: int, lr: float):
    """--steps, --batch-size, --lr, --warmup with this verb's defaults."""
    return option_group(
        click.option("--steps", type=click.IntRange(min=1), default=steps, show_default=True, help="Optimizer steps."),
        click.option("--batch-size", type=click.IntRange(min=1), default=batch, show_default=True, help="Windows per step."),
        click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=lr, show_default=True, help="Peak learning rate."),
        click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warmup steps [default: steps/20]."),
    )  # fmt: skip


resume_option = click.option("--resume", is_flag=True, help="Continue from DIR/model.safetensors.")
paths_option = click.option(
    "--paths", "n_paths", type=click.IntRange(min=1), default=32, show_default=True, help="Top-P pathways."
)

data_options = option_group(
    click.option("--task", type=click.Choice(["mix", "enwiki", "instr", "math"]), default="mix", show_default=True,
                 help="mix: enwiki + instructions + 10% math (teacher); instr: instructions + 1% math; math; enwiki."),
    click.option("--n-tasks", type=click.IntRange(min=10), default=20000, show_default=True, help="Task lines."),
    click.option("--math-share", type=click.FloatRange(0, 1), default=None, help="Share of math lines [mix 0.1, instr 0.01]."),
    click.option("--eval-n", type=click.IntRange(min=1), default=100, show_default=True, help="Prompts per held-out suite."),
    click.option("--val", type=click.FloatRange(0, 0.5), default=0.05, show_default=True, help="Validation share of documents."),
)  # fmt: skip

data_output = click.option("-o", "--output", type=OutputPath(sidecars=(".jsonl",)), required=True, metavar="PATH",
                           help="Token file (NPZ); the held-out suites go to PATH with .jsonl [required].")  # fmt: skip

teacher_options = option_group(
    click.option("--preset", type=click.Choice(PRESETS), default="base", show_default=True, help="Size: base 4L/d256 ... micro 2L/d16."),
    click.option("--layers", type=click.IntRange(min=1), help="Override the preset's layers."),
    click.option("--width", type=click.IntRange(min=4), help="Override the preset's width."),
    click.option("--ctx", type=click.IntRange(min=8), default=64, show_default=True, help="Context length."),
    train_options(3000, 32, 3e-3),
    resume_option,
    out_dir("Folder for teacher.safetensors, config.json, log.csv."),
)  # fmt: skip

transcoders_options = option_group(
    click.option("--model", "model_path", help="Model checkpoint (file or folder with teacher.safetensors)."),
    click.option("--k", type=click.IntRange(min=1), default=32, show_default=True, help="Active latents (TopK)."),
    click.option("--expansion", type=click.IntRange(min=1), default=4, show_default=True, help="Latents = expansion x d_mlp."),
    train_options(1500, 32, 1e-3),
    out_dir("Folder for tc_L{l}.safetensors and tc_metrics.csv."),
)  # fmt: skip

graph_options = option_group(
    click.option("--model", "model_path", help="Model checkpoint (file or folder)."),
    click.option("--transcoders", "tc_dir", help="Folder of the model's tc_L{l}.safetensors."),
    click.option("--prompt", help="One prompt instead of windows of INPUT (a token file)."),
    click.option("--n", "n_windows", type=click.IntRange(min=1), default=4, show_default=True, help="Windows of INPUT's val split."),
    click.option("--targets", type=click.IntRange(min=1), default=1, show_default=True, help="Target positions per window (last one first)."),
    click.option("--max-nodes", type=click.IntRange(min=1), default=64, show_default=True, help="Feature nodes per target before pruning."),
    click.option("--node-threshold", type=click.FloatRange(0, 1), default=0.8, show_default=True, help="Influence share of kept nodes."),
    click.option("--edge-threshold", type=click.FloatRange(0, 1), default=0.98, show_default=True, help="Influence share of kept edges."),
    paths_option,
    click.option("--json", "as_json", is_flag=True, help="Print the first graph (nodes, edges, pathways) as JSON."),
    click.option("-o", "--output", type=OutputPath(), default=None, metavar="PATH", help="graphs.npz (CSR adjacency, nodes, influence, pathways)."),
)  # fmt: skip

distill_options = option_group(
    click.option("--teacher", "teacher_path", help="Teacher checkpoint (file or folder)."),
    click.option("--teacher-tc", "tc_dir", help="Folder of the teacher's transcoders."),
    click.option("--student", type=click.Choice(PRESETS), default="aggressive", show_default=True, help="Student size."),
    click.option("--layers", type=click.IntRange(min=1), help="Override the student's layers."),
    click.option("--width", type=click.IntRange(min=4), help="Override the student's width."),
    click.option("--ctx", type=click.IntRange(min=8), default=None, help="Window length [default: the teacher's]."),
    click.option("--kd", type=click.Choice(KD_CHOICES), default="fkl", show_default=True, help="KD objective."),
    click.option("--tau", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True, help="Temperature."),
    click.option("--mcd", "lam", type=click.FloatRange(min=0), default=0.0, show_default=True, help="lambda for both MCD terms (0: KD only)."),
    click.option("--lam-path", type=click.FloatRange(min=0), default=None, help="lambda_path [default: --mcd]."),
    click.option("--lam-node", type=click.FloatRange(min=0), default=None, help="lambda_node [default: --mcd]."),
    click.option("--targets", "n_targets", type=click.IntRange(min=1), default=8, show_default=True, help="MCD target positions per window."),
    click.option("--max-nodes", type=click.IntRange(min=1), default=16, show_default=True, help="Feature nodes per target graph."),
    click.option("--node-scope", type=click.Choice(["all", "graph"]), default="all", show_default=True,
                 help="Node term over every active latent, or the teacher graph's nodes."),
    paths_option,
    click.option("--unbalanced", type=click.FloatRange(min=0, min_open=True), default=None, help="KL marginal penalty tau (unbalanced OT)."),
    click.option("--fgw", type=click.FloatRange(0, 1), default=None, metavar="ALPHA",
                 help="Fused Gromov-Wasserstein pathway matching, structure weight ALPHA (ablation)."),
    click.option("--on-policy", type=click.FloatRange(0, 1), default=0.0, show_default=True, help="Share of batches of student samples."),
    click.option("--mcd-warmup", type=click.IntRange(min=0), default=None, help="KD-only steps first [default: steps/10]."),
    click.option("--layer-map", help="Teacher layer per student layer, e.g. 1,3 [default: by relative depth]."),
    click.option("--max-fvu", type=click.FloatRange(min=0), default=0.2, show_default=True, help="Refuse teacher transcoders above this FVU."),
    click.option("--graph-cache", help="Folder for content-addressed teacher graph caches."),
    click.option("--windows", "n_windows", type=click.IntRange(min=1), default=4096, show_default=True, help="Training windows."),
    train_options(1000, 8, 3e-3),
    resume_option,
    out_dir("Folder for student.safetensors, log.csv, run.json, the student transcoders."),
)  # fmt: skip

eval_options = option_group(
    click.option("--model", "model_paths", multiple=True, help="Checkpoint(s) to score (file or folder)."),
    click.option("--teacher", "teacher_path", help="Teacher checkpoint: teacher agreement and the mechanism measures."),
    click.option("--teacher-tc", "tc_dir", help="Teacher transcoders: pathway OT cost and the bound (students need stc_L*)."),
    click.option("--tokens", "tokens_path", help="Token file for validation CE and agreement (its val split)."),
    click.option("--n", "n_prompts", type=click.IntRange(min=1), default=None, help="Prompts per suite [default: all]."),
    click.option("--mechanism-windows", type=click.IntRange(min=1), default=16, show_default=True, help="Held-out windows for OT cost and bound."),
    click.option("-o", "--output", "metrics_out", type=OutputPath(), default=None, metavar="PATH", help="metrics.json."),
)  # fmt: skip

selftest_options = option_group(
    click.option("--bound", "check_bound", is_flag=True, help="Only the bound: random models, measured vs computed."),
    click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True, help="Random model pairs."),
)


def load_tokens(run, path: str):
    """A token file read through the run's input (a path or `-`)."""
    from methodkit.core.text.tokens import TokenFile

    return TokenFile.load(run.input_bytes(path))


def required(**flags) -> None:
    """Options the verb needs, checked after INPUT is read (a missing input file is reported first)."""
    for flag, value in flags.items():
        if not value:
            raise click.UsageError(f"Missing option '--{flag.replace('_', '-')}'")


def window_length(ctx: int | None, teacher_ctx: int) -> int:
    """distill --ctx: the teacher's context unless given, never longer."""
    ctx = ctx or teacher_ctx
    if ctx > teacher_ctx:
        raise click.UsageError(f"--ctx {ctx} exceeds the teacher's context {teacher_ctx}")
    return ctx
