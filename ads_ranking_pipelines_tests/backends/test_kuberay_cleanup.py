"""Issue 6 item 6, against the fake whose toy operator models KubeRay v1.7.0's deletion
mechanisms: what the operator removes by itself in each mode, what it leaves, and the
garbage collector removing the rest without touching anything that is not ours.

A session that is entered but never left stands for a Dagster run whose process died.
"""

from __future__ import annotations

import datetime as dt

from ads_ranking_pipelines.backends.gc import collect_kuberay
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines_tests.backends.kuberay_helpers import (
    JOB,
    NS,
    REQUEST,
    assert_nothing_left,
    make_backend,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, Scenario

LATER = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
FOREIGN = {"apiVersion": "ray.io/v1", "kind": "RayJob",
           "metadata": {"name": "someone-elses", "namespace": NS, "labels": {"team": "other"}},
           "spec": {"entrypoint": "python x.py"},
           "status": {"jobDeploymentStatus": "Complete", "endTime": "2026-01-01T00:00:00Z"}}


ABANDONED: list = []  # sessions never left: their runs' processes "died"


def run_and_abandon(fake: FakeKubeApiServer, deletion: str) -> str:
    """Submit a job and leave the session open (the run's process 'died'); the job ends."""
    backend = make_backend(fake, rayjob_deletion=deletion)
    manager = backend.session(REQUEST)
    ABANDONED.append(manager)
    session = manager.__enter__()
    job_id = session.submit(JOB)
    list(session.logs(job_id, follow=True))
    return job_id


def test_deletion_rules_remove_the_cluster_then_the_rayjob(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.time_scale = 0.002  # 600 s of TTL last 1.2 s
    job_id = run_and_abandon(fake_apiserver, "rules")
    assert fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYCLUSTERS) == [], 5)
    assert fake_apiserver.names(RAYJOBS) == [job_id]  # DeleteSelf waits for its TTL
    assert fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYJOBS) == [], 10)
    assert_nothing_left(fake_apiserver)
    ABANDONED.clear()


def test_shutdown_mode_leaks_the_rayjob_and_the_collector_removes_it(
        fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.time_scale = 0.002
    fake_apiserver.seed(RAYJOBS, FOREIGN)
    job_id = run_and_abandon(fake_apiserver, "shutdown")
    # handleShutdownAfterJobFinishes: after the TTL only the RayCluster goes...
    assert fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYCLUSTERS) == [], 10)
    assert fake_apiserver.names(RAYJOBS) == sorted([job_id, "someone-elses"])
    assert any(p.startswith(job_id) for p in fake_apiserver.pod_names())  # the submitter stays
    # ...so the collector removes the RayJob (its submitter goes with it), and only ours.
    backend = make_backend(fake_apiserver)
    dry = collect_kuberay(backend, NS, lambda run_id: None, grace_s=600, ttl_s=1200,
                          now=LATER, dry_run=True)
    assert [g.name for g in dry] == [job_id] and fake_apiserver.names(RAYJOBS) != ["someone-elses"]
    found = collect_kuberay(backend, NS, lambda run_id: None, grace_s=600, ttl_s=1200, now=LATER)
    assert [g.name for g in found] == [job_id]
    assert fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYJOBS) == ["someone-elses"], 5)
    assert_nothing_left(fake_apiserver)
    ABANDONED.clear()


def test_operator_flag_deletes_the_rayjob_in_shutdown_mode(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.time_scale = 0.002
    fake_apiserver.delete_rayjob_cr_after_job_finishes = True
    run_and_abandon(fake_apiserver, "shutdown")
    assert fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYJOBS) == [], 10)
    assert_nothing_left(fake_apiserver)
    ABANDONED.clear()


def test_collector_follows_the_dagster_run(fake_apiserver: FakeKubeApiServer) -> None:
    from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

    fake_apiserver.scenario = Scenario(outcome="hang")
    backend = make_backend(fake_apiserver)
    for name, run_id in (("of-done-run", "run-done"), ("of-live-run", "run-live")):
        resolved = backend.resolve(REQUEST.model_copy(update={"name": name}))
        backend.client.create(RAYJOBS, NS, build_rayjob(resolved, entrypoint="true",
                                                        submission_id=name, run_id=run_id))
    status = {"run-done": "finished", "run-live": "running"}.get
    found = collect_kuberay(backend, NS, status, grace_s=600, ttl_s=1200)
    assert [g.name for g in found] == ["of-done-run"]
    assert "run-done has finished" in found[0].reason
    assert fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYJOBS) == ["of-live-run"], 5)
    backend.stop_job(NS, "of-live-run")
    assert_nothing_left(fake_apiserver)


def test_gate_off_refuses_deletion_rules_visibly(fake_apiserver: FakeKubeApiServer) -> None:
    """An operator with RayJobDeletionPolicy off marks a rules-mode RayJob ValidationFailed:
    the backend fails at once with the operator's words (then use rayjob_deletion=shutdown)."""
    import pytest

    from ads_ranking_pipelines.backends.base import BackendError

    fake_apiserver.feature_gates["RayJobDeletionPolicy"] = False
    backend = make_backend(fake_apiserver)
    with pytest.raises(BackendError, match="RayJobDeletionPolicy feature gate must be enabled"):
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    assert_nothing_left(fake_apiserver)
