"""Chat messages in the chat-completions format: text, images as data URLs, videos as timed frames.

An image is PNG/JPEG/WebP/GIF bytes, a path to such a file, or a uint8 array (H, W), (H, W, 3) or
(H, W, 4) that is encoded as PNG (Pillow, imported only then). A video is sent as frames sampled evenly
in time, each preceded by a text part giving its timestamp, since chat-completions servers take images
but not video files.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from methodkit.core.errors import DataError

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True)
class Request:
    """One chat completion to ask for. `params` (temperature, seed, max_tokens, ...) override the
    endpoint's defaults; a value of None drops the parameter."""

    messages: list[dict]
    params: dict = field(default_factory=dict)

    @classmethod
    def user(cls, *parts, system: str | None = None, **params) -> Request:
        """A one-turn request: `parts` are text strings and content parts (see image_part, video_parts)."""
        messages = [{"role": "system", "content": system}] if system else []
        messages.append(user_message(*parts))
        return cls(messages, params)


def media_type(data: bytes) -> str:
    """The image media type from the file's magic bytes."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise DataError("image is not PNG, JPEG, GIF or WebP (pass the file's bytes, a path or a uint8 array)")


def _png_from_array(array) -> bytes:
    import io

    import numpy as np
    from PIL import Image

    array = np.asarray(array)
    if array.dtype != np.uint8 or array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise DataError(f"image array must be uint8 (H, W), (H, W, 3) or (H, W, 4); got {array.dtype} {array.shape}")
    image = Image.fromarray(np.ascontiguousarray(array))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def image_bytes(image) -> bytes:
    """The encoded bytes of an image given as bytes, a path or a uint8 array."""
    if isinstance(image, bytes | bytearray | memoryview):
        return bytes(image)
    if isinstance(image, str | os.PathLike):
        try:
            return Path(image).read_bytes()
        except OSError as exc:
            raise DataError(f"{image}: cannot read image ({exc.strerror or exc})") from exc
    return _png_from_array(image)


def data_url(image) -> str:
    data = image_bytes(image)
    return f"data:{media_type(data)};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(image, detail: str | None = None) -> dict:
    """A content part carrying one image as a data URL."""
    url: dict[str, Any] = {"url": data_url(image)}
    if detail:
        url["detail"] = detail
    return {"type": "image_url", "image_url": url}


def text_part(text: str) -> dict:
    return {"type": "text", "text": str(text)}


def user_message(*parts) -> dict:
    """A user turn; a single string stays a plain string (what text-only servers expect)."""
    if len(parts) == 1 and isinstance(parts[0], str):
        return {"role": "user", "content": parts[0]}
    content: list[dict] = []
    for part in parts:
        if isinstance(part, str):
            content.append(text_part(part))
        elif isinstance(part, dict):
            content.append(part)
        elif isinstance(part, list):
            content.extend(part)
        else:
            content.append(image_part(part))
    return {"role": "user", "content": content}


def sample_times(n_frames: int, fps: float, count: int) -> list[tuple[int, float]]:
    """`count` frame indices spread evenly over a clip (centres of equal segments), with their times in s."""
    if n_frames <= 0 or fps <= 0 or count <= 0:
        raise DataError(f"video needs frames, fps and a frame count > 0 (got {n_frames}, {fps}, {count})")
    count = min(count, n_frames)
    picks = [min(n_frames - 1, int((k + 0.5) * n_frames / count)) for k in range(count)]
    return [(i, i / fps) for i in picks]


def video_parts(frames: Sequence, fps: float, count: int = 8, detail: str | None = None) -> list[dict]:
    """Content parts for a video: `count` frames sampled evenly, each after a 'frame at T s' text part.

    `frames` is a sequence of images (a (T, H, W, 3) uint8 array works); fps gives the timestamps.
    """
    parts: list[dict] = []
    for index, seconds in sample_times(len(frames), fps, count):
        parts.append(text_part(f"[frame at {seconds:.2f} s]"))
        parts.append(image_part(frames[index], detail))
    return parts
