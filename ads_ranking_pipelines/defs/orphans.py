"""A run whose driving process died: marked failed, its unjudged model versions unattended.

Whoever finds the dead run calls :func:`mark_orphaned`: the local cluster's watchdog (through
this module's command line, ``python -m ads_ranking_pipelines.defs.orphans``), the GC sensor
and ``ads-ranking cluster gc`` (for runs whose cluster is gone already: :func:`dead_runs` reads
the controller tag every run gets when its process starts), and the run launcher's health check
(``defs/run_launcher.py``) through Dagster's own run monitoring. Marking the run FAILURE frees
its slot in the pool's run queue.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.defs.tags import CONTROLLER_TAG, MODEL_TAG, controller_gone
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry

FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
IN_FLIGHT = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def mark_orphaned(instance: Any, run_id: str, reason: str, storage_root: str | None) -> bool:
    """Report run ``run_id`` failed (unless it has finished) and mark the versions it trained but
    never evaluated unattended. Returns whether the run was marked."""
    run = instance.get_run_by_id(run_id)
    if run is None or run.status in FINISHED:
        return False
    marked = []
    model = run.tags.get(MODEL_TAG)
    if storage_root and model:
        marked = ModelRegistry(StorageLayout(storage_root), model).mark_unattended(run_id, reason)
    note = f"; its unevaluated model version(s) {', '.join(marked)} are marked unattended" if marked else ""
    instance.report_run_failed(run, f"the run's process died: {reason}{note}")
    return True


def dead_runs(instance: Any, limit: int = 1000) -> list[tuple[str, str]]:
    """(run id, why) of the in-flight runs whose controlling process on this host is gone."""
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT), limit=limit)
    found = []
    for record in records:
        run = record.dagster_run
        if CONTROLLER_TAG in run.tags and (why := controller_gone(run.tags)):
            found.append((run.run_id, why))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--dagster-home", required=True)
    parser.add_argument("--storage-root", default=None)
    parser.add_argument("--reason", default=os.environ.get("ADS_RANKING_ORPHAN_REASON", "its process is gone"))
    args = parser.parse_args(argv)
    root = args.storage_root or Settings.from_environ(os.environ).home
    with dg.DagsterInstance.from_config(args.dagster_home) as instance:
        marked = mark_orphaned(instance, args.run_id, args.reason, root)
    print(f"run {args.run_id}: {'marked failed' if marked else 'already finished or unknown'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
