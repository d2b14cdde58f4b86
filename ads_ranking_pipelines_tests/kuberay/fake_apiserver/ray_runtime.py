"""Real Ray behind the toy operator: what the pods of a RayCluster and a RayJob's submitter
would do, on this machine.

With ``Scenario(execute=True)`` a RayCluster's head and worker pods are a real local Ray
cluster (:class:`LocalRayCluster`, started in the background so the API server keeps
answering), and a RayJob's submitter pod does what KubeRay's submitter command does
(common/job.go ``BuildJobSubmitCommand``): ``ray job submit --no-wait`` of the RayJob's
``entrypoint`` with its ``runtimeEnvYAML`` and ``jobId`` as the submission id, then ``ray job
logs --follow`` - the lines become the pod's log, between the lines the real pod prints around
them (the dashboard wait echoes, ``cli.py``'s submit lines and banner, the final status:
:mod:`.submitter`). The Ray job's status is what the operator
reads from the dashboard (rayjob_controller.go ``GetJobInfo``). The pods share this machine's
disk, as Ray pods share a ReadWriteMany volume mounted at the same path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.submitter_output import opening_lines
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.submitter_output import final_status_lines


@dataclass
class _Cluster:
    thread: threading.Thread
    cluster: Any = None
    error: str | None = None
    keep_logs: bool = False        # a submission to it failed: its Ray logs are kept at stop


@dataclass
class RunningJob:
    """A submitted Ray job followed by a submitter thread."""

    status: str = "PENDING"        # Ray's job status: PENDING, RUNNING, SUCCEEDED, FAILED
    message: str = ""
    drained: bool = False          # the submitter printed the whole log and exited
    thread: threading.Thread | None = field(default=None, repr=False)


class LocalRayRuntime:
    """Local Ray clusters by RayCluster key, and Ray jobs by RayJob key."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.clusters: dict[tuple, _Cluster] = {}
        self.jobs: dict[tuple, RunningJob] = {}
        self.temp_dirs: list[str] = []  # of every cluster started (their processes name them)
        self._stopping: list[threading.Thread] = []   # stops of deleted RayClusters, in flight

    def ensure_cluster(self, key: tuple, workers: int) -> str | None:
        """Start the cluster once; "ready", "starting" or an error text."""
        from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
        from ads_ranking_pipelines.config.cluster import ClusterRequest

        entry = self.clusters.get(key)
        if entry is None:
            entry = _Cluster(threading.Thread(daemon=True, name=f"fake-ray-{key[2]}"))

            def start() -> None:
                try:
                    request = ClusterRequest(name=key[2][:40], owner="fake-kuberay",
                                             workers=max(1, min(workers, 2)))
                    entry.cluster = LocalRayCluster.start(request, self.state_dir)
                    self.temp_dirs.append(entry.cluster.state.temp_dir)
                except Exception as exc:  # surfaces as a failed cluster
                    entry.error = f"{type(exc).__name__}: {exc}"

            entry.thread = threading.Thread(target=start, daemon=True, name=f"fake-ray-{key[2]}")
            self.clusters[key] = entry
            entry.thread.start()
        if entry.error:
            return entry.error
        return "ready" if entry.cluster is not None else "starting"

    def submit(self, job_key: tuple, cluster_key: tuple, spec: dict[str, Any],
               emit: Callable[[str], None], *, address: str, waits: int = 0) -> RunningJob:
        """Submit the RayJob's entrypoint to its cluster and follow its log into ``emit``,
        with what the submitter prints around it (:func:`.submitter_output.opening_lines`, then
        ``_log_job_status``'s lines); ``address`` is the one the pod's commands name."""
        from ads_ranking_pipelines.backends.base import JobSpec
        from ads_ranking_pipelines.backends.ray_job_api import RayJobApi

        cluster = self.clusters[cluster_key].cluster
        env = yaml.safe_load(spec.get("runtimeEnvYAML") or "{}") or {}
        job = JobSpec(submission_id=spec["jobId"], entrypoint=spec["entrypoint"],
                      env_vars={str(k): str(v) for k, v in (env.get("env_vars") or {}).items()})
        running = RunningJob()

        def follow() -> None:
            try:    # the client's constructor already asks the dashboard (for its version)
                api = RayJobApi(cluster.state.dashboard_url, headers=cluster.auth_headers())
                api.submit(job)
                running.status = "RUNNING"
                for line in opening_lines(address, job.submission_id, True, waits):
                    emit(line)
                for line in api.logs(job.submission_id, follow=True):
                    emit(line)
                final = api.status(job.submission_id)
                running.status, running.message = final.state.value, final.message
                for line in final_status_lines(job.submission_id, running.status, running.message):
                    emit(line)
            except Exception as exc:
                entry = self.clusters.get(cluster_key)
                if running.status == "PENDING" and entry is not None:   # never submitted: keep its logs
                    entry.keep_logs = True
                running.status, running.message = "FAILED", f"submitter: {exc}"
            running.drained = True

        running.thread = threading.Thread(target=follow, daemon=True, name=f"submitter-{job_key[2]}")
        self.jobs[job_key] = running
        running.thread.start()
        return running

    def stop_cluster(self, key: tuple) -> None:
        entry = self.clusters.pop(key, None)
        if entry is None:
            return
        entry.thread.join(timeout=300)
        if entry.cluster is not None:
            entry.cluster.stop(keep_logs=entry.keep_logs)   # kept: "Ray node logs of … kept in …"

    def stop_in_background(self, key: tuple) -> None:
        """Stop a deleted RayCluster's Ray without holding up the API server (``stop_all``
        waits for it)."""
        thread = threading.Thread(target=self.stop_cluster, args=(key,), daemon=True,
                                  name=f"fake-ray-stop-{key[2]}")
        self._stopping.append(thread)
        thread.start()

    def stop_all(self) -> None:
        for thread in self._stopping:    # a stop in flight still has the cluster's state file
            thread.join(timeout=300)
        for key in list(self.clusters):
            self.stop_cluster(key)
        for running in self.jobs.values():
            if running.thread is not None:
                running.thread.join(timeout=30)
        try:    # the clusters' state files are gone with them; kept logs keep the dir
            self.state_dir.rmdir()
        except OSError:
            pass
