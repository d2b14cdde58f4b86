"""Starting a session cluster's watchdog (``local_watchdog.py``, which stops the cluster when
the process that started it is gone) in a process session of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WATCHDOG_MODULE = "ads_ranking_pipelines.backends.local_watchdog"


def log_path(state_file: Path) -> Path:
    return state_file.with_suffix(".watchdog.log")


def spawn(state_file: Path, interval_s: float = 1.0) -> int:
    """Start the watchdog of the cluster recorded in ``state_file``; returns its PID."""
    with open(log_path(state_file), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", WATCHDOG_MODULE, str(state_file),
             str(interval_s)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            close_fds=True)
    return proc.pid
