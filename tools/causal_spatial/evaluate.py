"""`causal-spatial eval`: ask a model (or a built-in baseline) every item, optionally with COW frames.

Models go through core.endpoint (openai:MODEL, cmd:"PROGRAM"): the fixed prompt of the official
eval, the item's image, and with --cow the chosen simulated frames. Predictions are keyed by id;
an existing predictions file is resumed (its answered ids are skipped, its error records asked again)
with --resume. A request that still fails after core/endpoint's retries becomes an `error` record for
its id and the run goes on (the caller exits 1 after writing everything); a client error (a 4xx other
than 408/429, e.g. "image input not supported") is the same for every item and aborts the run instead.
`cmd_protocol="line"` speaks the issue's {id, question, images} line protocol (line_model.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from methodkit.core.errors import DataError, UsageError
from methodkit.core.progress import silent
from methodkit.tools.causal_spatial import baselines, bench_io

TEMPLATE = "Write your response into this json template: {'Reasoning': '<your reasons>', 'Answer': '<Your answer>'}"
COW_NOTE = (
    "Note that, the first image is the initial state. The subsequent images are simulated scenarios according "
    "to the first image and motion context provided in the question; use them as visual cues of what would happen."
)


def prompt(item: dict, with_cow: bool) -> str:
    text = item["question"] + "\n" + TEMPLATE
    return text + "\n" + COW_NOTE if with_cow else text


def check_cow(cow_dir: str, items: list[dict], frames: list[int], bench_sha: str | None, *, need_frames: bool,
              mujoco_version: str | None = None, allow_drift: bool = False) -> None:  # fmt: skip
    """Every item must have its COW record (and the frames asked for) from this very benchmark, simulated
    by the MuJoCo version that made its answers (unless `allow_drift`)."""
    folder = Path(cow_dir)
    missing, short, other, drift = [], [], [], []
    for it in items:
        path = folder / it["id"] / "cow.json"
        if not path.is_file():
            missing.append(it["id"])
            continue
        rec = json.loads(path.read_text())
        if bench_sha is not None and rec.get("bench_sha256") != bench_sha:
            other.append(it["id"])
        if need_frames and any(k >= len(rec.get("frames", [])) for k in frames):
            short.append(it["id"])
        if mujoco_version and rec.get("mujoco_version") not in (None, mujoco_version) and not allow_drift:
            drift.append(it["id"])
    if missing:
        raise DataError(f"--cow {cow_dir}: no COW output for {len(missing)} item(s): {', '.join(missing[:6])}"
                        " (run cow-simulate on them; items are never evaluated image-only silently)")  # fmt: skip
    if other:
        raise DataError(f"--cow {cow_dir}: simulated from another benchmark (generator hash differs) for "
                        f"{', '.join(other[:6])}")  # fmt: skip
    if drift:
        raise DataError(f"--cow {cow_dir}: simulated with another MuJoCo version than the benchmark's answers for "
                        f"{', '.join(drift[:6])}; pass --allow-version-drift to compare anyway")  # fmt: skip
    if short:
        raise DataError(f"--frames {','.join(map(str, frames))}: beyond the frames COW wrote for {', '.join(short[:6])}")


def _record(item, model: str, text: str | None, error: str | None, cow: bool, frames) -> dict:
    return {"id": item["id"], "task": item.get("task"), "level": item.get("level"), "answer": item["answer"],
            "not_sure": item.get("not_sure"), "options": item.get("options"), "model": model, "text": text,
            "error": error, "cow": cow, "frames": list(frames) if cow else []}  # fmt: skip


def _cow_events(cow_dir, item: dict, from_frames: bool) -> dict:
    record = baselines.load_cow(cow_dir, item)
    if not from_frames:
        return record
    from methodkit.tools.causal_spatial import frames_reader

    return {"events": frames_reader.events(record, frames_reader.load(cow_dir, record), item["question"])}


def _aborts(exc) -> bool:
    """A client error: the server refuses this kind of request (bad model, no image input, bad key)."""
    return isinstance(exc.status, int) and 400 <= exc.status < 500 and exc.status not in (408, 429)


def _image_paths(items, bench, cow_dir, frames, with_cow, scratch) -> list[list[str]]:
    """Absolute image paths per item for the line protocol (Parquet images are written to `scratch`)."""
    out = []
    for it in items:
        if it.get("image_bytes") is not None:
            first = Path(scratch) / f"{it['id']}.img"
            first.write_bytes(it["image_bytes"])
        elif it.get("image"):
            first = Path(bench) / it["image"]
        else:
            raise DataError(f"{it['id']}: no image (the benchmark was generated with --gl none); a model needs "
                            "a benchmark generated with images")  # fmt: skip
        paths = [str(first.resolve())]
        if with_cow:
            rec = baselines.load_cow(cow_dir, it)
            paths += [str((Path(cow_dir) / rec["frames"][k]).resolve()) for k in frames]
        out.append(paths)
    return out


def evaluate(items: list[dict], bench: str | None, spec, *, endpoint=None, cow_dir: str | None = None,
             frames=(1, 3, 5), done_ids=(), train: list[dict] | None = None, seed: int = 0,
             bench_sha: str | None = None, mujoco_version: str | None = None, allow_drift: bool = False,
             cmd_protocol: str = "chat", from_frames: bool = False, progress=silent) -> list[dict]:  # fmt: skip
    """New prediction records for the items not in `done_ids` (failed requests as `error` records)."""
    todo = [it for it in items if it["id"] not in set(done_ids)]
    name = spec.text
    with_cow = cow_dir is not None
    if name == "cow-reader" and not with_cow:
        raise UsageError("--model cow-reader reads COW outputs; pass --cow COWDIR")
    if from_frames and name != "cow-reader":
        raise UsageError(f"--from-frames is for --model cow-reader, not {name}")
    if with_cow:
        check_cow(cow_dir, todo, list(frames), bench_sha, need_frames=name != "cow-reader",
                  mujoco_version=mujoco_version, allow_drift=allow_drift)  # fmt: skip
    if spec.kind == "baseline":
        if name in baselines.NEEDS_TRAIN and not train:
            raise UsageError(f"--model {name} learns its prior from a disjoint benchmark; pass --train BENCH")
        if name == "heuristic2d" and bench is None:
            raise UsageError("--model heuristic2d needs a generated benchmark folder (images and instance masks)")
        answer = {
            "random": lambda it: baselines.random_answer(it, seed),
            "majority": baselines.Majority(train) if name == "majority" else None,
            "text-prior": baselines.TextPrior(train, seed) if name == "text-prior" else None,
            "heuristic2d": lambda it: baselines.heuristic2d(it, bench),
            "cow-reader": lambda it: baselines.read_cow(it, _cow_events(cow_dir, it, from_frames)),
        }[name]
        out = []
        for k, it in enumerate(todo):
            out.append(_record(it, name, answer(it), None, with_cow, frames))
            progress("eval", k + 1, len(todo))
        return out
    import tempfile

    from methodkit.core.endpoint import EndpointError, Request, image_part

    line = cmd_protocol == "line"
    if line and spec.kind != "cmd":
        raise UsageError(f"--cmd-protocol line speaks to cmd: models, not {name}")
    if line:
        from methodkit.tools.causal_spatial.line_model import LineCommandTransport

        endpoint.transport = LineCommandTransport(spec.argv, endpoint.timeout)
    with tempfile.TemporaryDirectory(prefix="causal-spatial-") as scratch:
        paths = _image_paths(todo, bench, cow_dir, frames, with_cow, scratch)
        requests = []
        for it, images in zip(todo, paths):
            text = prompt(it, with_cow)
            extra = {"line": {"id": it["id"], "question": text, "images": images}} if line else {}
            requests.append(Request.user(text, *(image_part(p) for p in images), **extra))
        answers = endpoint.ask_many(requests, progress=progress, keep_going=True)
    fatal = [a for a in answers if isinstance(a, EndpointError) and _aborts(a)]
    if fatal:
        raise EndpointError(f"{fatal[0].message} (a client error, the same for every item: not retried per id)",
                            [a if not isinstance(a, EndpointError) else None for a in answers], fatal[0].url,
                            fatal[0].status)  # fmt: skip
    return [_record(it, name, None, a.message, with_cow, frames) if isinstance(a, EndpointError)
            else _record(it, name, a.text, None, with_cow, frames) for it, a in zip(todo, answers)]  # fmt: skip


def raise_if_failed(new: list[dict]) -> None:
    """After the predictions (and --meta) are written: exit 1 if any request failed for good. The
    command's plan of outputs is committed first, so the error records are kept for --resume."""
    failed = [r for r in new if r["error"]]
    if not failed:
        return
    from methodkit.core import outputs
    from methodkit.core.errors import RunFailure

    plan = outputs.active_plan()
    if plan is not None:
        plan.commit()
    raise RunFailure(f"{len(failed)} of {len(new)} requests failed after their retries (first: {failed[0]['id']}: "
                     f"{failed[0]['error']}); error records written, --resume asks them again")  # fmt: skip


