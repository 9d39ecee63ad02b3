"""Camera geometry: placing a camera by position and target, its intrinsics K and pose T.

Conventions (the ones OpenCV and most vision code use, so K and T can be handed on as they are):
- camera frame: x right, y down, z forward (MuJoCo's own camera frame is x right, y up, -z forward;
  `world_from_camera` converts);
- pixels: (u, v) = (column, row), the centre of the top-left pixel is (0, 0), so a point with camera
  coordinates (X, Y, Z) lands at u = fx X / Z + cx, v = fy Y / Z + cy and is drawn in pixel
  (round(u), round(v));
- T is world-from-camera: X_world = T @ [X_cam, 1].
MuJoCo's fovy is the full vertical angle and its pixels are square, so fx = fy = (H / 2) / tan(fovy / 2).
"""

from __future__ import annotations

import numpy as np

# MuJoCo camera axes expressed in the OpenCV camera frame: y and z flip.
_MJ_TO_CV = np.diag([1.0, -1.0, -1.0])


def look_at_matrix(pos, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """3x3 rotation whose columns are MuJoCo's camera axes (right, up, backward) in world coordinates."""
    pos, target, up = (np.asarray(v, dtype=float) for v in (pos, target, up))
    forward = target - pos
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    true_up = np.cross(right, forward)
    return np.column_stack([right, true_up, -forward])


def matrix_to_quat(rot: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation matrix (Shepperd's method, stable for every angle)."""
    m = np.asarray(rot, dtype=float)
    trace = np.trace(m)
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    q = np.asarray(q)
    return q / np.linalg.norm(q) * (1 if q[0] >= 0 else -1)


def intrinsics(fovy_deg: float, width: int, height: int) -> np.ndarray:
    """3x3 K for a MuJoCo camera with vertical field of view `fovy_deg` rendered at width x height."""
    f = 0.5 * height / np.tan(np.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def world_from_camera(cam_pos, cam_xmat) -> np.ndarray:
    """4x4 world-from-camera pose (OpenCV axes) from MuJoCo's data.cam_xpos / data.cam_xmat rows."""
    pose = np.eye(4)
    pose[:3, :3] = np.asarray(cam_xmat, dtype=float).reshape(3, 3) @ _MJ_TO_CV
    pose[:3, 3] = np.asarray(cam_pos, dtype=float)
    return pose


def project(K: np.ndarray, T: np.ndarray, points) -> tuple[np.ndarray, np.ndarray]:
    """World points (N, 3) -> pixel coordinates (N, 2) as (u, v) and their depth Z along the camera axis."""
    pts = np.atleast_2d(np.asarray(points, dtype=float))
    cam = (pts - T[:3, 3]) @ T[:3, :3]  # R^T (p - t), row-wise
    z = cam[:, 2]
    uv = (cam[:, :2] / z[:, None]) * np.diag(K)[:2] + K[:2, 2]
    return uv, z


def unproject(K: np.ndarray, T: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """A depth image (H, W) in metres -> world points (H, W, 3) (background pixels come out far away)."""
    h, w = depth.shape
    u, v = np.meshgrid(np.arange(w, dtype=float), np.arange(h, dtype=float))
    x = (u - K[0, 2]) / K[0, 0] * depth
    y = (v - K[1, 2]) / K[1, 1] * depth
    cam = np.stack([x, y, depth], axis=-1)
    return cam @ T[:3, :3].T + T[:3, 3]
