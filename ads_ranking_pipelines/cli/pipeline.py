"""``ads-ranking pipeline run | backfill``: the daily_retraining job for one day or a range, through Dagster.

The run is recorded in the Dagster instance (``DAGSTER_HOME``) with its full event log; the
terminal shows the story (``cli/progress.py``) unless ``--verbose``; the last line is JSON.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
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


def load_source(path: Optional[Path]) -> SourceConfig:
    """The source YAML at ``path`` (default: synthetic); relative local file paths in ``uri`` and
    ``events_uri`` are taken relative to the YAML's folder. Exits 2 on bad input."""
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
    raw = _resolve_paths(dict(raw.get("source", raw)), path.parent)
    try:
        return SourceConfig.model_validate(raw)
    except ValidationError as exc:
        fail(format_validation_error(exc, SourceConfig, prefix="source."), EXIT_INVALID)


def _resolve_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    def fix(value: str) -> str:
        parts = [p.strip() for p in str(value).split(",")]
        return ",".join(p if ("://" in p or os.path.isabs(p) or not p) else str((base / p).resolve())
                        for p in parts)

    for key in ("uri", "events_uri"):
        if isinstance(raw.get(key), str):
            raw[key] = fix(raw[key])
    return raw


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


_OPTS = dict(
    source=typer.Option(None, "--source", help="Event source YAML (default: synthetic)."),
    window_days=typer.Option(None, "--window-days", help="Training window in days."),
    workers=typer.Option(None, "--workers", help="Ray Train workers."),
    epochs=typer.Option(None, "--epochs"),
    batch_size=typer.Option(None, "--batch-size"),
    gpu_pool=typer.Option(None, "--gpu-pool"),
    model_name=typer.Option(None, "--model-name"),
    rows_per_day=typer.Option(None, "--rows-per-day", help="Synthetic source: rows per day."),
    verbose=typer.Option(False, "--verbose", "-v", help="Print the full Dagster event log."),
    param=typer.Option(None, "--param", help="Any training field, FIELD=VALUE (repeatable), e.g. learning_rate=0.02."),
    gate=typer.Option(None, "--gate", help="A gate threshold, FIELD=VALUE (repeatable), e.g. max_auc_drop_vs_champion=0.01."),
    no_wait=typer.Option(False, "--no-wait", help="Exit 1 instead of waiting when the GPU pool is at its run limit."),
    cluster=typer.Option(None, "--cluster", help="Run on this existing cluster (local: of `cluster create`; "
                         "kuberay: a RayCluster of ours) instead of creating one; it is left running."),
    ray_address=typer.Option(None, "--ray-address", help="Local backend: run on the Ray cluster whose "
                             "dashboard is at this address (http://HOST:8265) instead of creating one."),
    keep_warm=typer.Option(None, "--keep-warm", metavar="SECONDS", help="Local backend: reuse a matching warm "
                           "cluster of an earlier --keep-warm run, else create one; it is kept running after the "
                           "run and stopped by `cluster gc` once unused for SECONDS."),
)


def _pairs(values: Optional[list[str]], flag: str, valid: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values or []:
        key, sep, raw = item.partition("=")
        if not sep or key not in valid:
            fail(f"invalid {flag} {item!r}: expected FIELD=VALUE with FIELD one of {', '.join(valid)}", EXIT_INVALID)
        out[key] = yaml.safe_load(raw) if raw else raw
    return out


def _gates(values: Optional[list[str]]) -> dict[str, Any] | None:
    from ads_ranking_pipelines.definitions import evaluation_config_fields

    fields = evaluation_config_fields()
    gates = _pairs(values, "--gate", sorted(fields))
    for key, value in gates.items():
        if isinstance(value, bool) != (fields[key] is bool) or not isinstance(value, (int, float)):
            fail(f"invalid --gate {key}={value!r}: expected a {fields[key].__name__}", EXIT_INVALID)
    return gates or None


def _day(value: Optional[str], flag: str) -> dt.date:
    from ads_ranking_pipelines.definitions import daily_partitions

    try:
        day = dt.date.fromisoformat(value) if value else dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)
    except ValueError:
        fail(f"invalid {flag}={value!r}: expected YYYY-MM-DD", EXIT_INVALID)
    keys = daily_partitions.get_partition_keys()
    if day.isoformat() not in keys:
        fail(f"invalid {flag}={day}: no such partition; valid: {keys[0]} .. {keys[-1]}", EXIT_INVALID)
    return day


