"""Where things live under the storage root (``ADS_RANKING_HOME``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ads_ranking_pipelines.storage.fs import join, normalize

PARTITION_PREFIX = "event_date="


def day_uri(events_root: str, day: dt.date) -> str:
    """The folder of one day's events: ``<root>/event_date=YYYY-MM-DD``."""
    return join(events_root, f"{PARTITION_PREFIX}{day.isoformat()}")


@dataclass(frozen=True)
class StorageLayout:
    root: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", normalize(self.root))

    @property
    def synthetic_events(self) -> str:
        return join(self.root, "events", "synthetic")

    def model_root(self, model_name: str) -> str:
        return join(self.root, "models", model_name)

    def versions_root(self, model_name: str) -> str:
        return join(self.model_root(model_name), "versions")

    def model_version(self, model_name: str, version: str) -> str:
        return join(self.versions_root(model_name), version)

    def champion_pointer(self, model_name: str) -> str:
        return join(self.model_root(model_name), "champion.json")

    def scores_root(self, model_name: str) -> str:
        return join(self.root, "scores", model_name)

    def scores(self, model_name: str, day: dt.date, version: str) -> str:
        return join(self.scores_root(model_name), f"{PARTITION_PREFIX}{day.isoformat()}", f"version={version}")

    def controller_lease(self, run_id: str) -> str:
        """The lease the process driving run ``run_id`` renews (``storage/lease.py``)."""
        return join(self.root, "runs", run_id, "controller-lease.json")

    def run_progress(self, run_id: str) -> str:
        """How far run ``run_id``'s steps are, and links to its Ray job (``storage/run_progress.py``)."""
        return join(self.root, "runs", run_id, "progress.json")

    def runs_root(self) -> str:
        return join(self.root, "runs")

    def run_driver_mailbox(self, run_id: str, driver_id: str) -> str:
        """Where the steps of run ``run_id`` are handed to its Ray job driver ``driver_id``
        (``contracts/run_driver.py``)."""
        return join(self.root, "runs", run_id, "driver", driver_id)

    def ray_storage(self) -> str:
        """Ray Train run storage (checkpoints)."""
        return join(self.root, "ray_results")
