"""Ray job: score a day's impressions with a model version (Ray Data ``map_batches``)."""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines.ray_jobs.common import run_entrypoint
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.contracts.jobs import InferenceJobSpec


def body(spec: InferenceJobSpec, reporter: Reporter) -> dict[str, Any]:
    from ads_ranking_pipelines.training.inference import score_day

    return score_day(spec, reporter)


if __name__ == "__main__":
    run_entrypoint(InferenceJobSpec, body)
