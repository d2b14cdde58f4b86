"""The table of requests the golden files and schema tests render."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_ranking_pipelines.config.cluster import ClusterRequest

GPU_IMAGE = "rayproject/ray:2.60.0-py311-gpu"
RUN_ID = "5f0c3d1e-8a2b-4c6d-9e7f-0123456789ab"
CODE_LOCATION = "ads_ranking_pipelines"
KUEUE_CATALOG = Path(__file__).resolve().parents[2] / "examples" / "pool-catalogs" / "gke-kueue.yaml"


@dataclass(frozen=True)
class Case:
    name: str
    request: ClusterRequest
    labels: dict[str, str] = field(default_factory=dict)
    run_id: str | None = None
    code_location: str | None = None
    entrypoint: str = "python -m ads_ranking_pipelines.ray_jobs.train --config /tmp/job.json"
    runtime_env: dict[str, Any] | None = None
    catalog: Path | None = None  # None: the shipped catalog

    def label_kwargs(self) -> dict[str, Any]:
        return {"labels": self.labels, "run_id": self.run_id, "code_location": self.code_location}


CASES = [
    Case(
        name="cpu-local",
        request=ClusterRequest(name="ranker-local", owner="ci"),
    ),
    Case(
        name="l4-single",
        request=ClusterRequest(
            name="ranker-l4", owner="alice", gpu_pool="l4", workers=1, gpus_per_worker=1,
            cpus_per_worker=8, memory_per_worker="32Gi", image=GPU_IMAGE,
        ),
        run_id=RUN_ID,
        code_location=CODE_LOCATION,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "8"}, "working_dir": "/app"},
    ),
    Case(
        name="h100-4x8",
        request=ClusterRequest(
            name="ranker-h100", owner="ads-ranking-oncall", gpu_pool="h100-80gb", workers=4,
            gpus_per_worker=8, cpus_per_worker=176, memory_per_worker="1600Gi", head_cpus=8,
            head_memory="32Gi", image=GPU_IMAGE, active_deadline_seconds=12 * 3600,
        ),
        run_id=RUN_ID,
        code_location=CODE_LOCATION,
    ),
    Case(
        name="custom-labels",
        request=ClusterRequest(
            name="ranker-custom", owner="Jane.Doe@example.com", team="Ads Ranking / Quest",
            gpu_pool="cpu-standard", workers=3, cpus_per_worker=14.5, memory_per_worker="48Gi",
            labels={"cost-center": "ads 1234", "example.com/experiment": "holdout#7"},
            autoscaling=True, auth_secret_name="ranker-ray-token",
        ),
        labels={"app.kubernetes.io/name": "quest-ranker", "tier": "x" * 80},
        run_id="Run With Spaces " + "y" * 70,
        code_location="Ads.Ranking:Pipelines",
    ),
    Case(
        name="h100-kueue-backfill",
        request=ClusterRequest(
            name="ranker-kueue", owner="dagster", gpu_pool="h100-80gb", workers=2,
            gpus_per_worker=8, image=GPU_IMAGE, run_kind="backfill",
        ),
        run_id=RUN_ID,
        code_location=CODE_LOCATION,
        catalog=KUEUE_CATALOG,
    ),
]

SUBMISSION_ID = "ranker-2025-01-01"
