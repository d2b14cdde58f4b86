"""The daily job end to end on the KubeRay backend, against the fake API server whose toy
operator runs real Ray (``Scenario(execute=True)``): the run's Ray steps are steps of ONE
RayJob (the run's driver, ``defs/run_driver.py``) whose cluster is a real local Ray cluster and
whose submitter really runs the driver.

The storage root is a path on a "shared volume" (``shared_volume_claim``): the Ray pods mount
it at the same path - here they are processes on this machine and see it directly. The run
covers two days (a single-run backfill): all four assets materialize for both days, the run
makes exactly one RayJob (one, not one per Ray step nor per day), each step's driver lines land on
that step, and nothing is left in the
fake's store nor any Ray process on the machine afterwards.
"""

from __future__ import annotations

import datetime as dt
import sys

import dagster as dg
import pytest

from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.jobs import daily_retraining, range_tags
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES_WITH_CHAMPION
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)

NS = "ads-ranking"
DAY = dt.date(2026, 3, 10)
DAYS = [DAY, DAY + dt.timedelta(days=1)]
TINY = TrainingParams(dataset_window_days=2, num_workers=1, epochs=2, batch_size=256, hash_buckets=2000,
                      embedding_dim=8, dense_arch=(16, 8), over_arch=(16,), learning_rate=0.05)
TINY_SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=4000, num_users=2000, num_ads=500))
IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0"


@pytest.mark.ray
@pytest.mark.integration
def test_daily_job_on_kuberay_against_the_fake(fake_apiserver: FakeKubeApiServer, ads_home,
                                               tmp_path) -> None:
    fake_apiserver.scenario = Scenario(execute=True, dashboard_wait_lines=1)
    fake_apiserver.time_scale = 1.0
    home = str(ads_home)
    ray = KubeRayResource(
        kube_config_file=write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake"),
        kube_context="fake", namespace=NS, storage_home=home, shared_volume_claim="ads-ranking-data",
        image=IMAGE, job_python=sys.executable, ready_timeout_s=300)
    defs = dg.Definitions(
        assets=[impressions, trained_model, model_evaluation, batch_scores], jobs=[daily_retraining],
        resources={"storage": StorageResource(home=home), "event_source": EventSourceResource(),
                   "ray_cluster": ray})
    params = TINY
    # the gates are blocking and this test is about the lifecycle: tiny-model tolerances (see gates)
    with dg.DagsterInstance.get() as instance:
        result = defs.resolve_job_def("daily_retraining").execute_in_process(
            run_config=run_config(params, TINY_SOURCE, evaluation=TINY_MODEL_GATES_WITH_CHAMPION), tags=range_tags(DAYS[0], DAYS[-1]),
            instance=instance, raise_on_error=False)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        entries = instance.all_logs(result.run_id)
        logged = [entry.user_message for entry in entries]
    # the one driver's log, split among its steps: each step's own lines on that step
    by_step = {s: [e.user_message for e in entries if e.step_key == s]
               for s in ("trained_model", "model_evaluation", "batch_scores")}
    assert any("day 2/2: 2026-03-11" in m for m in by_step["trained_model"])
    assert any("xgboost baseline: auc=" in m for m in by_step["model_evaluation"])
    assert not any("xgboost baseline: auc=" in m or "day 2/2: 2026-03-11" in m for m in by_step["batch_scores"])
    # Each submitter printed what KubeRay's prints around the driver log: none of it (the wait
    # echo, the cli.py banner and status lines) reached the run as driver output.
    assert not any("cli.py:" in m or "Waiting for Ray Dashboard" in m for m in logged)
    assert not any("unexpected message received after closed" in m for m in logged)

    done = {(m.asset_key.to_user_string(), m.partition) for m in
            (e.event_specific_data.materialization for e in result.get_asset_materialization_events())}
    assert done == {(a, str(d)) for a in ("impressions", "trained_model", "model_evaluation", "batch_scores")
                    for d in DAYS} | {("model_champion", None)}         # day 1 promoted: the champion's history
    # ONE RayJob (one cluster) for the three Ray steps of both days, with the run's labels, the shared
    # volume and our image
    rayjobs = [key for key in fake_apiserver.created if key[0] == RAYJOBS]
    assert len(rayjobs) == 1, rayjobs
    made = fake_apiserver.operator_made
    assert len(made) == 1
    for cluster in made:
        assert cluster["metadata"]["labels"]["dagster/run-id"] == result.run_id
        worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
        assert worker["containers"][0]["image"] == IMAGE
        assert {"name": "storage", "persistentVolumeClaim": {"claimName": "ads-ranking-data"}} \
            in worker["volumes"]
    versions = [m.metadata["model_version"].value for m in result.asset_materializations_for_node("trained_model")]
    assert ModelRegistry(StorageLayout(home), params.model_name).versions() == sorted(versions) and len(versions) == 2
    # nothing left: not in the fake's store, not on the machine
    assert fake_apiserver.leftovers() == [] and fake_apiserver.names(RAYCLUSTERS) == []
    fake_apiserver.stop()
    temp_dirs = fake_apiserver.runtime().temp_dirs
    assert len(temp_dirs) == 1
    assert [wait_no_processes(d) for d in temp_dirs] == [[]]
