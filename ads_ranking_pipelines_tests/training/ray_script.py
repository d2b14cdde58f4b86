"""Run a test's Python script that starts its own local Ray (``ray.init()``) in a fresh process.

``ray.init`` gives its raylet a fixed 30 s to register with the GCS (``ray/_private/node.py``,
not configurable). On the loaded 2-core machine a full suite once ran past it (2026-12-07,
``test_inference``), and the script failed before doing anything it was there to check. That
failure, and only that one, is tried once more in a new process; any other failure is the result.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
