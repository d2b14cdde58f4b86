"""Fixtures of the training tests that need a Ray of their own."""

import atexit
import functools
import shutil
import tempfile

import pytest


@functools.cache
def _process_ray_home() -> str:
    """One HOME for every in-process Ray of this test process. Ray 2.60's first local ``ray.init``
    writes its auth token to ``~/.ray/auth_token`` and keeps the token in the process: a later
    ``ray.init`` under another HOME does not write it again, and its GCS, finding no token file,
    dies at start (``ray.init`` then times out waiting for the GCS port file)."""
    home = tempfile.mkdtemp(prefix="ray-home-")
    atexit.register(shutil.rmtree, home, True)
    return home


@pytest.fixture
def ray_home():
    return _process_ray_home()


@pytest.fixture
def local_ray(ray_home):
    ray = pytest.importorskip("ray")
    # Ray's socket paths must stay short (AF_UNIX limit), so its temp dir is a short /tmp dir
    # owned by this test; HOME moves too so Ray's token file does not land in the real HOME.
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    mp = pytest.MonkeyPatch()
    try:
        # undone even when ray.init fails: the variable makes later multi-node clusters refuse
        # their worker nodes (CI: a timed-out ray.init here failed every later local cluster)
        mp.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        mp.setenv("HOME", str(ray_home))
        mp.delenv("RAY_ADDRESS", raising=False)
        ray.init(num_cpus=3, include_dashboard=False, _temp_dir=ray_tmp, log_to_driver=True)
        yield ray
    finally:
        ray.shutdown()
        mp.undo()
        shutil.rmtree(ray_tmp, ignore_errors=True)
