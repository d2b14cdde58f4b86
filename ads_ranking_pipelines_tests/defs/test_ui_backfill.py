"""A date-range backfill launched the way the UI launches one: ONE run over the range, with the
GPU-pool and model tags the run queue limits by.

The UI's "Launch backfill" sends the GraphQL ``launchPartitionBackfill`` mutation (asset
selection + partitions); Dagster's backfill daemon turns the backfill into runs, honouring
each asset's backfill policy. Both are driven here in-process on a temporary instance with the
shipped instance settings (queued run coordinator); the run is left queued (no Ray here: what
one range run does is ``test_operate_daily``'s part).
"""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg
import pytest

from ads_ranking_pipelines.config.dagster_instance import instance_settings, render_yaml
from ads_ranking_pipelines.config.pools import load_catalog

pytestmark = pytest.mark.slow  # real processes (README: Tests)

REPO_ROOT = Path(__file__).resolve().parents[2]
DAYS = ["2026-03-10", "2026-03-11", "2026-03-12"]
ASSETS = ["impressions", "trained_model", "model_evaluation", "batch_scores"]


@pytest.fixture
def instance(ads_home, tmp_path, monkeypatch):
    home = tmp_path / "dagster_home_ui"
    home.mkdir()
    (home / "dagster.yaml").write_text(render_yaml(instance_settings(load_catalog(None))))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.chdir(REPO_ROOT)
    with dg.DagsterInstance.get() as inst:
        yield inst


def test_a_backfill_from_the_ui_is_one_run_over_the_range_with_the_pool_tags(instance):
    from dagster._core.execution.backfill import BulkActionStatus
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    with WorkspaceProcessContext(instance, WorkspaceFileTarget([str(REPO_ROOT / "workspace.yaml")])) as ctx:
        result = execute_dagster_graphql(ctx.create_request_context(), LAUNCH_PARTITION_BACKFILL_MUTATION, {
            "backfillParams": {"partitionNames": DAYS, "assetSelection": [{"path": [a]} for a in ASSETS],
                               "tags": [{"key": "dagster/user", "value": "ui-user"}]}})
        launched = result.data["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        for _ in range(3):                          # the daemon's ticks
            list(execute_backfill_iteration(ctx, logging.getLogger("backfill")))
        backfill = instance.get_backfill(launched["backfillId"])
    runs = instance.get_runs()
    assert len(runs) == 1, [r.tags for r in runs]                       # one run for the range
    tags = runs[0].tags
    assert (tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"]) == (DAYS[0], DAYS[-1])
    assert tags["ads-ranking/gpu-pool"] == "local" and tags["ads-ranking/model"] == "quest_ranker", tags
    assert runs[0].status == dg.DagsterRunStatus.QUEUED                 # through the per-pool run queue
    assert backfill.status in (BulkActionStatus.REQUESTED, BulkActionStatus.COMPLETED_SUCCESS)
