"""Ray job: evaluate each day's version on its held-out day, walking the champion chain.

Day d's version is compared with the champion of that moment: the champion before the run, or
the last earlier day of the run whose gates all passed (``contracts.gates.gate_step``, the same
decision Dagster makes again before it promotes anything). Nothing is written to the registry here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ads_ranking_pipelines.contracts.gates import gate_step
from ads_ranking_pipelines.contracts.ranges import EvalRangeSpec
from ads_ranking_pipelines.ray_jobs.common import DayReporter, run_entrypoint
from ads_ranking_pipelines.training.reporting import Reporter


def body(spec: EvalRangeSpec, reporter: Reporter) -> Iterator[dict[str, Any]]:
    from ads_ranking_pipelines.training.evaluate import evaluate_version

    champion = spec.champion_version
    for i, d in enumerate(spec.days):
        metrics = evaluate_version(spec.day_spec(i, champion), DayReporter(reporter, d.eval_day))
        step = gate_step(d.eval_day.isoformat(), d.model_version, metrics, spec.gates, champion)
        reporter.log(f"{d.eval_day} {d.model_version}: gates {'passed' if step.passed else 'FAILED'}; "
                     f"champion for the days after: {step.champion_after or 'none'}")
        yield {"day": d.eval_day.isoformat(), "metrics": metrics, "step": step.to_dict()}
        champion = step.champion_after


if __name__ == "__main__":
    run_entrypoint(EvalRangeSpec, body)
