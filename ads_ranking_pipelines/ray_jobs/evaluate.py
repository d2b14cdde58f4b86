"""Ray job: evaluate a model version on its held-out day (with the XGBoost baseline)."""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines.ray_jobs.common import run_entrypoint
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.contracts.jobs import EvalJobSpec


def body(spec: EvalJobSpec, reporter: Reporter) -> dict[str, Any]:
    from ads_ranking_pipelines.training.evaluate import evaluate_version

    return evaluate_version(spec, reporter)


if __name__ == "__main__":
    run_entrypoint(EvalJobSpec, body)
