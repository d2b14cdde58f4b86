"""``ads-ranking pipeline run``: the daily_retraining job for one partition, through Dagster."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from pydantic import ValidationError

from ads_ranking_pipelines.cli.common import EXIT_INVALID, EXIT_RUNTIME, fail
from ads_ranking_pipelines.cli.preflight import check_run
from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams

app = typer.Typer(no_args_is_help=True, help="Run the daily retraining pipeline.")


def _source(path: Optional[Path]) -> SourceConfig:
    if path is None:
        return SourceConfig()
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        fail(f"--source {path}: cannot read it ({exc.strerror})", EXIT_INVALID)
    except yaml.YAMLError as exc:
        fail(f"--source {path}: not valid YAML ({exc})", EXIT_INVALID)
    if not isinstance(raw, dict):
        fail(f"--source {path}: expected a mapping with kind, uri, label_column, dense_columns, "
             "sparse_columns", EXIT_INVALID)
    raw = raw.get("source", raw)
    try:
        return SourceConfig.model_validate(raw)
    except ValidationError as exc:
        fail(format_validation_error(exc, SourceConfig, prefix="source."), EXIT_INVALID)


def _params(overrides: dict[str, Any]) -> TrainingParams:
    try:
        return TrainingParams(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        fail(format_validation_error(exc, TrainingParams), EXIT_INVALID)


def _first_failure(result: Any) -> str:
    for event in result.all_events:
        if event.is_step_failure:
            err = event.step_failure_data.error
            user = err.cause if err and err.cause and "Failure" not in err.cls_name else err
            msg = (event.step_failure_data.user_failure_data.description
                   if event.step_failure_data.user_failure_data else None) or (user.message if user else "")
            return f"step {event.step_key} failed: {msg.strip().splitlines()[0] if msg.strip() else 'unknown error'}"
    return "the run failed"


@app.command("run")
def run(
    date: Optional[str] = typer.Option(None, "--date", help="Partition day YYYY-MM-DD (default: yesterday, UTC)."),
    source: Optional[Path] = typer.Option(None, "--source", help="Event source YAML (default: synthetic)."),
    window_days: Optional[int] = typer.Option(None, "--window-days", help="Training window in days."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray Train workers."),
    epochs: Optional[int] = typer.Option(None, "--epochs"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size"),
    gpu_pool: Optional[str] = typer.Option(None, "--gpu-pool"),
    model_name: Optional[str] = typer.Option(None, "--model-name"),
    rows_per_day: Optional[int] = typer.Option(None, "--rows-per-day", help="Synthetic source: rows per day."),
) -> None:
    """Run daily_retraining for one day; the last line printed is one JSON object."""
    from ads_ranking_pipelines.defs.jobs import JOB_NAME
    from ads_ranking_pipelines.defs.partitions import daily_partitions

    try:
        day = dt.date.fromisoformat(date) if date else dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)
    except ValueError:
        fail(f"invalid --date={date!r}: expected YYYY-MM-DD", EXIT_INVALID)
    keys = daily_partitions.get_partition_keys()
    if day.isoformat() not in keys:
        fail(f"invalid --date={day}: no such partition; valid: {keys[0]} .. {keys[-1]}", EXIT_INVALID)
    params = _params({"dataset_window_days": window_days, "num_workers": workers, "epochs": epochs,
                      "batch_size": batch_size, "gpu_pool": gpu_pool, "model_name": model_name})
    src = _source(source)
    if rows_per_day is not None:
        try:
            src = src.model_copy(update={"synthetic": src.synthetic.model_validate(
                {**src.synthetic.model_dump(), "rows_per_day": rows_per_day})})
        except ValidationError as exc:
            fail(format_validation_error(exc, type(src.synthetic), prefix="source.synthetic."), EXIT_INVALID)
    check_run(params, os.environ)
    _sigterm_interrupts()
    summary = run_pipeline(day, params, src, dict(os.environ))
    typer.echo(json.dumps(summary, sort_keys=False))
    if summary.get("error"):
        raise typer.Exit(EXIT_RUNTIME)


def _sigterm_interrupts() -> None:
    """SIGTERM (a cancelled run, a stopped pod) interrupts like Ctrl-C: Ray jobs are stopped
    and the cluster torn down before the process exits."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def run_config(params: TrainingParams, source: SourceConfig) -> dict[str, Any]:
    from ads_ranking_pipelines.defs.resources import EventSourceResource

    return {
        "ops": {"trained_model": {"config": params.model_dump(mode="json")}},
        "resources": {"event_source": {"config": EventSourceResource.from_source(source)}},
    }


def run_pipeline(day: dt.date, params: TrainingParams, source: SourceConfig,
                 environ: dict[str, str]) -> dict[str, Any]:
    """Execute the job in this process, recorded in the Dagster instance; returns the summary."""
    import dagster as dg

    from ads_ranking_pipelines.defs.jobs import JOB_NAME
    from ads_ranking_pipelines.definitions import build_definitions

    dagster_home = environ.get("DAGSTER_HOME") or os.path.abspath(".dagster_home")
    os.makedirs(dagster_home, exist_ok=True)
    os.environ["DAGSTER_HOME"] = dagster_home
    defs = build_definitions(environ)
    job = defs.resolve_job_def(JOB_NAME)
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=run_config(params, source), partition_key=day.isoformat(),
                                        instance=instance, raise_on_error=False)
        summary: dict[str, Any] = {"date": day.isoformat(), "model_version": None, "auc": None,
                                   "logloss": None, "baseline_auc": None, "oracle_auc": None,
                                   "scores_uri": None, "run_id": result.run_id}
        mats = {}
        for node in ("trained_model", "model_evaluation", "batch_scores"):
            for mat in result.asset_materializations_for_node(node):
                mats[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
        model = mats.get("trained_model", {})
        ev = mats.get("model_evaluation", {})
        scores = mats.get("batch_scores", {})
        summary.update({
            "model_version": model.get("model_version"),
            "auc": ev.get("auc"), "logloss": ev.get("logloss"), "baseline_auc": ev.get("baseline_auc"),
            "oracle_auc": ev.get("oracle_auc") if source.kind == "synthetic" else None,
            "scores_uri": scores.get("scores_uri"),
        })
        if not result.success:
            summary["error"] = _first_failure(result)
            typer.echo(f"error: {summary['error']}", err=True)
        return summary
