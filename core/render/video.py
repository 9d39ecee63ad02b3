"""Frames to files: PNG through Pillow, MP4 (H.264) through PyAV; both written atomically.

The bytes depend only on the pixels (and the fps and quality settings): Pillow's PNG writer and
x264 with a fixed thread count are deterministic, and no time stamp or tool version that changes
between runs goes into the files beyond the library's fixed encoder tag.
"""

from __future__ import annotations

import io as _bytes_io
import os
from collections.abc import Iterable

import numpy as np

from methodkit.core import io
from methodkit.core.errors import DataError, UsageError


def png_bytes(image: np.ndarray) -> bytes:
    """PNG of an (H, W, 3) uint8 RGB image, an (H, W) uint8 grey one or an (H, W) uint16 one (depth in mm)."""
    from PIL import Image

    image = np.ascontiguousarray(image)
    rgb = image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    grey = image.dtype in (np.uint8, np.uint16) and image.ndim == 2
    if not (rgb or grey):
        raise DataError(f"cannot write a {image.dtype} image of shape {image.shape} as PNG")
    pic = Image.fromarray(image)  # uint8 RGB -> "RGB", uint8 -> "L", uint16 -> "I;16"
    buffer = _bytes_io.BytesIO()
    pic.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def depth_to_mm(depth: np.ndarray, max_metres: float = 65.535) -> np.ndarray:
    """Depth in metres -> uint16 millimetres (the usual depth-PNG encoding); beyond `max_metres` -> 0."""
    mm = np.round(np.asarray(depth, dtype=np.float64) * 1000.0)
    mm[(mm > max_metres * 1000.0) | ~np.isfinite(mm)] = 0
    return mm.astype(np.uint16)


def write_png(image: np.ndarray, path: str | os.PathLike, *, force: bool = False) -> None:
    """Write one image as PNG (atomically; `-` is stdout)."""
    data = png_bytes(image)
    with io.atomic_write(path, force=force) as handle:
        handle.write(data)


def _check_frame(frame: np.ndarray, shape: tuple | None, index: int) -> np.ndarray:
    frame = np.ascontiguousarray(frame)
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise DataError(f"frame {index}: expected an (H, W, 3) uint8 RGB image, got {frame.dtype} {frame.shape}")
    if shape is not None and frame.shape != shape:
        raise DataError(f"frame {index}: shape {frame.shape} differs from the first frame's {shape}")
    if frame.shape[0] % 2 or frame.shape[1] % 2:
        raise DataError(f"frame {index}: H.264 needs an even width and height, got {frame.shape[1]}x{frame.shape[0]}")
    return frame


def encode_mp4(frames: Iterable[np.ndarray], handle, *, fps: int = 30, crf: int = 18) -> int:
    """Encode RGB frames as H.264 (yuv420p) in MP4 into a seekable binary handle; returns the frame count."""
    import av

    container = av.open(handle, mode="w", format="mp4")
    try:
        stream = None
        count = 0
        shape = None
        for count, frame in enumerate(frames, start=1):
            frame = _check_frame(frame, shape, count - 1)
            if stream is None:
                shape = frame.shape
                stream = container.add_stream("libx264", rate=fps)
                stream.width, stream.height = shape[1], shape[0]
                stream.pix_fmt = "yuv420p"
                # One thread: x264's output then depends on nothing but the pixels and these options.
                stream.options = {"crf": str(crf), "preset": "medium", "threads": "1"}
                stream.codec_context.thread_count = 1
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        if stream is None:
            raise DataError("no frames to encode")
        for packet in stream.encode(None):
            container.mux(packet)
    finally:
        container.close()
    return count


def write_mp4(
    frames: Iterable[np.ndarray], path: str | os.PathLike, *, fps: int = 30, crf: int = 18, force: bool = False
) -> int:
    """Write RGB frames as an H.264 MP4 file (atomically); returns the frame count."""
    if str(path) == "-":
        raise UsageError("an MP4 file needs a seekable output; pass -o FILE.mp4 instead of stdout")
    if not 1 <= fps <= 240:
        raise UsageError(f"fps must be in [1, 240], got {fps}")
    if not 0 <= crf <= 51:
        raise UsageError(f"crf must be in [0, 51], got {crf}")
    with io.atomic_write(path, force=force) as handle:
        return encode_mp4(frames, handle, fps=fps, crf=crf)


def read_mp4(path: str | os.PathLike) -> np.ndarray:
    """Decode an MP4 back to (N, H, W, 3) uint8 frames (for checks and tests)."""
    import av

    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
