"""A worker node dies mid-training; the local backend replaces it and the run resumes."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
import threading
import time

import pytest
import requests

from ads_ranking_pipelines.backends.base import JobSpec, JobState
from ads_ranking_pipelines.backends.local import LocalRayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.events.layout import ensure_synthetic_days
from ads_ranking_pipelines.ray_jobs.common import SPEC_ENV
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.contracts.ranges import TrainDay, TrainRangeSpec
from ads_ranking_pipelines_tests.processes import wait_no_processes

DAYS = (dt.date(2026, 2, 1), dt.date(2026, 2, 2))


@pytest.mark.ray
def test_killed_worker_node_is_replaced_and_training_resumes(ads_home, tmp_path):
    source = SourceConfig(uri=str(tmp_path / "events"),
                          synthetic=SyntheticSpec(rows_per_day=6000, num_users=2000, num_ads=500))
    ensure_synthetic_days(source, DAYS)
    params = TrainingParams(num_workers=2, epochs=5, batch_size=128, hash_buckets=2000, embedding_dim=8,
                            dense_arch=(16, 8), over_arch=(16,), max_failures=2)
    storage = tmp_path / "ray_results"
    spec = TrainRangeSpec(params=params, source=source, ray_storage_uri=str(storage), days=(TrainDay(
        day=DAYS[-1] + dt.timedelta(days=1), train_days=DAYS, model_version="fault-v1",
        model_uri=str(tmp_path / "model"), run_name="fault"),))
    job = JobSpec(submission_id="train-fault", env_vars={SPEC_ENV: spec.model_dump_json()},
                  entrypoint=f"{sys.executable} -m ads_ranking_pipelines.ray_jobs.train")
    backend = LocalRayBackend(ads_home / "clusters", single_node=False)          # worker nodes, as pods
    lines: list[str] = []

    with backend.session(ClusterRequest(name="fault", workers=2)) as session:
        cluster = session.cluster
        job_id = session.submit(job)
        follower = threading.Thread(target=lambda: lines.extend(session.logs(job_id)), daemon=True)
        follower.start()

        # wait for the first epoch's checkpoint, then kill a whole worker node (its process group)
        deadline = time.monotonic() + 240
        while not any(n.startswith("checkpoint_") for n in fs.list_dir(str(storage / "fault"))):
            assert time.monotonic() < deadline, "no checkpoint within 240 s:\n" + "\n".join(lines[-30:])
            assert not session.status(job_id).state.terminal, "\n".join(lines[-30:])
            time.sleep(0.2)
        victim = cluster.live_worker_pids()[0]
        os.killpg(victim, signal.SIGKILL)

        deadline = time.monotonic() + 600   # a hang guard: ~1 min on a quiet 2-core machine
        while not (status := session.status(job_id)).state.terminal:
            assert time.monotonic() < deadline, "job did not finish:\n" + "\n".join(lines[-30:])
            time.sleep(1)
        follower.join(timeout=60)
        replaced = cluster.replaced_workers
        actor_classes = _actor_classes(cluster)
        temp_dir = cluster.state.temp_dir

    assert status.state == JobState.SUCCEEDED, status.message + "\n" + "\n".join(lines[-40:])
    assert victim not in cluster.state.worker_pids and replaced >= 1
    result = json.loads(next(line for line in reversed(lines) if line.startswith('{"kind": "day_result"')))["values"]
    assert result["epochs"] == 5
    assert result["worker_restarts"] >= 1, "training did not notice the lost node"
    assert fs.exists(str(tmp_path / "model" / "manifest.json"))
    assert wait_no_processes(temp_dir) == []
    # no node of a local cluster is ever drained: Ray Train's preemption watcher is not started
    assert "TrainController" in actor_classes and "PreemptionWatcher" not in actor_classes, actor_classes


def _actor_classes(cluster) -> set[str]:
    """Class names of every actor the cluster ran (dead ones too), from the state API."""
    r = requests.get(f"{cluster.state.dashboard_url}/api/v0/actors", params={"detail": "false", "limit": 10000},
                     headers=cluster.auth_headers(), timeout=10)
    r.raise_for_status()
    return {a.get("class_name") for a in r.json()["data"]["result"]["result"]}
