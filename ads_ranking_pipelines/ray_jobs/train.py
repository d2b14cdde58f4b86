"""Ray job: train the run's days in date order, one model version per day (TorchRec DLRM on Ray Train).

All days train on ONE Ray Train worker group (``training.range_trainer``): the window slides
(each later day reads its new day only) and, with warm start, a day starts from the day
before's best weights the workers kept in memory. Each version is written complete (manifest
last) as its day ends; one result per day goes back as it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ads_ranking_pipelines.contracts.ranges import TrainRangeSpec
from ads_ranking_pipelines.ray_jobs.common import DayReporter, run_entrypoint
from ads_ranking_pipelines.training.reporting import Reporter


def body(spec: TrainRangeSpec, reporter: Reporter) -> Iterator[dict[str, Any]]:
    from ads_ranking_pipelines.training.range_trainer import train_range

    day_reporters = [DayReporter(reporter, d.day) for d in spec.days]
    for i, d in enumerate(spec.days):
        one = spec.day_spec(i)
        reporter.log(f"day {i + 1}/{len(spec.days)}: {d.day} -> {d.model_version}"
                     + (f" (warm start from {one.init_model_uri})" if one.init_model_uri else ""))
    for i, result in train_range(spec, day_reporters.__getitem__):
        one = spec.day_spec(i)
        yield {"day": spec.days[i].day.isoformat(), "warm_start_from": one.init_model_uri, **result.to_dict()}


if __name__ == "__main__":
    run_entrypoint(TrainRangeSpec, body)
