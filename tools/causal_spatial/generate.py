"""`causal-spatial generate`: items, images, scene specs, RGB-D sensors and meta.json in a folder.

Every item is rejection-sampled: a draft whose simulated answer misses the balance schedule's aim,
sits inside an ambiguity margin, or whose named objects show fewer than 150 pixels (at 336 px;
scaled with the image area) is redrawn, and each reason is counted in meta.json.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from methodkit.core import io
from methodkit.core.errors import RunFailure
from methodkit.core.outputs import StagedFolder
from methodkit.core.progress import silent
from methodkit.tools.causal_spatial import tasks

GENERATOR_VERSION = "1.1"  # 1.1: trajectory ramps and bouncing walls
MIN_PIXELS_AT_336 = 150


@dataclass
class GenerateConfig:
    tasks: tuple = tasks.TASKS
    per_task: int = 100
    levels: tuple = (1, 2)
    seed: int = 0
    size: int = 336
    elevation: tuple = (25.0, 45.0)
    objects: tuple = (2, 5)
    max_tries: int = 200
    render: bool = True


@dataclass
class GenerateResult:
    items: int
    per_task_level: dict
    rejections: dict
    answer_balance: dict
    prefilter_agreement: float | None
    out_dir: str
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def item_id(task: str, level: int, k: int) -> str:
    """The official pattern, e.g. Collision_Level_1_17."""
    return f"{task.capitalize()}_Level_{level}_{k}"


def _objects_range(cfg: GenerateConfig, level: int) -> tuple[int, int]:
    lo, hi = cfg.objects
    return (max(2, lo), max(2, min(3, hi))) if level == 1 else (max(3, lo), max(3, hi))


def _split(n: int, levels: tuple) -> dict:
    base, extra = divmod(n, len(levels))
    return {lv: base + (1 if i < extra else 0) for i, lv in enumerate(levels)}


def _visible_enough(frame, scene, names: list[str], size: int) -> bool:
    need = MIN_PIXELS_AT_336 * (size / 336) ** 2
    return all((frame.segmentation == scene.objects[n].body_id).sum() >= need for n in names)


def generate(cfg: GenerateConfig, out_dir: str, *, progress=silent) -> GenerateResult:
    import mujoco

    from methodkit.core.render import video
    from methodkit.tools.causal_spatial import physics

    renderer = None
    if cfg.render:
        from methodkit.core.render.renderer import Renderer

        renderer = Renderer(cfg.size, cfg.size)
    settings = tasks.Settings(size=cfg.size, elevation=cfg.elevation, objects=cfg.objects, renderer=renderer)
    rejections: dict = {t: Counter() for t in cfg.tasks}
    balance: dict = {}
    records = []
    total = cfg.per_task * len(cfg.tasks)
    done = 0
    try:
        with StagedFolder(out_dir) as out:
            for ti, task in enumerate(cfg.tasks):
                for level, count in _split(cfg.per_task, cfg.levels).items():
                    lo, hi = _objects_range(cfg, level)
                    letters = Counter()
                    for k in range(count):
                        iid = item_id(task, level, k)
                        for attempt in range(cfg.max_tries):
                            seq = np.random.SeedSequence([cfg.seed, ti, level, k, attempt])
                            rng = np.random.default_rng(seq)
                            n_obj = int(rng.integers(lo, hi + 1))
                            aim = k % tasks.n_choices(task, level, n_obj)
                            try:
                                draft = tasks.SAMPLERS[task](rng, level, aim, settings, n_obj)
                            except tasks.Reject as why:
                                rejections[task][str(why)] += 1
                                continue
                            scene = physics.compile_spec(draft.spec, iid)
                            frame = None
                            if renderer is not None:
                                data = scene.new_data()
                                frame = renderer.render(scene, data, "cam")
                                if not _visible_enough(frame, scene, draft.named, cfg.size):
                                    rejections[task]["too_few_pixels"] += 1
                                    continue
                            break
                        else:
                            raise RunFailure(
                                f"{iid}: no usable scene after --max-tries {cfg.max_tries} draws "
                                f"(seed {cfg.seed}; rejections: {dict(rejections[task])}); raise --max-tries"
                            )
                        record = _write_item(out, iid, task, level, draft, scene, frame,
                                             [cfg.seed, ti, level, k, attempt], video)  # fmt: skip
                        records.append(record)
                        letters[record["answer"]] += 1
                        done += 1
                        progress("generate", done, total)
                    balance[f"{task}/L{level}"] = dict(sorted(letters.items()))
            body = "".join(io.dumps_json(r) + "\n" for r in records).encode()
            with io.atomic_write(out.path("items.jsonl"), force=True) as handle:
                handle.write(body)
            stats = settings.stats
            agreement = stats["prefilter_agree"] / stats["prefilter_layouts"] if stats.get("prefilter_layouts") else None
            meta = {
                "generator_version": GENERATOR_VERSION,
                "mujoco_version": mujoco.__version__,
                "bench_sha256": hashlib.sha256(body).hexdigest(),
                "config": {**asdict(cfg), "tasks": list(cfg.tasks), "levels": list(cfg.levels)},
                "parameter_ranges": {"camera_elevation_deg": list(cfg.elevation), "objects": list(cfg.objects),
                                     "car_speed_m_s": 0.3, "collision_distance_m": [0.45, 0.75],
                                     "compatibility_margin_L1": [0.08, 0.25], "compatibility_margin_L2": [0.03, 0.12],
                                     "occlusion_shift_m": tasks.SHIFT, "hidden_below": 0.1, "visible_above": 0.5,
                                     "ramp_pitch_deg": [15, 30], "ramp_length_m": [0.22, 0.3],
                                     "wall_restitution_L2": [0.35, 0.8]},  # fmt: skip
                "rejections": {t: dict(sorted(c.items())) for t, c in rejections.items()},
                "answer_balance": balance,
                "prefilter": {"layouts": stats.get("prefilter_layouts", 0), "agree_with_mujoco": agreement},
                "visibility_gt": "segmentation+rays" if renderer is not None else "rays",
                "images": renderer is not None,
            }
            io.write_json(meta, out.path("meta.json"), force=True, indent=1)
    finally:
        if renderer is not None:
            renderer.close()
    per = Counter(f"{r['task']}/L{r['level']}" for r in records)
    return GenerateResult(len(records), dict(sorted(per.items())), meta["rejections"], balance, agreement, str(out_dir))


def _write_item(out, iid, task, level, draft, scene, frame, seed_path, video) -> dict:
    spec_doc = {"spec": draft.spec, "mjcf": scene.to_xml(), "bodies": {str(k): v for k, v in scene.body_names().items()}}
    io.write_json(spec_doc, out.path("scenes", f"{iid}.json"), force=True)
    image = sensors = None
    if frame is not None:
        video.write_png(frame.rgb, out.path("images", f"{iid}.png"), force=True)
        io.write_arrays(out.path("sensors", f"{iid}.npz"), {"depth": frame.depth.astype(np.float32),
                        "ids": frame.segmentation.astype(np.int32), "K": frame.K, "T": frame.T}, force=True)  # fmt: skip
        image, sensors = f"images/{iid}.png", f"sensors/{iid}.npz"
    options = draft.options
    return {
        "id": iid,
        "task": task,
        "level": level,
        "question": draft.question,
        "options": options,
        "answer": tasks.letter(draft.answer),
        "not_sure": tasks.letter(options.index(tasks.NOT_SURE)),
        "image": image,
        "scene": f"scenes/{iid}.json",
        "sensors": sensors,
        "motion": draft.motion,
        "gt": json.loads(io.dumps_json(draft.gt)),
        "seed": seed_path,
    }