def load_bench(path: str) -> tuple[list[dict], str | None, dict]:
    """(items, bench folder or None, meta) from a generated folder or a CausalSpatial-style Parquet."""
    p = Path(path)
    if p.is_dir():
        return bench_io.load_items(p), str(p), bench_io.load_meta(p)
    if p.suffix != ".parquet":
        raise DataError(f"{path}: expected a benchmark folder or a .parquet file")
    import pandas as pd

    frame = pd.read_parquet(p)
    need = ("id", "question", "answer", "image")
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column '{missing[0]}' (columns: {', '.join(map(str, frame.columns))})")
    items = []
    for row, rec in enumerate(frame.to_dict("records")):
        img = rec["image"]
        if isinstance(img, dict):
            img = img.get("bytes")
        if not isinstance(img, bytes | bytearray) or not img:
            raise DataError(f"{path}: row {row}: image is not encoded bytes")
        from methodkit.core.endpoint.messages import media_type

        try:
            media_type(bytes(img))
        except DataError:
            raise DataError(f"{path}: row {row}: image cannot be decoded (not PNG/JPEG/GIF/WebP)") from None
        iid = str(rec["id"])
        task = iid.split("_Level_")[0].lower() if "_Level_" in iid else "unknown"
        level = int(iid.split("_Level_")[1].split("_")[0]) if "_Level_" in iid else 0
        options = [m.group(2) for m in __import__("re").finditer(r"^\(([A-J])\)\s*(.+)$", rec["question"], 8)]
        items.append({"id": iid, "task": task, "level": level, "question": rec["question"],
                      "answer": str(rec["answer"]).strip("() "), "not_sure": rec.get("not_sure"),
                      "options": options, "image_bytes": bytes(img)})  # fmt: skip
    return items, None, {}
