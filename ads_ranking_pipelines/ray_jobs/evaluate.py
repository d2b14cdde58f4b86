"""Ray job: evaluate each day's version on its held-out day, walking the champion chain.

Day d's version is compared with the champion of that moment: the champion before the run, or
the last earlier day of the run whose version was promoted (``contracts.gates.gate_step``, the
same decision Dagster makes again before it promotes anything) — or, when that champion trained
on day d, the newest earlier champion that did not. Nothing is written to the registry here.
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

    champion = spec.champion
    for i, d in enumerate(spec.days):
        metrics = evaluate_version(spec.day_spec(i, champion), DayReporter(reporter, d.eval_day))
        if champion is not None and spec.comparison(i, champion) is None and champion.version != d.model_version:
            metrics["no_champion_reason"] = (f"champion {champion.version} trained on {d.eval_day} (its window ends "
                                             f"{champion.trained_through}) and no earlier champion trained before it")
        step = gate_step(d.eval_day.isoformat(), d.model_version, max(d.train_days), metrics, spec.gates, champion)
        reporter.log(f"{d.eval_day} {d.model_version}: gates {'passed' if step.passed else 'FAILED'}"
                     f"{'; ' + step.held_back if step.held_back else ''}; "
                     f"champion for the days after: {step.champion_after or 'none'}")
        yield {"day": d.eval_day.isoformat(), "metrics": metrics, "step": step.to_dict()}
        champion = d.as_champion() if step.promotes else champion

if __name__ == "__main__":
    run_entrypoint(EvalRangeSpec, body)
