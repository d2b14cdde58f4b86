"""A backfill's training run on a Kueue pool is preempted by higher-priority work, and resumes.

Against the fake API server with real Ray (``Scenario(execute=True)``: each RayJob's cluster is
a real local Ray cluster, its submitter really runs the training job) and its toy Kueue, on a
CPU pool whose ClusterQueue quota fits one cluster. While the backfill trains (a checkpoint
exists) a higher-priority RayJob is created: Kueue evicts the backfill's Workload, its RayJob
is suspended (KubeRay deletes the cluster; the Ray job ends with it), the high-priority job
runs and ends, Kueue readmits the backfill, KubeRay makes a new cluster and submits the same
job again, and Ray Train restores the run (same ``RunConfig(name, storage_path)``) from its
last checkpoint on the shared volume. The Dagster run does not fail: its log tells the eviction
in Kueue's words, the readmission and the resume; the epochs trained in all add up to the
budget (it did not start over); nothing is left behind.
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

from ads_ranking_pipelines.backends.kuberay.client import RAYJOBS, KubeRayClient
from ads_ranking_pipelines.kuberay.labels import SUBMISSION_ID_LABEL
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.definitions import event_source_config
from ads_ranking_pipelines.defs.assets import trained_model
from ads_ranking_pipelines.defs.jobs import run_config
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.test_resource_kuberay import assert_nothing_left
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import KueueQueue, pod_sets

NS = "ads-ranking"
DAY = dt.date(2026, 3, 10)
POOL, QUEUE = "cpu-kueue", "team-a-cpu"
IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0"
EPOCHS = 40
TINY = TrainingParams(gpu_pool=POOL, gpus_per_worker=0, dataset_window_days=2, num_workers=1,
                      epochs=EPOCHS, batch_size=256, hash_buckets=1000, embedding_dim=8,
                      dense_arch=(16, 8), over_arch=(16,), early_stopping_patience=0)
SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=2000, num_users=1000, num_ads=200))
URGENT = "urgent-run"


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
    """Ray Train's epoch checkpoints (``checkpoint_<time>`` directories) of the run."""
    return [p for p in (home / "ray_results").glob("*/checkpoint_2*") if p.is_dir()]


@pytest.mark.ray
@pytest.mark.integration
def test_preempted_backfill_is_readmitted_and_resumes_from_its_checkpoint(
        fake_apiserver: FakeKubeApiServer, ads_home, tmp_path) -> None:
    fake = fake_apiserver
    fake.scenario = Scenario(execute=True)
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
    out: dict = {}

    def materialize() -> None:
        out["result"] = dg.materialize(
            [trained_model], partition_key=DAY.isoformat(), instance=instance,
            run_config=run_config(TINY, event_source_config(SOURCE)),
            tags={"dagster/backfill": "preempt-test"}, raise_on_error=False,
            resources={"storage": StorageResource(home=home), "event_source": EventSourceResource(),
                       "ray_cluster": resource})

    started = time.monotonic()
    run = threading.Thread(target=materialize, daemon=True)
    run.start()
    assert fake.wait_for(lambda: not run.is_alive() or (_driver_rayjob(fake) is not None and
                                                        _checkpoints(ads_home)), 400), "no checkpoint"
    assert run.is_alive(), out
    backfill = _driver_rayjob(fake)
    client = KubeRayClient.for_host(fake.url)
    client.create(RAYJOBS, NS, manifest)
    run.join(600)
    took = time.monotonic() - started
    assert not run.is_alive(), "the run did not end"
    result = out["result"]
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert result.success, [m for m in messages if "error" in m.lower() or "fail" in m.lower()]
    print(f"kueue preemption: backfill trained, evicted, readmitted and resumed in {took:.1f}s")

    # Kueue evicted the backfill for the urgent run, then readmitted it
    assert len(queue.evictions) == 1 and queue.evictions[0].startswith(f"rayjob-{backfill}-")
    history = fake.deployment_history[backfill]
    assert history[history.index("Running"):] == ["Running", "Suspending", "Suspended", "",
                                                  "Initializing", "Running", "Complete"], history
    assert fake.deployment_history[URGENT][-1] == "Complete"
    evicted = [m for m in messages if m.startswith(f"[kueue] RayJob {NS}/{backfill} evicted by "
                                                   "Kueue: Preempted: Preempted to accommodate")]
    assert evicted and "waiting to be readmitted" in evicted[0], messages
    readmitted = [m for m in messages if "readmitted by Kueue after" in m]
    assert readmitted and "(it was evicted by Kueue: Preempted: " in readmitted[0], messages
    # the readmitted job resumed from the first attempt's checkpoint and trained the rest only
    resumed = {m for m in messages if re.search(r"\[train\] resumed from .*: \d+ epoch\(s\) done", m)}
    assert len(resumed) == 1, resumed  # one resume (Ray's log monitor may print a worker line twice)
    (resumed,) = resumed
    done = int(re.search(r": (\d+) epoch\(s\) done", resumed)[1])
    assert 1 <= done < EPOCHS, resumed
    (materialization,) = result.asset_materializations_for_node("trained_model")
    meta = {k: v.value for k, v in materialization.metadata.items()}
    assert meta["epochs"] == EPOCHS and meta["resumed_from_epoch"] == done, meta
    # nothing of the new attempt's log was dropped as a replay of the first's
    starts = [m for m in messages if f"training 1 worker(s), at most {EPOCHS} epoch(s)" in m]
    assert len(starts) == 2, messages

    client.delete(RAYJOBS, NS, URGENT)
    assert fake.wait_for(lambda: fake.names(RAYJOBS) == [], 30)
    assert_nothing_left(fake)
    assert fake.names("workloads") == []
    fake.stop()
    temp_dirs = fake.runtime().temp_dirs
    assert len(temp_dirs) == 2  # the first cluster and the readmitted job's new one
    assert [wait_no_processes(d) for d in temp_dirs] == [[], []]