def _target(cluster: Optional[str], ray_address: Optional[str], keep_warm: Optional[float] = None) -> dict[str, Any]:
    """The ``ray_cluster`` resource fields that point the run at an existing cluster, or keep its own warm."""
    if cluster and ray_address:
        fail(f"invalid --ray-address={ray_address!r} with --cluster={cluster!r}; valid: one of the two", EXIT_INVALID)
    if keep_warm is not None and not keep_warm > 0:
        fail(f"invalid --keep-warm={keep_warm:g}; valid: idle seconds > 0 before the warm cluster is reaped",
             EXIT_INVALID)
    if keep_warm is not None and (cluster or ray_address):
        fail(f"invalid --keep-warm={keep_warm:g} with --cluster/--ray-address={cluster or ray_address!r}; valid: "
             "one of the two (a borrowed cluster is not the run's to keep)", EXIT_INVALID)
    fields: dict[str, Any] = {k: v for k, v in (("existing_cluster", cluster), ("ray_address", ray_address)) if v}
    return {**fields, "keep_warm_s": keep_warm} if keep_warm is not None else fields


def _inputs(source, window_days, workers, epochs, batch_size, gpu_pool, model_name, rows_per_day, param=None,
            target=None):
    extra = _pairs(param, "--param", sorted(TrainingParams.model_fields))
    params = _params({**extra, "dataset_window_days": window_days, "num_workers": workers, "epochs": epochs,
                      "batch_size": batch_size, "gpu_pool": gpu_pool, "model_name": model_name})
    src = load_source(source)
    if rows_per_day is not None:
        try:
            src = src.model_copy(update={"synthetic": src.synthetic.model_validate(
                {**src.synthetic.model_dump(), "rows_per_day": rows_per_day})})
        except ValidationError as exc:
            fail(format_validation_error(exc, type(src.synthetic), prefix="source.synthetic."), EXIT_INVALID)
    check_run(params, os.environ, target)
    return params, src


@app.command("run")
def run(
    date: Optional[str] = typer.Option(None, "--date", help="Partition day YYYY-MM-DD (default: yesterday, UTC)."),
    source: Optional[Path] = _OPTS["source"], window_days: Optional[int] = _OPTS["window_days"],
    workers: Optional[int] = _OPTS["workers"], epochs: Optional[int] = _OPTS["epochs"],
    batch_size: Optional[int] = _OPTS["batch_size"], gpu_pool: Optional[str] = _OPTS["gpu_pool"],
    model_name: Optional[str] = _OPTS["model_name"], rows_per_day: Optional[int] = _OPTS["rows_per_day"],
    verbose: bool = _OPTS["verbose"], param: Optional[list[str]] = _OPTS["param"],
    gate: Optional[list[str]] = _OPTS["gate"], no_wait: bool = _OPTS["no_wait"],
    cluster: Optional[str] = _OPTS["cluster"], ray_address: Optional[str] = _OPTS["ray_address"],
    keep_warm: Optional[float] = _OPTS["keep_warm"],
) -> None:
    """Run daily_retraining for one day; the last line printed is one JSON object."""
    day = _day(date, "--date")
    target = _target(cluster, ray_address, keep_warm)
    params, src = _inputs(source, window_days, workers, epochs, batch_size, gpu_pool, model_name, rows_per_day, param,
                          target)
    _finish(run_pipeline(day, params, src, dict(os.environ), verbose=verbose, evaluation=_gates(gate),
                         wait=not no_wait, target=target))


