"""The H100 Kueue pool of ``examples/pool-catalogs/gke-kueue.yaml`` on the fake API server, as the
queued-view tests (CLI, X-Ray) use it: one 8-GPU cluster takes the quota, the next waits."""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import (
    KueueQueue,
)

NS = "ads-ranking"
LOCAL_QUEUE = "ads-ranking-h100"
GPU_IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0-gpu"
INSUFFICIENT = "insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed"


def one_cluster_of_quota(fake: Any) -> None:
    """The pool's LocalQueue holds 8 GPUs: one 1 x 8-GPU cluster at a time."""
    fake.kueue_queues = {LOCAL_QUEUE: KueueQueue(quota={"nvidia.com/gpu": 8})}


def h100_request(name: str, owner: str) -> ClusterRequest:
    return ClusterRequest(name=name, owner=owner, gpu_pool="h100-80gb", workers=1, gpus_per_worker=8,
                          image=GPU_IMAGE)


def queued_run_job(backend: Any, fake: Any) -> str:
    """A Dagster run's RayJob on the pool (what a session creates), once Kueue has it waiting
    for quota with no cluster yet: its name."""
    from ads_ranking_pipelines.backends.kuberay import calls
    from ads_ranking_pipelines.backends.kuberay.client import RAYJOBS
    from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

    manifest = build_rayjob(backend.resolve(h100_request("run-q", "dagster")), entrypoint="true",
                            submission_id="q-1")
    job = calls.create(backend.client, RAYJOBS, NS, manifest, what="RayJob")["metadata"]["name"]
    assert fake.wait_for(lambda: INSUFFICIENT in backend.job_status(NS, job).message, 20)
    return job
