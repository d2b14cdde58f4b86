"""Links to the Dagster run that created a cluster.

KubeRay clusters carry the run id in their ``dagster/run-id`` label, a run's local session
cluster records it in its state file (``run_id``). A local cluster from an older state file is
recognised by its name, ``arp-<first 8 characters of the run id>`` with owner ``dagster`` (see
``backends.factory.run_request``); its full id is looked up in the Dagster instance of
``DAGSTER_HOME`` when there is one (recent runs only), and there is no link otherwise.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from urllib.parse import quote

from ads_ranking_pipelines.xray.rows import ClusterRow

log = logging.getLogger(__name__)

LOCAL_RUN_CLUSTER = re.compile(r"^arp-([0-9a-f]{8})$")
RECENT_RUNS = 1000


class DagsterLinks:
    def __init__(self, dagster_url: str, environ: Mapping[str, str]) -> None:
        self.dagster_url = dagster_url
        self.dagster_home = environ.get("DAGSTER_HOME") or None
        self._known: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def run_url(self, run_id: str) -> str:
        return f"{self.dagster_url}/runs/{quote(run_id, safe='')}"

    def annotate(self, row: ClusterRow) -> None:
        if row.dagster_run_id is None and row.backend == "local" and row.owner == "dagster":
            m = LOCAL_RUN_CLUSTER.match(row.name)
            if m:
                row.dagster_run_id = self._full_id(m[1])
        if row.dagster_run_id:
            row.dagster_run_url = self.run_url(row.dagster_run_id)

    def _full_id(self, prefix: str) -> str | None:
        with self._lock:
            if prefix in self._known:
                return self._known[prefix]
        found = self._lookup(prefix)
        with self._lock:
            self._known[prefix] = found
        return found

    def _lookup(self, prefix: str) -> str | None:
        if not self.dagster_home:
            return None
        try:
            from dagster import DagsterInstance

            with DagsterInstance.from_config(self.dagster_home) as instance:
                return next((r for r in instance.get_run_ids(limit=RECENT_RUNS)
                             if r.startswith(prefix)), None)
        except Exception as exc:  # noqa: BLE001 - a link is optional; say why in the log
            log.warning("cannot look up Dagster run %s* in %s: %s", prefix, self.dagster_home, exc)
            return None
