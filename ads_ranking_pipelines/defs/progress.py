"""Progress you can see while a Ray step runs, and links to where its job ran.

:class:`StepProgress` takes the step's job records as they arrive (the ``on_message`` of the
step) and, through :class:`~ads_ranking_pipelines.planning.progress.ProgressTracker`, tells how
far the step is: a ``[progress]`` line in the run's event log, the run's
``ads-ranking/progress`` tag (the Dagster runs list shows it), and the run's progress record on
the storage root (``storage/run_progress.py``), which X-Ray's ``/runs`` page reads.

:func:`ray_links` is the metadata that leads to the job: the Ray dashboard and the job's page
on it (``MetadataValue.url``) where the cluster has a reachable dashboard, and where the logs
are once the cluster is gone (a run's cluster is deleted with it: every line the driver printed
is in the run's Dagster event log).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import dagster as dg

from ads_ranking_pipelines.planning.progress import Progress, ProgressTracker, duration
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.run_progress import update_progress

PROGRESS_TAG = "ads-ranking/progress"
DASHBOARD_TAG = "ads-ranking/ray-dashboard"
AFTER_TEARDOWN = ("the run's Ray cluster is deleted with the run (or left as it was, when borrowed): every line "
                  "its driver printed is in this run's Dagster event log ({run_id})")


class StepProgress:
    """Progress of one step of run ``context.run.run_id`` over ``days``."""

    def __init__(self, context: Any, step: str, days: list[dt.date], layout: StorageLayout, model: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.context, self.step, self.layout, self.model, self.clock = context, step, layout, model, clock
        self.run_id = context.run.run_id
        self.tracker = ProgressTracker(step, [d.isoformat() for d in days], clock())
        self._write(self.tracker.now(self.tracker.started), state="running")

    def __call__(self, payload: Any) -> None:
        """One record of the step's job (never raises: progress must not fail a step)."""
        try:
            told = self.tracker.observe(payload, self.clock())
            if told is not None:
                self._tell(told)
        except Exception as exc:
            self.context.log.debug(f"[progress] not updated: {type(exc).__name__}: {exc}")

    def _tell(self, p: Progress) -> None:
        self.context.log.info(f"[progress] {self.step}: {p.text()}")
        eta = duration(p.eta_s) if p.eta_s is not None else "unknown"
        self.context.instance.add_run_tags(self.run_id, {PROGRESS_TAG: f"{self.step} {p.percent:.0f}%, ETA {eta}"})
        self._write(p)

    def finish(self, ok: bool) -> None:
        """The step ended: its last figures, and the run's state when it failed."""
        try:
            p = self.tracker.now(self.clock())
            if ok:
                p = Progress(p.step, p.days_total, p.days_total, 1.0, p.elapsed_s, 0.0)
                self.context.instance.add_run_tags(self.run_id, {PROGRESS_TAG: f"{self.step} done"})
            self._write(p, state=None if ok else "failed")
        except Exception as exc:
            self.context.log.debug(f"[progress] not updated: {type(exc).__name__}: {exc}")

    def links(self, links: dict[str, str]) -> None:
        update_progress(self.layout, self.run_id, model=self.model, links=links, now=self.clock())

    def _write(self, p: Progress, state: str | None = None) -> None:
        update_progress(self.layout, self.run_id, model=self.model, step=self.step, progress=p.record(),
                        state=state, now=self.clock())


def ray_links(dashboard_url: str | None, job_id: str, run_id: str, where: str) -> dict[str, Any]:
    """Metadata leading to job ``job_id``: the dashboard and the job's page on it where there is a
    dashboard URL, its name and cluster, and where its logs are kept after the cluster is gone."""
    out: dict[str, Any] = {"ray_job_id": job_id, "ray_cluster": where,
                           "ray_logs_after_teardown": AFTER_TEARDOWN.format(run_id=run_id)}
    if dashboard_url:
        base = dashboard_url.rstrip("/")
        out["ray_dashboard"] = dg.MetadataValue.url(base)
        out["ray_job_logs"] = dg.MetadataValue.url(f"{base}/#/jobs/{job_id}")
    else:
        out["ray_job_logs"] = dg.MetadataValue.text(
            f"no dashboard reachable from Dagster: while the cluster runs, its RayJob's submitter pod log "
            f"(kubectl logs) or the dashboard through a port-forward to the head service of {where}")
    return out


def plain_links(links: dict[str, Any]) -> dict[str, str]:
    """The links as strings (the run's progress record, X-Ray)."""
    return {k: str(getattr(v, "value", v)) for k, v in links.items()}
