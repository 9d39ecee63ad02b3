"""Content parts (images as data URLs, videos as timed frames) and the response cache and its key."""

from __future__ import annotations

import base64
import io
import sqlite3

import numpy as np
import pytest
from PIL import Image

from methodkit.core.endpoint.answer import Answer
from methodkit.core.endpoint.cache import ResponseCache, cache_key
from methodkit.core.endpoint.messages import Request, image_part, sample_times, user_message, video_parts
from methodkit.core.errors import DataError, UsageError


def _decode(part: dict) -> tuple[str, bytes]:
    url = part["image_url"]["url"]
    head, _, payload = url.partition(";base64,")
    return head.removeprefix("data:"), base64.b64decode(payload)


def _rgb(seed: int, shape=(6, 8, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def test_array_image_travels_as_a_png_data_url_that_decodes_to_the_same_pixels():
    array = _rgb(0)
    kind, data = _decode(image_part(array))
    assert kind == "image/png"
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), array)


def test_file_and_bytes_images_keep_their_bytes_and_type(tmp_path):
    buffer = io.BytesIO()
    Image.fromarray(_rgb(1)).save(buffer, format="JPEG")
    path = tmp_path / "x.jpg"
    path.write_bytes(buffer.getvalue())
    assert _decode(image_part(path)) == ("image/jpeg", buffer.getvalue())
    assert _decode(image_part(buffer.getvalue())) == ("image/jpeg", buffer.getvalue())


def test_unknown_image_bytes_and_bad_arrays_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="not PNG"):
        image_part(b"GIF-ish but not")
    with pytest.raises(DataError, match="uint8"):
        image_part(np.zeros((4, 4, 3), dtype=np.float32))
    with pytest.raises(DataError, match="cannot read image"):
        image_part(tmp_path / "missing.png")


def test_user_message_mixes_text_and_images_in_order():
    message = user_message("Which is heavier?", _rgb(2), "Answer A or B.")
    kinds = [p["type"] for p in message["content"]]
    assert kinds == ["text", "image_url", "text"]
    assert user_message("plain") == {"role": "user", "content": "plain"}


def test_video_frames_are_sampled_evenly_with_their_timestamps():
    assert sample_times(100, 25.0, 4) == [(12, 0.48), (37, 1.48), (62, 2.48), (87, 3.48)]
    frames = np.stack([np.full((4, 4, 3), i, dtype=np.uint8) for i in range(10)])
    parts = video_parts(frames, fps=5.0, count=2)
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url"]
    assert parts[0]["text"] == "[frame at 0.40 s]" and parts[2]["text"] == "[frame at 1.40 s]"
    pixels = np.asarray(Image.open(io.BytesIO(_decode(parts[3])[1])))
    assert (pixels == 7).all()  # frame index 7 of 10 is the second sample
    assert len(video_parts(frames[:3], fps=1.0, count=8)) == 6  # never more samples than frames


def test_cache_key_depends_on_model_messages_and_parameters_only():
    messages = Request.user("Is it red?").messages
    key = cache_key("openai:m", messages, {"temperature": 0, "seed": 1})
    assert key == cache_key("openai:m", messages, {"seed": 1, "temperature": 0, "max_tokens": None})
    assert (
        len(
            {
                key,
                cache_key("openai:other", messages, {"temperature": 0, "seed": 1}),
                cache_key("openai:m", Request.user("Is it blue?").messages, {"temperature": 0, "seed": 1}),
                cache_key("openai:m", messages, {"temperature": 0, "seed": 2}),
            }
        )
        == 4
    )


def test_cache_key_hashes_images_by_content(tmp_path):
    path = tmp_path / "a.png"
    Image.fromarray(_rgb(3)).save(path)
    from_file = cache_key("m", [user_message("q", path)], {})
    from_bytes = cache_key("m", [user_message("q", path.read_bytes())], {})
    assert from_file == from_bytes
    other = cache_key("m", [user_message("q", _rgb(4))], {})
    assert other != from_file
    # the key document holds the hash of the bytes, not the base64 text
    from methodkit.core.endpoint.cache import _keyable

    url = image_part(path)["image_url"]["url"]
    assert _keyable(url).startswith("data:image/png;sha256,") and len(_keyable(url)) < 100


def test_cache_persists_across_opens_and_never_stores_messages(tmp_path):
    path = tmp_path / "deep" / "cache.sqlite"
    cache = ResponseCache(path)
    answer = Answer("B", "served-model", "stop", {"total_tokens": 4})
    cache.put("k1", "openai:m", answer.stored())
    cache.close()
    again = ResponseCache(path)
    assert len(again) == 1
    assert Answer.from_stored(again.get("k1")) == Answer("B", "served-model", "stop", {"total_tokens": 4}, cached=True)
    assert again.get("k2") is None
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(responses)")]
    assert columns == ["key", "model", "answer", "created"]


def test_cache_path_that_cannot_be_opened_is_a_usage_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="--cache .*cannot open the response cache"):
        ResponseCache(tmp_path / "file" / "cache.sqlite")


def test_a_cached_answer_from_another_version_with_more_fields_still_loads():
    record = {**Answer("B").stored(), "reasoning": "added later"}
    assert Answer.from_stored(record) == Answer("B", cached=True)