@app.command("backfill")
def backfill(
    first: str = typer.Option(..., "--from", help="First partition day YYYY-MM-DD."),
    last: str = typer.Option(..., "--to", help="Last partition day YYYY-MM-DD (inclusive)."),
    warm_start: bool = typer.Option(True, "--warm-start/--cold-start",
                                    help="Start each day's version from the previous day's."),
    source: Optional[Path] = _OPTS["source"], window_days: Optional[int] = _OPTS["window_days"],
    workers: Optional[int] = _OPTS["workers"], epochs: Optional[int] = _OPTS["epochs"],
    batch_size: Optional[int] = _OPTS["batch_size"], gpu_pool: Optional[str] = _OPTS["gpu_pool"],
    model_name: Optional[str] = _OPTS["model_name"], rows_per_day: Optional[int] = _OPTS["rows_per_day"],
    verbose: bool = _OPTS["verbose"], param: Optional[list[str]] = _OPTS["param"],
    gate: Optional[list[str]] = _OPTS["gate"], no_wait: bool = _OPTS["no_wait"],
    cluster: Optional[str] = _OPTS["cluster"], ray_address: Optional[str] = _OPTS["ray_address"],
    keep_warm: Optional[float] = _OPTS["keep_warm"],
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the preview (estimate from this model's recorded "
                                 "days on the pool, capacity, proposed split, budget) and start nothing; exit 2 "
                                 "if the range is over its budget."),
    budget_gpu_hours: Optional[float] = typer.Option(None, "--budget-gpu-hours", help="Refuse the range when it is "
                                                     "estimated over this many GPU-hours (default: the pool's)."),
    budget_cost: Optional[float] = typer.Option(None, "--budget-cost", help="Refuse the range when its estimated "
                                                "cost is over this (default: the pool's)."),
) -> None:
    """Run daily_retraining over a date range as ONE run on one cluster: one version per day, in date order.
    The preview is printed first; a range over its budget exits 2 before anything starts."""
    from ads_ranking_pipelines.cli.preview import preview_backfill

    d1, d2 = _day(first, "--from"), _day(last, "--to")
    if d2 < d1:
        fail(f"invalid --to={d2}: before --from={d1}", EXIT_INVALID)
    target = _target(cluster, ray_address, keep_warm)
    params, src = _inputs(source, window_days, workers, epochs, batch_size, gpu_pool, model_name, rows_per_day, param,
                          target)
    budget = {"budget_gpu_hours": budget_gpu_hours, "budget_cost": budget_cost}
    days = [d1 + dt.timedelta(days=i) for i in range((d2 - d1).days + 1)]
    preview_backfill(days, params, src, dict(os.environ), budget, dry_run)
    _finish(run_pipeline(d1, params, src, dict(os.environ), verbose=verbose, last=d2, warm_start=warm_start,
                         evaluation=_gates(gate), wait=not no_wait, target=target, budget=budget))


def _finish(summary: dict[str, Any]) -> None:
    typer.echo(json.dumps(summary, sort_keys=False, default=str))
    if summary.get("error"):
        raise typer.Exit(EXIT_RUNTIME)


