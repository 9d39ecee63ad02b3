"""Off-screen frames of a scene: RGB, depth in metres and instance segmentation, with K and T.

One `Renderer` holds one mujoco.Renderer, and so one GL context, for all its frames, cameras,
MjData states and scenes. A scene with another model needs MuJoCo's render context rebuilt (it
holds the model's meshes and textures) but not the GL context: in Mesa's software drivers a fresh
GL context costs most of a second (shaders compiled again), a render context in a warm one tens of
milliseconds. mujoco.Renderer has no public way to change its model, so `_retarget` swaps the three
attributes its constructor sets up and, should a MuJoCo version lay them out differently, falls
back to a new mujoco.Renderer. Close it explicitly (or use `with`): GL contexts are a process
resource and software EGL/OSMesa contexts hold their frame buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.core.render import camera as _camera
from methodkit.core.render import gl

mujoco = gl.import_mujoco()


@dataclass
class Frame:
    """One camera's view. `segmentation` holds, per pixel, the body id of the spec object seen there
    (its root body: every link of an arm gives the arm's id), 0 for world geometry such as the floor
    and -1 for the background; `parts` holds the id of the very body (link) seen. `labels` maps those
    ids to spec names. `depth` is the distance along the camera axis in metres (the Z of K and T)."""

    rgb: np.ndarray  # (H, W, 3) uint8
    depth: np.ndarray | None  # (H, W) float32, metres
    segmentation: np.ndarray | None  # (H, W) int32
    parts: np.ndarray | None  # (H, W) int32
    K: np.ndarray  # (3, 3)
    T: np.ndarray  # (4, 4) world-from-camera, OpenCV axes
    camera: str
    labels: dict[int, str]


class Renderer:
    """Renders Scenes at width x height; reuse it across frames and scenes, then close() it."""

    def __init__(self, width: int = 320, height: int = 240):
        if width < 1 or height < 1:
            raise UsageError(f"render size must be positive, got {width}x{height}")
        self.backend = gl.require()
        self.width, self.height = width, height
        self._renderer = None
        self._model = None
        self.contexts_opened = 0  # how many GL contexts this renderer has made (one unless closed between uses)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Free the GL context; the Renderer can be used again (it opens a new one)."""
        if self._renderer is not None:
            self._renderer.close()
        self._renderer = None
        self._model = None

    def _bind(self, model):
        if model is self._model:
            return self._renderer
        limit = (model.vis.global_.offwidth, model.vis.global_.offheight)
        if self.width > limit[0] or self.height > limit[1]:
            raise DataError(
                f"render size {self.width}x{self.height} exceeds the scene's frame buffer {limit[0]}x{limit[1]}; "
                "raise render.width and render.height in the spec"
            )
        if self._renderer is not None and _retarget(self._renderer, model):
            self._model = model
            return self._renderer
        self.close()
        try:
            self._renderer = mujoco.Renderer(model, self.height, self.width)
        except (ImportError, RuntimeError, AttributeError, mujoco.FatalError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise gl.GLBackendError(gl.missing_message(self.backend, detail)) from None
        self._model = model
        self.contexts_opened += 1
        return self._renderer

    def _camera_id(self, model, camera: str | int) -> int:
        cid = camera if isinstance(camera, int) else mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if not 0 <= cid < model.ncam:
            names = [model.camera(i).name for i in range(model.ncam)]
            raise DataError(f"no camera '{camera}' in the scene (cameras: {', '.join(names) or 'none'})")
        return cid

    def rgb(self, scene, data, camera: str | int = 0) -> np.ndarray:
        """Only the colour image (H, W, 3) uint8: the fast path for video frames."""
        r = self._bind(scene.model)
        r.update_scene(data, self._camera_id(scene.model, camera))
        return r.render()

    def render(self, scene, data, camera: str | int = 0, *, depth: bool = True, segmentation: bool = True) -> Frame:
        """RGB, and unless switched off depth and segmentation, of one camera, from one scene update."""
        model = scene.model
        cid = self._camera_id(model, camera)
        r = self._bind(model)
        r.update_scene(data, cid)
        rgb = r.render()
        depth_img = seg = parts = None
        if depth:
            r.enable_depth_rendering()
            depth_img = r.render()
            r.disable_depth_rendering()
        if segmentation:
            r.enable_segmentation_rendering()
            raw = r.render()
            r.disable_segmentation_rendering()
            seg, parts = _instances(model, scene, raw)
        K = _camera.intrinsics(float(model.cam_fovy[cid]), self.width, self.height)
        T = _camera.world_from_camera(data.cam_xpos[cid], data.cam_xmat[cid])
        return Frame(rgb, depth_img, seg, parts, K, T, model.camera(cid).name, scene.body_names())


_RENDERER_STATE = ("_gl_context", "_mjr_context", "_scene", "_model")


def _retarget(r, model) -> bool:
    """Point an open mujoco.Renderer at another model inside its GL context, as its constructor would."""
    if not all(hasattr(r, name) for name in _RENDERER_STATE) or r._gl_context is None or r._mjr_context is None:
        return False
    depth_map = getattr(r._mjr_context, "readDepthMap", None)  # the depth convention the renderer set up
    r._gl_context.make_current()
    r._mjr_context.free()
    r._mjr_context = None
    r._scene = mujoco.MjvScene(model=model, maxgeom=r._scene.maxgeom)
    r._mjr_context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, r._mjr_context)
    if depth_map is not None:
        r._mjr_context.readDepthMap = depth_map
    r._model = model
    return True


def _instances(model, scene, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's (object id, object type) pixels -> spec-object body ids and link body ids."""
    objid, objtype = raw[..., 0], raw[..., 1]
    is_geom = objtype == int(mujoco.mjtObj.mjOBJ_GEOM)
    part_of_geom = np.asarray(model.geom_bodyid, dtype=np.int32)
    root_of_body = np.zeros(model.nbody, dtype=np.int32)
    for obj in scene.objects.values():
        root_of_body[obj.body_ids] = obj.body_id
    parts = np.where(is_geom, part_of_geom[np.where(is_geom, objid, 0)], -1).astype(np.int32)
    seg = np.where(parts >= 0, root_of_body[np.maximum(parts, 0)], -1).astype(np.int32)
    return seg, parts
