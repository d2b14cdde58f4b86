"""The watchdog of a run's local cluster: the cluster side's check that its controller lives.

A run's session cluster (``LocalRayBackend.session``) is started with one watchdog process, in
a process session of its own, so it outlives whatever kills the process that started the
cluster. Every ``interval_s`` it checks that controller (its PID and start time, from the
cluster's state file). When the controller is gone - SIGKILL, an OOM kill, a crash - it stops
the cluster's processes, then runs the cluster's ``on_orphan`` command (the Dagster layer marks
the run failed with its reason and its unevaluated model versions unattended), and exits. It
exits quietly when the state file goes: the cluster was torn down as usual.

A warm cluster (``keep_warm_s``, ``local_warm.py``) outlives its controller by design, so its
watchdog never stops it: when the controller is gone, it runs ``on_orphan`` only if the run
that made the cluster still holds its lease there (it died instead of ending), and exits. The
cluster stays for the runs that hold it, or for the GC once it has been idle for its TTL.

    python -m ads_ranking_pipelines.backends.local_watchdog STATE_FILE [INTERVAL_S]

(started by ``watchdog_spawn.spawn``, so that the cluster module does not import this one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.local_warm_lease import read_leases
from ads_ranking_pipelines.backends.processes import process_alive

ORPHAN_REASON_ENV = "ADS_RANKING_ORPHAN_REASON"
ORPHAN_TIMEOUT_S = 120.0


def _say(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)


def _orphaned(state_file: Path) -> dict | None:
    """The cluster's state once its controller is gone; None while it lives or the file is gone."""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None
    if process_alive(int(state.get("controller_pid") or 0), str(state.get("controller_start") or "")):
        return None
    return state


def _run_on_orphan(state: dict, reason: str) -> None:
    command = list(state.get("on_orphan") or [])
    if command:
        env = {**os.environ, ORPHAN_REASON_ENV: reason}
        done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, timeout=ORPHAN_TIMEOUT_S,
                              check=False)
        _say(f"on_orphan {command[2:4]} exited {done.returncode}")


def handle_orphan(state_file: Path, state: dict) -> None:
    """Stop the cluster, then run its ``on_orphan`` command with the reason in its environment."""
    reason = f"the process that started it (pid {state.get('controller_pid')}) is gone"
    _say(f"cluster {state.get('name')}: {reason}; stopping it")
    cluster = LocalRayCluster.find(str(state.get("name")), state_file.parent)
    if cluster is not None:
        cluster.stop(force=True)
    _say(f"cluster {state.get('name')} stopped")
    _run_on_orphan(state, reason)


def handle_warm(state_file: Path, state: dict) -> None:
    """A warm cluster's controller is gone: leave the cluster; report its run if it died."""
    name, run_id = str(state.get("name")), str(state.get("run_id") or "")
    cluster = LocalRayCluster.find(name, state_file.parent)
    if cluster is not None:
        cluster.forget_watchdog()
    held = [lease for lease in read_leases(state_file.parent, name)
            if lease.run_id == run_id and not lease.released_at]
    if not held:
        _say(f"warm cluster {name}: the run that made it ended; kept for the next runs")
        return
    reason = f"the process that started it (pid {state.get('controller_pid')}) is gone"
    _say(f"warm cluster {name}: {reason}; its lease is ignored, the cluster is kept")
    _run_on_orphan(state, reason)


def main(argv: list[str]) -> int:
    state_file = Path(argv[0])
    interval_s = float(argv[1]) if len(argv) > 1 else 1.0
    while state_file.exists():
        state = _orphaned(state_file)
        if state is not None:
            (handle_warm if state.get("keep_warm_s") else handle_orphan)(state_file, state)
            return 0
        time.sleep(interval_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
