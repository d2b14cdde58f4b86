"""Links to the Dagster run that made a cluster: from a KubeRay label, or (local clusters
named ``arp-<8 hex>`` by the provisioning resource) looked up in a real Dagster instance."""

from __future__ import annotations

from dagster import DagsterInstance, DagsterRun

from ads_ranking_pipelines.xray.dagster_links import DagsterLinks
from ads_ranking_pipelines.xray.rows import ClusterRow

RUN_ID = "3c9e1f2a-5b6d-4e7f-8a9b-0c1d2e3f4a5b"


def row(name: str, backend: str = "local", owner: str = "dagster", run_id: str | None = None):
    return ClusterRow(name=name, backend=backend, owner=owner, team="t", pool="local",
                      gpu_type="none", workers_ready=1, workers_desired=1, gpus_per_worker=0,
                      status="running", created_at=None, dagster_run_id=run_id)


def test_links_from_labels_and_from_the_instance(tmp_path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    with DagsterInstance.from_config(str(home)) as instance:
        instance.add_run(DagsterRun(job_name="daily_retraining", run_id=RUN_ID))
    links = DagsterLinks("http://dagster:3000", {"DAGSTER_HOME": str(home)})

    kube = row("alice-l4", backend="kuberay", owner="alice", run_id=RUN_ID)
    links.annotate(kube)
    assert kube.dagster_run_url == f"http://dagster:3000/runs/{RUN_ID}"

    local = row(f"arp-{RUN_ID[:8]}")
    links.annotate(local)
    assert (local.dagster_run_id, local.dagster_run_url) == (RUN_ID, f"http://dagster:3000/runs/{RUN_ID}")

    for other in (row("arp-00000000"), row(f"arp-{RUN_ID[:8]}", owner="alice"), row("dev")):
        links.annotate(other)
        assert other.dagster_run_url is None, other.name
    no_home = row(f"arp-{RUN_ID[:8]}")
    DagsterLinks("http://dagster:3000", {}).annotate(no_home)
    assert no_home.dagster_run_url is None
