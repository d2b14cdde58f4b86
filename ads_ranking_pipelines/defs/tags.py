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
