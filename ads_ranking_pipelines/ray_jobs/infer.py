"""Ray job: score each day's impressions with that day's champion (Ray Data ``map_batches``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ads_ranking_pipelines.contracts.ranges import InferRangeSpec
from ads_ranking_pipelines.ray_jobs.common import DayReporter, run_entrypoint
from ads_ranking_pipelines.training.reporting import Reporter


def body(spec: InferRangeSpec, reporter: Reporter) -> Iterator[dict[str, Any]]:
    from ads_ranking_pipelines.training.inference import score_day

    for i, d in enumerate(spec.days):
        yield {"day": d.day.isoformat(), **score_day(spec.day_spec(i), DayReporter(reporter, d.day))}


if __name__ == "__main__":
    run_entrypoint(InferRangeSpec, body)
