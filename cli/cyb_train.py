"""cyb-train: Catch Your Breath adaptive pause training (CYB losses vs cross-entropy with pauses)."""

from __future__ import annotations

from methodkit.cli import _cyb_options as opt
from methodkit.cli._common import Run, common_options, input_argument, tool_group
from methodkit.cli._cyb_options import DEMO  # noqa: F401  (make demo reads it here)


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
@opt.data_options
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def data_cmd(source, tokenizer, val, arith_digits, arith_problems, arith_per_doc, arith_reverse, vocab_path, **_):
    """Build a token file (tokens.npz: ids, document offsets, split) and its vocab.json.

    Documents are split by a seeded permutation (no held-out text is trained on). Prints
    sizes and split counts as one JSON line.
    """
    from methodkit.core.errors import UsageError
    from methodkit.tools.cyb import commands as cmd

    run = Run.from_context()
    if run.output == "-":
        raise UsageError("data writes a binary NPZ: pass -o FILE.npz")
    vocab_path = cmd.default_vocab_path(run.output, vocab_path)
    if vocab_path:
        run.claim_outputs(vocab_path)
    from methodkit.core import io
    from methodkit.core.text.tokens import build
    from methodkit.tools.cyb.data import ArithSpec, load_source

    spec = ArithSpec(arith_digits, arith_problems, arith_per_doc, arith_reverse)
    corpus = load_source(source, run.seed, spec)
    token_file, tok = build(corpus, tokenizer, val=val, seed=run.seed)
    token_file.save(run.output, force=run.force)
    if vocab_path:
        io.write_json(cmd.vocab_record(tok), vocab_path, force=run.force, indent=1)
    run.emit_result(cmd.data_summary(run.output, corpus, token_file, tok), output="-")


# ---------------------------------------------------------------- training


def _train(run: Run, tokens_path, out_dir, init, freeze_base, o) -> None:
    from methodkit.core.errors import UsageError
    from methodkit.tools.cyb import commands as cmd

    if not out_dir:
        raise UsageError("-o/--output DIR is required (the run folder to write)")
    loss_cfg = cmd.loss_config(o)
    cmd.check_shape(o)
    data = run.input_bytes(tokens_path) if tokens_path != "-" else None
    import torch

    from methodkit.core.text.tokens import TokenFile
    from methodkit.tools.cyb.training import run_training

    torch.set_num_threads(max(1, run.threads()))
    token_file = TokenFile.load(tokens_path if data is not None else _stdin_tokens(run))
    model_cfg = cmd.model_config(o, loss_cfg, int(token_file.meta["tokenizer"]["vocab_size"]))
    train_cfg = cmd.train_config(o, run.seed)
    from methodkit.cli._common import warn

    with run.progress() as cb:
        result = run_training(
            token_file, out_dir, loss_cfg, model_cfg, train_cfg, init=init, freeze_base=freeze_base,
            val_windows=o["val_windows"], fail_on_collapse=o["fail_on_collapse"], resume=o["resume"],
            device=run.device(), warn=lambda m: warn("cyb-train", m), progress=cb,
        )  # fmt: skip
    from pathlib import Path

    from methodkit.core import io

    config = cmd.run_record(model_cfg, loss_cfg, tokens_path, init, freeze_base, train_cfg.steps, run.seed)
    io.write_json(config, Path(out_dir) / "config.json", force=True, indent=1)
    run.emit_result({"output": out_dir, **result.to_dict()}, output="-")


def _stdin_tokens(run: Run):
    import io as _io

    return _io.BytesIO(run.input_bytes("-").data)


@main.command("pretrain")
@input_argument("data")
@opt.training_options
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
@opt.finetune_options
@opt.training_options
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
@opt.eval_options
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
@opt.pauses_options
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
@opt.generate_options
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
