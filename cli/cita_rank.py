"""cita-rank: score and rank candidate next tool invocations with a trained CIM."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_command

PROG = "cita-rank"

DEMO = [
    DemoStep(
        "cita-data bfcl --limit 15 --split train > t.jsonl && cita-sim fit t.jsonl -o g.npz && "
        "cita-train t.jsonl --graph g.npz --synthetic 20 --epochs 1 -R 16 -q -o cim && "
        "cita-sim sample --graph g.npz -n 5 | cita-rank cim --top 1 | tail -1",
        "BFCL v4 multi_turn_base (bfcl-eval)",
        "p",
        "sigma(f) of the pick",
    ),
]


@tool_command(name=PROG)
@click.argument("model_dir", metavar="MODEL_DIR")
@input_argument()
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=None,
    help="Keep the best N per context; --top 1 prints the picked call only.",
)
@click.option(
    "--combine-logprob",
    type=float,
    default=0.0,
    show_default=True,
    metavar="BETA",
    help="Rank by f + BETA·logprob (the candidates' 'logprob' under the proposing LLM).",
)
@click.option(
    "--embedder",
    type=click.Choice(["hash", "minilm"]),
    default=None,
    help="Refuse a model trained with another embedder [default: the model's].",
)
@click.option(
    "--ranker",
    type=click.Choice(["mlp", "gbdt"]),
    default=None,
    help="Refuse a model trained with another --ranker [default: the one its cim.json records].",
)
@click.option("--skip-bad", is_flag=True, help="Skip malformed lines (counted) instead of failing.")
@common_options("output", "force", "meta", "quiet", "verbose")
def main(model_dir, input, top, combine_logprob, embedder, ranker, skip_bad, **_):
    """Rank candidate next calls by the CIM's comparative score (the 'comparative inference' step).

    INPUT is candidates JSONL: {context_id, instruction, tools, history: [{call, observation}],
    candidates: [{name, arguments, logprob?}]}. Out: one JSONL line per context, {context_id, ranked:
    [{name, arguments, score, p, unknown_tool}]} best first (p = σ(score), the estimated success
    probability); with --top 1 just {context_id, name, arguments, score, p}. Duplicate candidates are
    merged (canonical JSON); a tool not in the context's tool list is flagged and listed last; a context
    with no candidates gets an 'error' field and the others go on. The scorer is the one cim.json
    records (cita-train --ranker mlp|gbdt); for gbdt, p = σ(score) orders like score but is not calibrated.

    \b
    EXAMPLES
      cita-rank cim candidates.jsonl --top 1
      cita-rank cim candidates.jsonl --combine-logprob 0.5 | jq '.ranked[0].name'

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input (malformed JSONL, a folder that is not a model, another embedder or ranker)
      130  interrupted
    """
    from methodkit.cli._cita_io import read_records, warner, write_jsonl
    from methodkit.tools.cita import api

    run = Run.from_context()
    model = api.load_model(model_dir, embedder, warner(run), ranker)
    records = read_records(run, input, "candidates", skip_bad)
    ranked = api.rank(model, records, combine_logprob)
    if top == 1:
        out = [
            {"context_id": r["context_id"], **(r["ranked"][0] if r["ranked"] else {"error": r.get("error")})}
            for r in ranked
        ]
    else:
        out = [{**r, "ranked": r["ranked"][:top]} if top else r for r in ranked]
    write_jsonl(run, out)
