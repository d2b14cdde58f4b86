"""The run launcher: Dagster's ``DefaultRunLauncher`` that can tell when a run's process died.

Dagster's run monitoring (the daemon) asks the run launcher whether each STARTED run's worker
is still healthy, but ``DefaultRunLauncher`` (a run worker process on the code server's host)
does not answer, so a run worker killed with SIGKILL or by the OOM killer stayed STARTED and
kept its GPU pool's queue slot for good. This launcher answers from the controller tag the
``ray_cluster`` resource writes when the run's process starts (``defs/tags.py``): a process
that is gone on this host is a FAILED worker, and the daemon marks the run failed with that
reason (``run_monitoring`` in ``dagster.yaml``). A run whose process runs elsewhere, or has
not started yet, reports RUNNING: the start timeout covers those.

Dagster documents custom run launchers as an extension point but exports the health-check
types only from its launcher module, hence the one private import.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus

from ads_ranking_pipelines.defs.tags import controller_gone


class ProcessCheckingRunLauncher(dg.DefaultRunLauncher):
    """``DefaultRunLauncher`` (same config) whose health check sees a dead run process."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        why = controller_gone(dict(run.tags))
        if why:
            return CheckRunHealthResult(WorkerStatus.FAILED, why)
        return CheckRunHealthResult(WorkerStatus.RUNNING, "")

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "ProcessCheckingRunLauncher":
        return cls(inst_data=inst_data, **(config_value or {}))
