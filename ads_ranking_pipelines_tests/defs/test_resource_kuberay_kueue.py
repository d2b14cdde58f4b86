"""The Dagster resource on a Kueue pool, against the fake API server and its toy Kueue: a run
whose ClusterQueue quota is taken waits QUEUED with Kueue's words in the run's log, then runs
once the quota frees; past the queue-wait limit the run fails with those words; nothing is
left behind."""

# No ``from __future__ import annotations``: Dagster reads the asset's context annotation.
from typing import Any

import pytest

from ads_ranking_pipelines.backends.kuberay.client import RAYJOBS, KubeRayClient
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.defs import test_resource_kuberay as base
from ads_ranking_pipelines_tests.kuberay.cases import KUEUE_CATALOG
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import KueueQueue

pytestmark = pytest.mark.slow  # real processes (README: Tests)

H100 = TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, num_workers=2)  # 16 GPUs
QUEUE = "ads-ranking-h100"
WORDS = ("couldn't assign flavors to pod set workers: insufficient unused quota for "
         "nvidia.com/gpu in flavor default-flavor, 16 more needed")


def kueue_resource(fake: FakeKubeApiServer, tmp_path, **fields) -> KubeRayResource:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake, context="fake")
    return KubeRayResource(kube_config_file=kubeconfig, kube_context="fake", namespace=base.NS,
                           storage_home="gs://ads-ranking-test/home", image=base.IMAGE,
                           pool_catalog=str(KUEUE_CATALOG), **fields)


def start_blocker(fake: FakeKubeApiServer) -> str:
    """Another team's RayJob on the same LocalQueue, admitted first, holding all 16 GPUs."""
    request = ClusterRequest(name="other-team", owner="other", gpu_pool="h100-80gb", workers=2,
                             gpus_per_worker=8, image=base.IMAGE, namespace=base.NS)
    manifest = build_rayjob(resolve_request(request, load_catalog(KUEUE_CATALOG)),
                            entrypoint="python -V", submission_id="other-team")
    KubeRayClient.for_host(fake.url).create(RAYJOBS, base.NS, manifest)
    assert fake.wait_for(lambda: "Running" in fake.deployment_history.get("other-team", []), 30)
    return "other-team"


def materialize(fake, tmp_path, resource) -> tuple[Any, list[str]]:
    import dagster as dg

    seen: dict[str, Any] = {}
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([base.train_asset(fake, H100, seen)], instance=instance,
                            resources={"ray_cluster": resource}, raise_on_error=False)
    return result, [entry.user_message for entry in instance.all_logs(result.run_id)]


def test_queued_run_logs_kueues_words_then_runs_when_the_quota_frees(
        fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    fake_apiserver.kueue_queues = {QUEUE: KueueQueue(quota={"nvidia.com/gpu": 16})}
    fake_apiserver.scenario = Scenario(log_lines=base.DRIVER_LOG)
    fake_apiserver.scenarios["other-team"] = Scenario(hold_running_s=4.0)
    blocker = start_blocker(fake_apiserver)
    result, messages = materialize(fake_apiserver, tmp_path, kueue_resource(fake_apiserver, tmp_path))
    assert result.success, messages
    queued = [m for m in messages if m.startswith("[kueue]") and "QUEUED" in m]
    assert queued and WORDS in queued[0] and f"LocalQueue {QUEUE}" in queued[0], messages
    assert any(m.startswith("[kueue]") and "admitted by Kueue after" in m for m in messages)
    assert base.PLAIN_LINE in messages
    KubeRayClient.for_host(fake_apiserver.url).delete(RAYJOBS, base.NS, blocker)
    assert fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYJOBS) == [], 10)
    base.assert_nothing_left(fake_apiserver)
    assert fake_apiserver.names("workloads") == []


def test_queue_wait_limit_fails_the_run_with_kueues_words(
        fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    fake_apiserver.kueue_queues = {QUEUE: KueueQueue(quota={"nvidia.com/gpu": 8})}  # never fits
    resource = kueue_resource(fake_apiserver, tmp_path, queue_wait_limit_s=3.0)
    result, messages = materialize(fake_apiserver, tmp_path, resource)
    assert not result.success
    failure = result.failure_data_for_node("kuberay_train").error.to_string()
    assert any(m.startswith("[kueue]") and "QUEUED" in m for m in messages), messages
    assert "queue-wait limit of 3s" in failure
    assert ("couldn't assign flavors to pod set workers: insufficient unused quota for "
            "nvidia.com/gpu in flavor default-flavor, 8 more needed") in failure
    base.assert_nothing_left(fake_apiserver)
    assert fake_apiserver.names("workloads") == []
