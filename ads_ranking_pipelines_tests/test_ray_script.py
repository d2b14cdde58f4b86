"""A test's own local Ray (``ray_script.py``) is started again only when Ray's start timed out."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from ads_ranking_pipelines_tests.ray_script import RAY_START_TIMED_OUT, init_local_ray, ray_script_env, run_ray_script

# Fails the first time it runs in a folder (with the given message), succeeds after.
ONCE = """
import pathlib, sys
mark = pathlib.Path(sys.argv[1]) / "ran"
if not mark.exists():
    mark.touch()
    sys.exit(sys.argv[2])
print("ok")
"""


def test_a_ray_start_that_timed_out_runs_again_in_a_new_process(tmp_path):
    out = run_ray_script(ONCE, str(tmp_path), f"Exception: {RAY_START_TIMED_OUT}.", env=ray_script_env(tmp_path))
    assert (out.returncode, out.stdout.strip()) == (0, "ok")


def test_any_other_failure_is_the_result(tmp_path):
    out = run_ray_script(ONCE, str(tmp_path), "ValueError: bad spec", env=ray_script_env(tmp_path))
    assert out.returncode == 1 and "bad spec" in out.stderr


class FakeRay:
    """``ray.init`` whose first start times out as Ray's does, leaving a process of it behind."""

    def __init__(self, error: str):
        self.error, self.inits, self.shutdowns, self.left = error, [], 0, None

    def init(self, _temp_dir: str, **kwargs) -> None:
        self.inits.append((_temp_dir, kwargs))
        if len(self.inits) == 1:
            self.left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", _temp_dir])
            raise Exception(self.error)

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_in_process_a_timed_out_start_is_cleared_away_and_started_again_in_a_new_dir():
    ray = FakeRay(f"{RAY_START_TIMED_OUT}. This could happen because ...")
    used = init_local_ray(ray, lambda: tempfile.mkdtemp(prefix="rs", dir="/tmp"), num_cpus=3)
    try:
        (first, _), (second, kwargs) = ray.inits
        assert used == second != first and kwargs == {"num_cpus": 3} and ray.shutdowns == 1
        assert ray.left.wait(timeout=10) == -signal.SIGKILL     # the first try's process is stopped
        assert not os.path.exists(first) and os.path.isdir(second)
    finally:
        shutil.rmtree(used, ignore_errors=True)


def test_in_process_any_other_failure_is_raised(tmp_path):
    ray = FakeRay("GCS port file not found")
    with pytest.raises(Exception, match="GCS port file not found"):
        init_local_ray(ray, lambda: str(tmp_path))
    ray.left.kill()
    assert len(ray.inits) == 1
