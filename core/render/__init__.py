"""MuJoCo scenes to pictures and videos, method-agnostic.

    spec.py      JSON scene specs: validate() -> the completed spec, DataError naming the key
    build.py     spec -> MjSpec -> compiled Scene (model + name maps); the shipped person model in assets/
    physics.py   simulate(): trajectories, contacts, final poses of spec objects
    camera.py    look-at placement, intrinsics K, world-from-camera T, project/unproject
    renderer.py  Renderer: RGB, depth (metres) and instance segmentation from one mujoco.Renderer
    video.py     PNG (Pillow) and H.264 MP4 (PyAV), atomic and deterministic
    gl.py        the GL backend (egl | osmesa | none), chosen before mujoco is imported

Importing this package imports nothing heavy; build, physics and renderer import mujoco (after gl has
picked a headless backend, egl unless MUJOCO_GL or gl.select() says otherwise).
"""
