"""The daily job end to end on the KubeRay backend, as a 2-day backfill on a Kueue pool that
is preempted by higher-priority work mid-training, readmitted, and resumes.

Against the fake API server with real Ray (``Scenario(execute=True)``: each RayJob's cluster is
a real local Ray cluster, its submitter really runs the run's driver) and its toy Kueue, on a
CPU pool whose ClusterQueue quota fits one cluster. The storage root is a path on a "shared
volume" (``shared_volume_claim``): the Ray pods mount it at the same path - here they are
processes on this machine and see it directly.

While the backfill trains (a checkpoint exists) a higher-priority RayJob is created: Kueue
evicts the backfill's Workload, its RayJob is suspended (KubeRay deletes the cluster; the Ray
job ends with it), the high-priority job runs and ends, Kueue readmits the backfill, KubeRay
makes a new cluster and submits the same job again, and the day resumes from its last
checkpoint on the shared volume. The Dagster run does not fail: its log tells the eviction in
Kueue's words, the readmission and the resume; the epochs trained in all add up to the budget.

And what a daily run on KubeRay is, through all that: all four assets materialize for both
days, the run's Ray steps are steps of ONE RayJob (the run's driver, for all steps and days),
each step's driver lines land on that step and none of the submitter's own prints do, and
nothing is left in the fake's store nor any Ray process on the machine afterwards. (The plain
daily run and the preemption were two tests with a real-Ray run each; the suite pays for one.)
"""

from __future__ import annotations

import datetime as dt
import re
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS, KubeRayClient
from ads_ranking_pipelines.kuberay.labels import SUBMISSION_ID_LABEL
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.definitions import event_source_config
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.jobs import daily_retraining, range_tags, run_config, run_tags
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines.training.checkpoint import TRAIN_STATE_FILE
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES
from ads_ranking_pipelines_tests.defs.test_resource_kuberay import assert_nothing_left
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import KueueQueue, pod_sets

NS = "ads-ranking"
DAY = dt.date(2026, 3, 10)
DAYS = [DAY, DAY + dt.timedelta(days=1)]
POOL, QUEUE = "cpu-kueue", "team-a-cpu"
IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0"
EPOCHS = 40
TINY = TrainingParams(gpu_pool=POOL, gpus_per_worker=0, dataset_window_days=2, num_workers=1,
                      epochs=EPOCHS, batch_size=256, hash_buckets=1000, embedding_dim=8,
                      dense_arch=(16, 8), over_arch=(16,), early_stopping_patience=0)
SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=2000, num_users=1000, num_ads=200))
URGENT = "urgent-run"
# tiny models trained 40 epochs: the gates are not what this test is about
GATES = {**TINY_MODEL_GATES, "min_calibration": 0.01, "max_calibration": 100.0, "max_auc_drop_vs_champion": 1.0}


def kueue_catalog(path: Path) -> str:
    data = load_catalog().model_dump(mode="json")
    data["pools"].append({
        "name": POOL, "machine_type": "n2-standard-4",
        "node_selector": {"cloud.google.com/machine-family": "n2"},
        "cpus_per_node": 2, "memory_per_node": "8Gi", "max_workers": 2,
        "max_concurrent_runs": None,
        "kueue": {"local_queue": QUEUE,
                  "priority_classes": {"scheduled": "daily", "backfill": "backfill-low",
                                       "manual": "manual"}}})
    path.write_text(yaml.safe_dump(data))
    return str(path)


def urgent_rayjob(resource: KubeRayResource) -> tuple[dict, float]:
    """A higher-priority RayJob the size of the training run's, and the CPUs it asks for."""
    request = resource.cluster_request(TINY, "sizing").request
    request = request.model_copy(update={"name": URGENT, "owner": "other-team",
                                         "priority_class": "daily"})
    manifest = build_rayjob(resolve_request(request, resource.catalog()), entrypoint="python -V",
                            submission_id=URGENT)
    cpus = sum(s["requests"].get("cpu", 0.0) * s["count"] for s in pod_sets(manifest))
    return manifest, cpus


def _driver_rayjob(fake: FakeKubeApiServer) -> str | None:
    """The run's RayJob (its one driver, for all its steps) once it runs."""
    for name in fake.names(RAYJOBS, NS):
        obj = fake.get(RAYJOBS, NS, name) or {}
        if obj["metadata"]["labels"].get(SUBMISSION_ID_LABEL, "").startswith("run-") and \
                obj.get("status", {}).get("jobDeploymentStatus") == "Running":
            return name
    return None


