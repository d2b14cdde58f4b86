"""Run tags every run carries: the GPU pool (the run queue's key) and the model name.

The instance's run queue limits runs per ``ads-ranking/gpu-pool`` value (``dagster.yaml``,
generated from the pool catalog); the Helm chart documents the same key. Schedules, the CLI
and backfills set the tags from the run's config; the job's default tags cover a launchpad
run with the default config, and ``trained_model`` refuses a run whose config names another
pool or model than its tags (it would be queued under the wrong pool).
"""

from __future__ import annotations

from typing import Any

GPU_POOL_TAG = "ads-ranking/gpu-pool"
MODEL_TAG = "ads-ranking/model"
TEAM_TAG = "team"


def run_tags(model_name: str, gpu_pool: str) -> dict[str, str]:
    return {GPU_POOL_TAG: gpu_pool, MODEL_TAG: model_name, TEAM_TAG: "ads-ranking"}


def tags_mismatch(tags: dict[str, Any], model_name: str, gpu_pool: str) -> str | None:
    """Why the run's tags disagree with its config (None when they agree)."""
    problems = []
    for key, want in ((GPU_POOL_TAG, gpu_pool), (MODEL_TAG, model_name)):
        have = tags.get(key)
        if have is not None and have != want:
            problems.append(f"run tag {key}={have!r} but the config says {want!r}")
    if not problems:
        return None
    return ("; ".join(problems) + f": set the run tags to {GPU_POOL_TAG}={gpu_pool!r}, {MODEL_TAG}={model_name!r} "
            "so the run is queued under the pool it uses")


# The process that drives a run, as host/pid/start-time: set by the ray_cluster resource when
# the run's process starts, read by the GC, the sensor and the run launcher's health check.
CONTROLLER_TAG = "ads-ranking/controller"


def controller_tag() -> dict[str, str]:
    import os
    import socket

    from ads_ranking_pipelines.backends.processes import process_start

    pid = os.getpid()
    return {CONTROLLER_TAG: f"{socket.gethostname()}/{pid}/{process_start(pid)}"}


def controller_gone(tags: dict[str, Any]) -> str | None:
    """Why the process named by a run's controller tag is known to be dead (None when it lives,
    has no tag, or runs on another host, where this process cannot tell)."""
    import socket

    from ads_ranking_pipelines.backends.processes import process_alive

    host, _, rest = str(tags.get(CONTROLLER_TAG) or "").partition("/")
    pid, _, start = rest.partition("/")
    if not host or host != socket.gethostname() or not pid.isdigit():
        return None
    if process_alive(int(pid), start):
        return None
    return f"the process that ran it (pid {pid} on {host}) is gone"
