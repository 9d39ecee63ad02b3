"""cyb-train: Catch Your Breath adaptive pause training (CYB losses vs cross-entropy with pauses)."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group

LOSS_CHOICES = ("ce", "ce-pause", "cyb-ap", "cyb-va", "cyb-dp")
SOURCE_HELP = "enwiki (cleaned gensim Wikipedia), lee (news), fortunes (Debian), arith (synthetic), text:FILE."

DEMO = [
    DemoStep(
        "cyb-train data --source arith --arith-problems 3000 -o tok.npz -q > /dev/null && "
        "cyb-train pretrain tok.npz --loss cyb-ap --ctx 64 --layers 2 --d-model 64 --steps 40 --batch-size 16 "
        "--warmup 10 --val-windows 8 -j 1 -o run -q",
        "arith, 3000 additions, 40 steps",
        "val.bpc_marginal",
        "CYB-AP val bits/char",
    )
]


@tool_group(name="cyb-train")
def main():
    """Catch Your Breath: a model that says <don't know> to get one more compute step (pause).

    Galashov et al. (arXiv 2510.13879) give the model an extra output, DK; emitting it inserts a
    <pause> input at the next step, and the model may abstain again, up to K times. Three losses
    train when to abstain: CYB-AP (anytime prediction: likelihood under the model's own stopping
    policy, discounted by gamma per pause), CYB-VA (variational: expected CE plus beta KL to a
    prior over stopping slots) and CYB-DP (expected CE plus tau per pause; with --budget tau is a
    Lagrange multiplier updated by dual ascent). Baselines: ce (no pauses) and ce-pause (always K
    pauses, CE at the last one, Goyal et al. 2024). The equations are our RECONSTRUCTION from the
    abstract and the halting literature (ACT, PonderNet); see docs/cyb.md.

    Layout (ours): every real token owns K+1 slots at positions t(K+1)+k; with the private mask
    (default) a pause sees the real tokens up to its own and its own group's earlier pauses, and
    real tokens never see pauses, so training with all K pauses equals decoding that inserts
    only the requested ones. Verbs: data (token file), pretrain, finetune (a ce checkpoint + a
    pause loss), eval (bits per char marginal and greedy-stop, pauses, compute), pauses (per
    token JSONL for text on stdin), generate (text with a mark where pauses were taken).

    \b
    EXAMPLES
      cyb-train data --source enwiki -o enwiki.npz
      cyb-train pretrain enwiki.npz --loss cyb-ap --max-pauses 2 --tokens 300000 -o run-ap
      cyb-train pretrain enwiki.npz --loss ce --tokens 300000 -o run-ce
      cyb-train finetune enwiki.npz --init run-ce --loss cyb-va --tokens 100000 -o run-ft
      cyb-train eval enwiki.npz run-ce run-ap --metrics metrics.json
      echo "The cats wasn't here." | cyb-train pauses --checkpoint run-ap | jq -c '[.token,.n_pauses]'
      cyb-train generate --checkpoint run-ap --prompt "The history of " -n 80

    \b
    EXIT STATUS
      0  success
      1  failure while running (non-finite loss: the last good checkpoint is kept)
      2  bad usage or bad input (K=0 with a pause loss, gamma outside (0,1], beta < 0, budget > K,
         a prior of the wrong length, a corpus smaller than one batch, another tokenizer)
      3  --fail-on-collapse and the pause policy collapsed (the checkpoint is kept)
      130  interrupted
    """


# ---------------------------------------------------------------- data


@main.command("data")
@click.option("--source", default="enwiki", show_default=True, help=SOURCE_HELP)
@click.option("--tokenizer", default="bytes", show_default=True, help="bytes, or bpe:N (trained on the train split).")
@click.option("--val", type=click.FloatRange(0, 1, max_open=True), default=0.1, show_default=True,
              help="Share of documents held out (by document).")  # fmt: skip
@click.option("--arith-digits", type=click.IntRange(min=1, max=9), default=4, show_default=True, help="arith: digits.")
@click.option("--arith-problems", type=click.IntRange(min=1), default=20000, show_default=True,
              help="arith: additions.")  # fmt: skip
@click.option("--arith-per-doc", type=click.IntRange(min=1), default=50, show_default=True,
              help="arith: additions per document.")  # fmt: skip
@click.option("--arith-reverse", is_flag=True, help="arith: write numbers least significant digit first.")
@click.option("--vocab", "vocab_path", type=OutputPath(), default=None, metavar="PATH",
              help="Also write the tokenizer here [default: vocab.json beside -o; none when -o is /dev/null or a FIFO].")  # fmt: skip
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def data_cmd(source, tokenizer, val, arith_digits, arith_problems, arith_per_doc, arith_reverse, vocab_path, **_):
    """Build a token file (tokens.npz: ids, document offsets, split) and its vocab.json.

    Documents are split by a seeded permutation (no held-out text is trained on). Prints
    sizes and split counts as one JSON line.
    """
    from pathlib import Path

    from methodkit.core.errors import UsageError

    run = Run.from_context()
    if run.output == "-":
        raise UsageError("data writes a binary NPZ: pass -o FILE.npz")
    from methodkit.core.outputs import is_special

    if vocab_path is None and not is_special(run.output):  # -o /dev/null or a FIFO: no vocab.json in /dev
        vocab_path = str(Path(run.output).parent / "vocab.json")
    if vocab_path:
        run.claim_outputs(vocab_path)
    from methodkit.core import io
    from methodkit.core.text.tokens import build
    from methodkit.tools.cyb.data import ArithSpec, load_source

    spec = ArithSpec(arith_digits, arith_problems, arith_per_doc, arith_reverse)
    corpus = load_source(source, run.seed, spec)
    token_file, tok = build(corpus, tokenizer, val=val, seed=run.seed)
    token_file.save(run.output, force=run.force)
    vocab = {**tok.spec(), "pause_id": tok.vocab_size, "dk_index": tok.vocab_size}
    if tok.kind != "bytes":
        vocab["tokenizer_json"] = tok.to_json()
    if vocab_path:
        io.write_json(vocab, vocab_path, force=run.force, indent=1)
    run.emit_result(
        {
            "output": run.output,
            "corpus": corpus.name,
            "documents": token_file.n_documents,
            "tokens": token_file.n_tokens(),
            "train_tokens": token_file.n_tokens("train"),
            "val_tokens": token_file.n_tokens("val"),
            "train_documents": int((token_file.split == 0).sum()),
            "val_documents": int((token_file.split == 1).sum()),
            "tokenizer": tok.spec(),
        },
        output="-",
    )


# ---------------------------------------------------------------- training


def _training_options(f):
    options = [
        click.option("--loss", type=click.Choice(LOSS_CHOICES), default="cyb-ap", show_default=True, help="Loss."),
        click.option(
            "--max-pauses",
            "-K",
            "max_pauses",
            type=click.IntRange(min=0),
            default=2,
            show_default=True,
            help="K: pause slots per token (ce uses 0).",
        ),
        click.option("--gamma", type=float, default=0.9, show_default=True, help="cyb-ap: discount per pause."),
        click.option(
            "--anytime",
            "--ap-anytime",
            "anytime",
            type=float,
            default=0.5,
            show_default=True,
            help="CYB losses: weight of the mean forced-answer CE over all K+1 slots.",
        ),
        click.option("--beta", type=float, default=0.1, show_default=True, help="cyb-va: KL weight."),
        click.option(
            "--prior",
            default="geometric:0.5",
            show_default=True,
            help="cyb-va: prior over stopping slots: geometric:P, uniform or K+1 weights.",
        ),
        click.option(
            "--tau",
            type=float,
            default=0.01,
            show_default=True,
            help="cyb-dp: cost per pause (start value with --budget).",
        ),
        click.option("--budget", type=float, default=None, help="cyb-dp: mean pauses target (dual ascent on tau)."),
        click.option("--tau-lr", type=float, default=0.01, show_default=True, help="cyb-dp: dual-ascent step."),
        click.option(
            "--pause-mask",
            type=click.Choice(("private", "visible")),
            default="private",
            show_default=True,
            help="private: real tokens never see pauses; visible: the ablation.",
        ),
        click.option("--ctx", type=click.IntRange(min=2), default=128, show_default=True, help="Real tokens/window."),
        click.option("--layers", type=click.IntRange(min=1), default=3, show_default=True, help="Decoder layers."),
        click.option("--d-model", type=click.IntRange(min=8), default=128, show_default=True, help="Model width."),
        click.option("--heads", type=click.IntRange(min=1), default=4, show_default=True, help="Attention heads."),
        click.option(
            "--tokens",
            type=click.IntRange(min=1),
            default=None,
            help="Training tokens; sets --steps = tokens / (batch x ctx).",
        ),
        click.option("--steps", type=click.IntRange(min=1), default=None, help="Optimizer steps [default: 200]."),
        click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True, help="Windows/batch."),
        click.option(
            "--lr",
            type=click.FloatRange(min=0, min_open=True),
            default=3e-3,
            show_default=True,
            help="Peak learning rate.",
        ),
        click.option("--weight-decay", type=click.FloatRange(min=0), default=0.1, show_default=True, help="AdamW."),
        click.option(
            "--warmup",
            type=click.IntRange(min=0),
            default=200,
            show_default=True,
            help="Linear warmup steps (capped at a fifth of the steps).",
        ),
        click.option("--log-every", type=click.IntRange(min=1), default=50, show_default=True, help="Log every N."),
        click.option(
            "--val-windows",
            type=click.IntRange(min=1),
            default=64,
            show_default=True,
            help="Validation windows per log row.",
        ),
        click.option(
            "--checkpoint-every",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Checkpoint every N steps (0: at the end).",
        ),
        click.option("--fail-on-collapse", is_flag=True, help="Stop (exit 3) when the pause policy collapses."),
        click.option("--resume", is_flag=True, help="Continue from the checkpoint in -o DIR."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _train(run: Run, tokens_path, out_dir, init, freeze_base, o) -> None:
    from methodkit.core.errors import UsageError
    from methodkit.tools.cyb.config import LossConfig

    if not out_dir:
        raise UsageError("-o/--output DIR is required (the run folder to write)")
    loss_cfg = LossConfig(
        loss=o["loss"], max_pauses=o["max_pauses"], gamma=o["gamma"], anytime=o["anytime"], beta=o["beta"],
        prior=o["prior"], tau=o["tau"], budget=o["budget"], tau_lr=o["tau_lr"], pause_mask=o["pause_mask"],
    )  # fmt: skip
    if o["tokens"] and o["steps"]:
        raise UsageError("give --tokens or --steps, not both")
    if o["d_model"] % o["heads"]:
        raise UsageError(f"--d-model {o['d_model']} is not divisible by --heads {o['heads']}")
    data = run.input_bytes(tokens_path) if tokens_path != "-" else None
    import torch

    from methodkit.core.text.tokens import TokenFile
    from methodkit.core.train import TrainConfig
    from methodkit.tools.cyb.model import PauseModelConfig
    from methodkit.tools.cyb.training import run_training, steps_for_tokens

    torch.set_num_threads(max(1, run.threads()))
    token_file = TokenFile.load(tokens_path if data is not None else _stdin_tokens(run))
    model_cfg = PauseModelConfig(
        base_vocab=int(token_file.meta["tokenizer"]["vocab_size"]), d_model=o["d_model"], n_layers=o["layers"],
        n_heads=o["heads"], ctx=o["ctx"], max_pauses=loss_cfg.max_pauses, pause_mask=loss_cfg.pause_mask,
    )  # fmt: skip
    steps = o["steps"] or (steps_for_tokens(o["tokens"], o["batch_size"], o["ctx"]) if o["tokens"] else 200)
    train_cfg = TrainConfig(
        steps=steps, batch_size=o["batch_size"], lr=o["lr"], weight_decay=o["weight_decay"], beta1=0.9, beta2=0.95,
        warmup=min(o["warmup"], steps // 5), log_every=min(o["log_every"], steps),
        checkpoint_every=o["checkpoint_every"], seed=run.seed,
    )  # fmt: skip
    from methodkit.cli._common import warn

    with run.progress() as cb:
        result = run_training(
            token_file, out_dir, loss_cfg, model_cfg, train_cfg, init=init, freeze_base=freeze_base,
            val_windows=o["val_windows"], fail_on_collapse=o["fail_on_collapse"], resume=o["resume"],
            device=run.device(), warn=lambda m: warn("cyb-train", m), progress=cb,
        )  # fmt: skip
    from pathlib import Path

    from methodkit.core import io

    config = {"model": model_cfg.to_dict(), "loss": loss_cfg.to_dict(), "tokens": tokens_path, "init": init,
              "freeze_base": freeze_base, "steps": steps, "seed": run.seed}  # fmt: skip
    io.write_json(config, Path(out_dir) / "config.json", force=True, indent=1)
    run.emit_result({"output": out_dir, **result.to_dict()}, output="-")


def _stdin_tokens(run: Run):
    import io as _io

    return _io.BytesIO(run.input_bytes("-").data)


@main.command("pretrain")
@input_argument("data")
@_training_options
@common_options("output", "seed", "device", "threads", "force", "meta", "quiet", "verbose", output_kind="folder")
def pretrain_cmd(data, **o):
    """Train from scratch with --loss on DATA (a token file from `data`) into -o DIR.

    DIR gets model.safetensors (+ model.json sidecar), config.json and log.csv (step, lr, loss,
    grad_norm, seconds, tokens_seen, val_bpc, mean_pauses, expected_pauses, dp_tau). Prints the
    final JSON: validation bits per char (marginal and greedy-stop) and pauses.
    """
    _train(Run.from_context(), data, o.pop("output"), None, False, o)


@main.command("finetune")
@input_argument("data")
@click.option("--init", metavar="DIR", help="A cyb-train checkpoint (a ce run, or a pause run) [required].")
@click.option("--freeze-base", is_flag=True, help="Train only the embeddings, the head and the DK bias.")
@_training_options
@common_options("output", "seed", "device", "threads", "force", "meta", "quiet", "verbose", output_kind="folder")
def finetune_cmd(data, init, freeze_base, **o):
    """Fine-tune a checkpoint with a pause loss: a ce model gains the <pause> embedding (the mean
    token embedding) and a DK head row (zero, bias -2); a model that has them keeps its rows."""
    run = Run.from_context()
    if data != "-":
        run.input_bytes(data)  # a missing token file is reported first
    if not init:
        from methodkit.core.errors import UsageError

        raise UsageError("Missing option '--init' (the checkpoint to fine-tune)")
    _train(run, data, o.pop("output"), init, freeze_base, o)


# ---------------------------------------------------------------- eval, pauses, generate


@main.command("eval")
@click.argument("tokens", metavar="TOKENS")
@click.argument("checkpoints", nargs=-1, required=True, metavar="CHECKPOINT...")
@click.option("--split", type=click.Choice(("val", "train")), default="val", show_default=True, help="Split scored.")
@click.option("--windows", type=click.IntRange(min=1), default=None, help="Score only the first N windows.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Greedy policy: pause while d_k > threshold.")  # fmt: skip
@click.option("--metrics", "metrics_path", type=OutputPath(), default=None, metavar="PATH",
              help="Write metrics.json (with the pause histograms per token class) here.")  # fmt: skip
@common_options("output", "format", "threads", "force", "meta", "quiet", "verbose")
def eval_cmd(tokens, checkpoints, split, windows, threshold, metrics_path, **_):
    """Score checkpoints on a split of TOKENS; a TSV row per checkpoint.

    Columns: checkpoint, loss, bpc_marginal, bpc_greedy, ppl_marginal, ppl_greedy, mean_pauses,
    expected_pauses, compute_per_token, accuracy (and exact_match on arith). A ce checkpoint
    reports 0 pauses; ce-pause always takes K.
    """
    import pandas as pd
    import torch

    from methodkit.core import io
    from methodkit.core.text.tokens import TokenFile
    from methodkit.tools.cyb.evaluation import evaluate_checkpoint

    run = Run.from_context()
    run.input_bytes(tokens)
    torch.set_num_threads(max(1, run.threads()))
    token_file = TokenFile.load(tokens)
    records = [evaluate_checkpoint(c, token_file, split, windows, threshold) for c in checkpoints]
    if metrics_path:
        io.write_json({"tokens": tokens, "split": split, "checkpoints": records}, metrics_path, force=run.force,
                      indent=1)  # fmt: skip
    rows = [{k: v for k, v in r.items() if not isinstance(v, dict)} for r in records]
    run.emit_table(pd.DataFrame(rows), fmt=run.fmt or ("tsv" if run.output == "-" else None))


@main.command("pauses")
@input_argument()
@click.option("--checkpoint", metavar="DIR", help="A cyb-train run folder [required].")
@click.option("--policy", type=click.Choice(("greedy", "sample")), default="greedy", show_default=True,
              help="greedy: pause while d_k > threshold; sample: pause with probability d_k.")  # fmt: skip
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="Greedy threshold.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def pauses_cmd(input, checkpoint, policy, threshold, **_):
    """For text on stdin, one JSON line per predicted token: token, context, n_pauses, DK
    probabilities at each visited slot and p(target) at the stopping slot (KV-cached decoding)."""
    import json

    import torch

    from methodkit.core import io
    from methodkit.tools.cyb.decode import text_pause_report

    run = Run.from_context()
    text = io.decode_text(run.input_bytes(input))
    if not checkpoint:
        from methodkit.core.errors import UsageError

        raise UsageError("Missing option '--checkpoint' (a cyb-train run folder)")
    torch.set_num_threads(1)
    rows = text_pause_report(checkpoint, text, policy=policy, threshold=threshold, seed=run.seed)
    body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    run.write_meta()
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(body.encode())


@main.command("generate")
@click.option("--checkpoint", required=True, metavar="DIR", help="A cyb-train run folder.")
@click.option("--prompt", default="The ", show_default=True, help="Text to continue.")
@click.option("-n", "--new-tokens", type=click.IntRange(min=1), default=80, show_default=True, help="Tokens to add.")
@click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True, help="0 = greedy.")
@click.option("--top-k", type=click.IntRange(min=1), default=None, help="Sample among the top k answers.")
@click.option("--policy", type=click.Choice(("greedy", "sample")), default="greedy", show_default=True,
              help="Pause policy.")  # fmt: skip
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="Greedy threshold.")
@click.option("--marks/--no-marks", default=True, show_default=True, help="Put ⟂ before a token per pause taken.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def generate_cmd(checkpoint, prompt, new_tokens, temperature, top_k, policy, threshold, marks, **_):
    """Continue --prompt with adaptive pauses; prints the text (⟂ marks the pauses taken)."""
    import torch

    from methodkit.core import io
    from methodkit.tools.cyb.decode import generate_text

    run = Run.from_context()
    torch.set_num_threads(1)
    text = generate_text(checkpoint, prompt, new_tokens, temperature=temperature, top_k=top_k, policy=policy,
                         threshold=threshold, seed=run.seed, marks=marks)  # fmt: skip
    run.write_meta()
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write((text + "\n").encode())