def _checkpoints(home: Path) -> list[Path]:
    """The run's complete epoch checkpoints (``day_checkpoints``: ``train_state.json`` is written
    last). A folder alone is not enough: preempted before its files were all written, the day
    has nothing to resume from (seen in a full run: the readmitted job started the day over)."""
    return sorted((home / "ray_results").glob(f"*/checkpoint_2*/{TRAIN_STATE_FILE}"))


def _by_step(entries: list) -> dict[str, list[str]]:
    return {s: [e.user_message for e in entries if e.step_key == s]
            for s in ("trained_model", "model_evaluation", "batch_scores")}


@pytest.mark.ray
@pytest.mark.integration
def test_a_backfill_on_kuberay_preempted_by_kueue_resumes_and_its_one_rayjob_leaves_nothing(
        fake_apiserver: FakeKubeApiServer, ads_home, tmp_path) -> None:
    fake = fake_apiserver
    fake.scenario = Scenario(execute=True, dashboard_wait_lines=1)
    fake.scenarios[URGENT] = Scenario(hold_running_s=2.0)  # scripted: no Ray cluster of its own
    home = str(ads_home)
    resource = KubeRayResource(
        kube_config_file=write_kubeconfig(tmp_path / "kubeconfig", fake, context="fake"),
        kube_context="fake", namespace=NS, storage_home=home, shared_volume_claim="ads-ranking-data",
        image=IMAGE, job_python=sys.executable, ready_timeout_s=300,
        pool_catalog=kueue_catalog(tmp_path / "pools.yaml"))
    manifest, cpus = urgent_rayjob(resource)
    queue = KueueQueue(quota={"cpu": cpus})  # fits one of the two
    fake.kueue_queues = {QUEUE: queue}
    fake.kueue_priorities = {"daily": 1000, "backfill-low": 100}
    instance = dg.DagsterInstance.ephemeral()
    defs = dg.Definitions(
        assets=[impressions, trained_model, model_evaluation, batch_scores], jobs=[daily_retraining],
        resources={"storage": StorageResource(home=home), "event_source": EventSourceResource(),
                   "ray_cluster": resource})
    out: dict = {}

    def backfill() -> None:
        out["result"] = defs.resolve_job_def("daily_retraining").execute_in_process(
            run_config=run_config(TINY, event_source_config(SOURCE), evaluation=GATES), instance=instance,
            tags={**run_tags(TINY.model_name, POOL), **range_tags(DAYS[0], DAYS[-1]), "dagster/backfill": "preempt-test"},
            raise_on_error=False)

    started = time.monotonic()
    run = threading.Thread(target=backfill, daemon=True)
    run.start()
    assert fake.wait_for(lambda: not run.is_alive() or (_driver_rayjob(fake) is not None and
                                                        _checkpoints(ads_home)), 400), "no checkpoint"
    assert run.is_alive(), out
    rayjob = _driver_rayjob(fake)
    client = KubeRayClient.for_host(fake.url)
    client.create(RAYJOBS, NS, manifest)
    run.join(600)
    took = time.monotonic() - started
    assert not run.is_alive(), "the run did not end"
    result = out["result"]
    entries = instance.all_logs(result.run_id)
    messages = [e.user_message for e in entries]
    assert result.success, [m for m in messages if "error" in m.lower() or "fail" in m.lower()]
    print(f"kueue preemption: a 2-day backfill trained, evicted, readmitted, resumed and done in {took:.1f}s")

    _evicted_readmitted_and_resumed(fake, queue, rayjob, result, messages)
    _one_rayjob_for_the_run(fake, result, rayjob, _by_step(entries), messages, home)

    client.delete(RAYJOBS, NS, URGENT)
    assert fake.wait_for(lambda: fake.names(RAYJOBS) == [], 30)
    assert_nothing_left(fake)
    assert fake.names("workloads") == []
    fake.stop()
    temp_dirs = fake.runtime().temp_dirs
    assert len(temp_dirs) == 2  # the first cluster and the readmitted job's new one
    assert [wait_no_processes(d) for d in temp_dirs] == [[], []]


