"""A test's own local Ray, started by ``ray.init()``: in a script run in a fresh process
(``run_ray_script``) or in the test's process (``init_local_ray``, the ``local_ray`` fixture).

``ray.init`` gives its raylet a fixed 30 s to register with the GCS (``ray/_private/node.py``,
not configurable). On the loaded 2-core machine a full suite ran past it (2026-12-07,
``test_inference``; in CI once, in the ``local_ray`` fixture), and the test failed before doing
anything it was there to check. That failure, and only that one, is tried once more from
scratch (a new process, or a new temp dir once the first try's Ray processes are stopped);
any other failure is the result.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ads_ranking_pipelines.backends.processes import kill_mentioning

RAY_START_TIMED_OUT = "The current node timed out during startup"


def ray_script_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without ``RAY_ADDRESS``, with ``home`` as HOME (Ray's token file)."""
    os.makedirs(home, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return env | {"HOME": str(home), **extra}


def run_ray_script(code: str, *args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -c code *args`` with output captured; again once if Ray's own start timed out."""
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode == 0 or RAY_START_TIMED_OUT not in out.stderr:
            return out
    return out


def init_local_ray(ray, make_temp_dir: Callable[[], str], **kwargs) -> str:
    """``ray.init(_temp_dir=make_temp_dir(), **kwargs)`` in this process; returns the temp dir.
    When Ray's start timed out, the processes it had started (they name that temp dir) are
    killed, the dir removed, and Ray started once more in a new one."""
    for attempt in range(2):
        temp_dir = make_temp_dir()
        try:
            ray.init(_temp_dir=temp_dir, **kwargs)
            return temp_dir
        except Exception as exc:
            if attempt or RAY_START_TIMED_OUT not in str(exc):
                raise
            ray.shutdown()
            kill_mentioning(temp_dir)
            shutil.rmtree(temp_dir, ignore_errors=True)
    raise AssertionError("unreachable")
