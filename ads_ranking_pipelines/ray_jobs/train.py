"""Ray job: train the run's days in date order, one model version per day (TorchRec DLRM on Ray Train).

Each version is written complete (manifest last) before the next day starts; with warm start a
day starts from the version the day before just wrote. One result per day goes back as it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ads_ranking_pipelines.contracts.ranges import TrainRangeSpec
from ads_ranking_pipelines.ray_jobs.common import DayReporter, run_entrypoint
from ads_ranking_pipelines.training.reporting import Reporter


def body(spec: TrainRangeSpec, reporter: Reporter) -> Iterator[dict[str, Any]]:
    from ads_ranking_pipelines.training.trainer import train

    for i, d in enumerate(spec.days):
        one = spec.day_spec(i)
        reporter.log(f"day {i + 1}/{len(spec.days)}: {d.day} -> {d.model_version}"
                     + (f" (warm start from {one.init_model_uri})" if one.init_model_uri else ""))
        result = train(one, DayReporter(reporter, d.day)).to_dict()
        yield {"day": d.day.isoformat(), "warm_start_from": one.init_model_uri, **result}


if __name__ == "__main__":
    run_entrypoint(TrainRangeSpec, body)
