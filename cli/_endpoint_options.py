"""The options every tool that asks a model shares, added with one decorator (sqlite-utils' pattern).

    from methodkit.cli._endpoint_options import endpoint_from_options, endpoint_options
    from methodkit.tools.mymethod.baselines import BASELINES

    @tool_command()
    @common_options("output", "seed", "meta", "verbose")
    @endpoint_options(BASELINES)
    def main(output, seed, meta, verbose, **endpoint):
        run = Run.from_context()
        ep = endpoint_from_options(run.params, BASELINES)
        answers = ep.ask_many(requests, progress=...)

--model takes openai:MODEL, cmd:"PROGRAM ARGS" or one of the method's baseline names (a click.Choice,
so completion offers them). There is no --api-key: the key comes from $OPENAI_API_KEY only, so argv,
--meta records and logs cannot carry it. Only click and core.endpoint.spec load at --help time.
"""

from __future__ import annotations

import click

from methodkit.core.endpoint.spec import parse_spec

ENDPOINT_PARAMS = ("model", "base_url", "concurrency", "timeout", "retries", "no_cache", "cache")


class ModelSpecType(click.Choice):
    """A baseline name (the Choice part) or an openai:/cmd: spec; converts to a ModelSpec."""

    name = "spec"

    def __init__(self, baselines=()):
        super().__init__(sorted(baselines))

    def get_metavar(self, param, ctx) -> str:
        return "SPEC"

    def convert(self, value, param, ctx):
        from methodkit.core.endpoint.spec import ModelSpec
        from methodkit.core.errors import UsageError

        if isinstance(value, ModelSpec):
            return value
        if str(value).startswith(("openai:", "cmd:")) or value not in self.choices:
            try:
                return parse_spec(value, self.choices)
            except UsageError as exc:
                self.fail(exc.message.removeprefix("--model "), param, ctx)
        return parse_spec(super().convert(value, param, ctx), self.choices)

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        offers = ["openai:", "cmd:", *self.choices]
        return [CompletionItem(o) for o in offers if o.startswith(incomplete)]


def endpoint_options(baselines=(), *, default_model: str | None = None, sampling: bool = True):
    """Decorator adding --model, --base-url, --concurrency, --timeout, --retries, --no-cache, --cache
    (and, with `sampling`, --temperature and --max-tokens; the seed is the common --seed)."""
    names = sorted(baselines)
    listed = f", or a baseline: {', '.join(names)}" if names else ""
    options = [
        click.option(
            "--model",
            type=ModelSpecType(names),
            required=default_model is None,
            default=default_model,
            show_default=default_model is not None,
            help=f'Model to ask: openai:MODEL (an OpenAI-compatible server), cmd:"PROGRAM ARGS" (a local '
            f"program, JSON on stdin and stdout){listed}.",
        ),
        click.option(
            "--base-url",
            metavar="URL",
            default=None,
            help="Server for openai: specs [default: $OPENAI_BASE_URL, else https://api.openai.com/v1]; "
            "the key is read from $OPENAI_API_KEY only.",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(min=1),
            default=4,
            show_default=True,
            help="Requests in flight at once.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=120.0,
            show_default=True,
            metavar="SECONDS",
            help="Per-request timeout.",
        ),
        click.option(
            "--retries",
            type=click.IntRange(min=0),
            default=5,
            show_default=True,
            help="Retries after a 429, a 5xx or a timeout (exponential backoff with jitter; Retry-After honoured).",
        ),
        click.option("--no-cache", is_flag=True, help="Ask again even if the response cache has the answer."),
        click.option(
            "--cache",
            "cache",
            metavar="PATH",
            default=None,
            help="Response cache (SQLite) [default: $XDG_CACHE_HOME/methodkit/endpoint.sqlite].",
        ),
    ]
    if sampling:
        options += [
            click.option(
                "--temperature",
                type=click.FloatRange(min=0),
                default=0.0,
                show_default=True,
                help="Sampling temperature.",
            ),
            click.option(
                "--max-tokens",
                type=click.IntRange(min=1),
                default=None,
                help="Longest answer in tokens [default: server's].",
            ),
        ]

    def deco(f):
        for option in reversed(options):
            f = option(f)
        return f

    return deco


def endpoint_from_options(params: dict, baselines=None, on_event=None):
    """The Endpoint the parsed options describe (params: Run.params or the click kwargs).

    Retries are reported through `on_event`; by default as warnings on stderr with -v.
    """
    from methodkit.core.endpoint import Endpoint, ResponseCache, RetryPolicy, default_cache_path

    if on_event is None and int(params.get("verbose") or 0) >= 1:
        from methodkit.cli._common import warn

        ctx = click.get_current_context(silent=True)
        tool = ctx.command_path if ctx is not None else "endpoint"

        def on_event(line):
            warn(tool, line)

    spec = params["model"]
    if isinstance(spec, str):
        spec = parse_spec(spec, baselines or ())
    cache = None if params.get("no_cache") else ResponseCache(params.get("cache") or default_cache_path())
    sampling = {
        "temperature": params.get("temperature"),
        "max_tokens": params.get("max_tokens"),
        "seed": params.get("seed"),
    }
    return Endpoint(
        spec,
        base_url=params.get("base_url"),
        timeout=float(params.get("timeout") or 120.0),
        retry=RetryPolicy(retries=int(params.get("retries", 5))),
        concurrency=int(params.get("concurrency") or 4),
        cache=cache,
        params=sampling,
        baselines=baselines,
        on_event=on_event,
    )
