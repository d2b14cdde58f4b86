"""Ray job: train one model version (TorchRec-sharded DLRM on Ray Train)."""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines.ray_jobs.common import run_entrypoint
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec


def body(spec: TrainJobSpec, reporter: Reporter) -> dict[str, Any]:
    from ads_ranking_pipelines.training.trainer import train

    return train(spec, reporter).to_dict()


if __name__ == "__main__":
    run_entrypoint(TrainJobSpec, body)