def _sigterm_interrupts() -> None:
    """SIGTERM (a cancelled run, a stopped pod) interrupts like Ctrl-C: Ray jobs are stopped
    and the cluster torn down before the process exits."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def run_config(params: TrainingParams, source: SourceConfig, warm_start: bool | None = None,
               evaluation: dict[str, Any] | None = None, verbose: bool = True,
               budget: dict[str, float | None] | None = None) -> dict[str, Any]:
    from ads_ranking_pipelines.definitions import event_source_config
    from ads_ranking_pipelines.definitions import run_config as job_run_config

    config = job_run_config(params, event_source_config(source), warm_start=warm_start, evaluation=evaluation,
                            budget=budget)
    if not verbose:        # the event log is still stored in full; only the console logger is quiet
        config["loggers"] = {"console": {"config": {"log_level": "CRITICAL"}}}
    return config


QUALITY_MODELS = ("", "baseline_", "lr_", "specified_", "oracle_")


def quality_summary(ev: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """AUC / logloss of the version and each reference with their 95 % bootstrap intervals."""
    out: dict[str, Any] = {}
    for name in QUALITY_MODELS:
        for metric in ("auc", "logloss"):
            for suffix in ("", "_ci_low", "_ci_high"):
                key = f"{name}{metric}{suffix}"
                if key in ev and key not in ("auc", "logloss"):
                    out[key] = ev[key]
    for key in ("auc_diff_vs_baseline", "auc_diff_vs_baseline_ci_low", "auc_diff_vs_baseline_ci_high",
                "calibration", "rows"):
        if key in ev:
            out[key] = ev[key]
    for key, name in (("epochs", "train_epochs"), ("best_epoch", "train_best_epoch"),
                      ("rows", "window_rows"), ("train_rows", "train_rows")):
        if key in model:
            out[name] = model[key]
    return out


def _summaries(result: Any, days: list[dt.date], source: SourceConfig) -> list[dict[str, Any]]:
    per_day: dict[str, dict[str, Any]] = {d.isoformat(): {} for d in days}
    for node in ("trained_model", "model_evaluation", "batch_scores"):
        for mat in result.asset_materializations_for_node(node):
            if mat.partition in per_day:
                per_day[mat.partition][node] = {k: v.value for k, v in mat.metadata.items()}
    out = []
    for day, mats in per_day.items():
        model, ev, scores = (mats.get(n, {}) for n in ("trained_model", "model_evaluation", "batch_scores"))
        out.append({"date": day, "model_version": model.get("model_version") or ev.get("model_version"),
                    "auc": ev.get("auc"), "logloss": ev.get("logloss"), "baseline_auc": ev.get("baseline_auc"),
                    "oracle_auc": ev.get("oracle_auc") if source.kind == "synthetic" else None,
                    "promoted": ev.get("promoted"), "champion": ev.get("champion_after"),
                    "scored_with": scores.get("model_version"), "scores_uri": scores.get("scores_uri"),
                    **quality_summary(ev, model)})
    return out


def _warnings_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


def _take_pool_slot(stack: contextlib.ExitStack, instance: Any, pool: str, run_id: str, environ: dict[str, str],
                    wait: bool) -> None:
    """Hold the run's slot of its GPU pool (``cli/pool_slot.py``) until ``stack`` closes. With
    ``wait=False`` a full pool exits 1, not 2: the input is valid (2 is for bad input) and the same
    command succeeds once the pool has room."""
    from ads_ranking_pipelines.cli.pool_slot import PoolBusy, PoolSlot, pool_limit
    from ads_ranking_pipelines.config.pools import catalog_path_from_env, load_catalog

    limit = pool_limit(instance, pool, load_catalog(catalog_path_from_env(environ)))
    try:
        stack.enter_context(PoolSlot(instance, limit, run_id, lambda m: typer.echo(m, err=True), wait=wait))
    except PoolBusy as exc:
        fail(str(exc), EXIT_RUNTIME)


def run_pipeline(day: dt.date, params: TrainingParams, source: SourceConfig, environ: dict[str, str],
                 verbose: bool = True, last: dt.date | None = None, warm_start: bool | None = None,
                 evaluation: dict[str, Any] | None = None, wait: bool = True,
                 target: dict[str, str] | None = None, budget: dict[str, float | None] | None = None) -> dict[str, Any]:
    """Execute the job for ``day`` (or ``day..last`` in one run) in this process, recorded in the
    Dagster instance, once the run's GPU pool has a slot (or exit 1 with ``wait=False``); returns
    the summary (the JSON line). ``target``: run on that existing cluster (``--cluster``/``--ray-address``)."""
    import uuid

    import dagster as dg

    from ads_ranking_pipelines.cli.progress import RunNarrator
    from ads_ranking_pipelines.definitions import JOB_NAME, build_definitions, range_tags, run_tags

    _sigterm_interrupts()
    if not verbose:     # Ray's job client logs every closed log stream at INFO
        # A filter, not a level: Ray's logging setup (dictConfig) resets the levels of the
        # "ray" logger's children when it runs, but leaves their filters alone.
        logging.getLogger("ray.dashboard.modules.job.sdk").addFilter(_warnings_only)
    dagster_home = environ.get("DAGSTER_HOME") or os.path.abspath(".dagster_home")
    os.makedirs(dagster_home, exist_ok=True)
    environ = {**environ, "DAGSTER_HOME": dagster_home}    # this run's, not the process's
    job = build_definitions(environ, target).resolve_job_def(JOB_NAME)
    last = last or day
    days = [day + dt.timedelta(days=i) for i in range((last - day).days + 1)]
    tags = run_tags(params.model_name, params.gpu_pool)
    if last != day:
        tags.update(range_tags(day, last))
    run_id = str(uuid.uuid4())
    with dg.DagsterInstance.from_config(dagster_home) as instance:
        narrator = RunNarrator(instance, run_id, typer.echo) if not verbose else contextlib.nullcontext()
        with contextlib.ExitStack() as stack:
            _take_pool_slot(stack, instance, params.gpu_pool, run_id, environ, wait)
            stack.enter_context(narrator)
            result = job.execute_in_process(
                run_config=run_config(params, source, warm_start, evaluation, verbose=verbose, budget=budget),
                instance=instance,
                partition_key=day.isoformat() if last == day else None, tags=tags, run_id=run_id,
                raise_on_error=False)
        per_day = _summaries(result, days, source)
        summary: dict[str, Any] = {**per_day[-1], "run_id": result.run_id} if len(days) == 1 else {
            "from": day.isoformat(), "to": last.isoformat(), "days": per_day, "run_id": result.run_id}
        if not result.success:
            summary["error"] = _first_failure(result)
            typer.echo(f"error: {summary['error']}", err=True)
        return summary
