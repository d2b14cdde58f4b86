"""Fixtures of the training tests that need a Ray of their own."""

import os
import shutil
import tempfile

import pytest


@pytest.fixture
def local_ray(tmp_path):
    ray = pytest.importorskip("ray")
    # Ray's socket paths must stay short (AF_UNIX limit), so its temp dir is a short /tmp dir
    # owned by this test; HOME moves too so Ray's token file does not land in the real HOME.
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    mp = pytest.MonkeyPatch()
    try:
        # undone even when ray.init fails: the variable makes later multi-node clusters refuse
        # their worker nodes (CI: a timed-out ray.init here failed every later local cluster)
        mp.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        mp.setenv("HOME", str(tmp_path / "home"))
        mp.delenv("RAY_ADDRESS", raising=False)
        os.makedirs(tmp_path / "home", exist_ok=True)
        ray.init(num_cpus=3, include_dashboard=False, _temp_dir=ray_tmp, log_to_driver=True)
        yield ray
    finally:
        ray.shutdown()
        mp.undo()
        shutil.rmtree(ray_tmp, ignore_errors=True)
