"""The Dagster instance settings this project ships (``dagster.yaml``), generated from the pool catalog.

* a run queue (``QueuedRunCoordinator``, as ``defs.run_coordinator.PoolTaggingRunCoordinator``,
  which first tags an untagged training run, e.g. a backfill from the UI's asset graph, with
  the pool its config implies): at most ``max_concurrent_runs`` runs overall and, per GPU pool,
  the pool's ``max_concurrent_runs`` runs tagged ``ads-ranking/gpu-pool: <pool>`` (a second
  run on a pool at its limit waits; a run on another pool starts at once); a Kueue pool with
  ``max_concurrent_runs`` unset gets no tag limit (Kueue's ClusterQueue quota admits its jobs);
* run monitoring on, with a run launcher whose health check sees a dead run process
  (``defs.run_launcher.ProcessCheckingRunLauncher``; Dagster's default launcher cannot tell):
  a run whose process died (killed, out of memory) is marked failed within one poll and frees
  its queue slot instead of staying STARTED;
* run retries on for infrastructure failures (a run that failed outside its steps), at most
  ``MAX_RUN_RETRIES``; not for a failed step (gates, bad config);
* telemetry off.

``make run`` / ``make ui`` write it into ``DAGSTER_HOME`` (``ads-ranking instance dagster-yaml``);
the repo's ``dagster.yaml`` is the same for the shipped catalog (a test keeps them equal).
"""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines.config.pools import PoolCatalog

GPU_POOL_TAG = "ads-ranking/gpu-pool"
MAX_RUN_RETRIES = 2
HEADER = ("# Generated from the GPU pool catalog by `ads-ranking instance dagster-yaml`; do not edit by hand.\n"
          "# Regenerate after changing a pool's max_concurrent_runs (make run / make ui do it for DAGSTER_HOME).\n")


def instance_settings(catalog: PoolCatalog, max_concurrent_runs: int = 10,
                      run_start_timeout_s: int = 180, poll_interval_s: int = 15) -> dict[str, Any]:
    limits = [{"key": GPU_POOL_TAG, "value": pool.name, "limit": pool.max_concurrent_runs}
              for pool in sorted(catalog, key=lambda p: p.name)
              if pool.max_concurrent_runs is not None]  # a Kueue pool may leave it to Kueue
    return {
        "run_coordinator": {       # Dagster's QueuedRunCoordinator + pool tags on untagged training runs
            "module": "ads_ranking_pipelines.defs.run_coordinator",
            "class": "PoolTaggingRunCoordinator",
            "config": {"max_concurrent_runs": max_concurrent_runs, "tag_concurrency_limits": limits,
                       "dequeue_interval_seconds": 2},
        },
        "run_launcher": {          # DefaultRunLauncher + a health check for run monitoring
            "module": "ads_ranking_pipelines.defs.run_launcher",
            "class": "ProcessCheckingRunLauncher",
        },
        "run_monitoring": {
            "enabled": True,
            "start_timeout_seconds": run_start_timeout_s,
            "poll_interval_seconds": poll_interval_s,
            "max_resume_run_attempts": 0,
        },
        # a run that failed outside its steps (its process killed, a lost pod or node) is retried,
        # twice at most; a failed step (a failed gate, bad config, a failing job) is not. The retry
        # re-executes from the failure and training resumes by content (planning/resume.py).
        "run_retries": {"enabled": True, "max_retries": MAX_RUN_RETRIES, "retry_on_asset_or_op_failure": False},
        "telemetry": {"enabled": False},
    }


def render_yaml(settings: dict[str, Any]) -> str:
    import yaml

    return HEADER + yaml.safe_dump(settings, sort_keys=False)