def _evicted_readmitted_and_resumed(fake: FakeKubeApiServer, queue: KueueQueue, rayjob: str, result,
                                    messages: list[str]) -> None:
    """Kueue evicted the backfill for the urgent run, then readmitted it; the readmitted job
    resumed the day it was in from that day's last checkpoint and trained the rest only."""
    assert len(queue.evictions) == 1 and queue.evictions[0].startswith(f"rayjob-{rayjob}-")
    history = fake.deployment_history[rayjob]
    assert history[history.index("Running"):] == ["Running", "Suspending", "Suspended", "",
                                                  "Initializing", "Running", "Complete"], history
    assert fake.deployment_history[URGENT][-1] == "Complete"
    evicted = [m for m in messages if m.startswith(f"[kueue] RayJob {NS}/{rayjob} evicted by "
                                                   "Kueue: Preempted: Preempted to accommodate")]
    assert evicted and "waiting to be readmitted" in evicted[0], messages
    readmitted = [m for m in messages if "readmitted by Kueue after" in m]
    assert readmitted and "(it was evicted by Kueue: Preempted: " in readmitted[0], messages
    resumed = {m for m in messages if re.search(r"\[train\] resumed from .*: \d+ epoch\(s\) done", m)}
    assert len(resumed) == 1, resumed  # one resume (Ray's log monitor may print a worker line twice)
    (resumed,) = resumed
    done = int(re.search(r": (\d+) epoch\(s\) done", resumed)[1])
    assert 1 <= done < EPOCHS, resumed
    meta = {m.partition: {k: v.value for k, v in m.metadata.items()}
            for m in result.asset_materializations_for_node("trained_model")}
    assert sorted(meta) == [d.isoformat() for d in DAYS] and all(m["epochs"] == EPOCHS for m in meta.values())
    assert sorted(m.get("resumed_from_epoch") or 0 for m in meta.values()) == [0, done], meta
    # nothing of the new attempt's log was dropped as a replay of the first's
    starts = [m for m in messages if f"training 1 worker(s), at most {EPOCHS} epoch(s)" in m]
    assert len(starts) == 2, messages


def _one_rayjob_for_the_run(fake: FakeKubeApiServer, result, rayjob: str, by_step: dict[str, list[str]],
                            messages: list[str], home: str) -> None:
    """Every asset of both days; ONE RayJob (the run's driver) for the three Ray steps of both
    days, its clusters (the first and the readmitted one's) with the run's labels, our image and
    the shared volume; each step's own driver lines on that step, none of the submitter's."""
    done = {(m.asset_key.to_user_string(), m.partition) for m in
            (e.event_specific_data.materialization for e in result.get_asset_materialization_events())}
    assert done == {(a, str(d)) for a in ("impressions", "trained_model", "model_evaluation", "batch_scores")
                    for d in DAYS} | {("model_champion", None)}         # day 1 promoted: the champion's history
    assert [key[2] for key in fake.created if key[0] == RAYJOBS] == [rayjob, URGENT], fake.created
    made = [c for c in fake.operator_made if c["metadata"]["labels"]["ray.io/originated-from-cr-name"] == rayjob]
    assert len(made) == 2
    for cluster in made:
        assert cluster["metadata"]["labels"]["dagster/run-id"] == result.run_id
        worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
        assert worker["containers"][0]["image"] == IMAGE
        assert {"name": "storage", "persistentVolumeClaim": {"claimName": "ads-ranking-data"}} \
            in worker["volumes"]
    versions = [m.metadata["model_version"].value for m in result.asset_materializations_for_node("trained_model")]
    assert ModelRegistry(StorageLayout(home), TINY.model_name).versions() == sorted(versions)
    assert any("day 2/2: 2026-03-11" in m for m in by_step["trained_model"])
    assert any("xgboost baseline: auc=" in m for m in by_step["model_evaluation"])
    assert not any("xgboost baseline: auc=" in m or "day 2/2: 2026-03-11" in m for m in by_step["batch_scores"])
    # each submitter printed what KubeRay's prints around the driver log: none of it (the wait
    # echo, the cli.py banner and status lines) reached the run as driver output
    assert not any("cli.py:" in m or "Waiting for Ray Dashboard" in m for m in messages)
    assert not any("unexpected message received after closed" in m for m in messages)
