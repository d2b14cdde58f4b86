"""Shared by the KubeRayBackend tests (``test_kuberay_backend_*.py``), which run against the
fake API server.

Every test that creates something ends by asserting that the fake holds no RayJob or
RayCluster (nor pod) that the test's code made: nothing is left behind, whatever happened.
"""

from __future__ import annotations

from ads_ranking_pipelines.backends.base import JobSpec
from ads_ranking_pipelines.backends.kuberay import KubeRayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, client_for

NS = "ads-ranking"
CATALOG = load_catalog()
RUN_ID = "5f0c3d1e-8a2b-4c6d-9e7f-0123456789ab"
PIPES_VALUE = "eyJwYXRoIjogIi90bXAvcGlwZXMtY29udGV4dCJ9-not-secret-but-not-for-logs"
JOB = JobSpec(submission_id="train-2026-11-29", entrypoint="python -m ads_ranking_pipelines.ray_jobs.train",
              env_vars={"DAGSTER_PIPES_CONTEXT": PIPES_VALUE, "OMP_NUM_THREADS": "1"})
REQUEST = ClusterRequest(name="arp-5f0c3d1e", owner="dagster", workers=1)


def make_backend(fake: FakeKubeApiServer, **kwargs) -> KubeRayBackend:
    kwargs.setdefault("poll_interval_s", 0.02)
    kwargs.setdefault("ready_timeout_s", 10.0)
    kwargs.setdefault("teardown_timeout_s", 10.0)
    return KubeRayBackend(client_for(fake), CATALOG, **kwargs)


def assert_nothing_left(fake: FakeKubeApiServer) -> None:
    assert fake.leftovers() == []
    assert fake.pod_names() == []
    assert not fake.rejected, fake.rejected
