"""``pipeline backfill``'s preview: estimate, capacity, proposed split and budget, printed before
anything starts (``--dry-run``: only that); a range over its budget exits 2 before any run."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from typing import Any

import typer

from ads_ranking_pipelines.cli.common import EXIT_INVALID, fail
from ads_ranking_pipelines.config.pools import UnknownPoolError, catalog_path_from_env, load_catalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.storage.layout import StorageLayout


def _run_limit(environ: Mapping[str, str], pool: str, catalog: Any) -> int | None:
    """The pool's run limit as the instance's run queue gives it (the catalog's without an instance)."""
    home = environ.get("DAGSTER_HOME")
    if not home or not os.path.exists(os.path.join(home, "dagster.yaml")):
        return catalog.get(pool).max_concurrent_runs
    import dagster as dg

    from ads_ranking_pipelines.cli.pool_slot import pool_limit

    with dg.DagsterInstance.from_config(home) as instance:
        return pool_limit(instance, pool, catalog).limit


def preview_backfill(days: list[dt.date], params: TrainingParams, source: SourceConfig, environ: Mapping[str, str],
                     budget: dict[str, float | None], dry_run: bool) -> None:
    """Print the preview; exit 2 when over budget; exit 0 after it with ``dry_run``."""
    from ads_ranking_pipelines.definitions import range_preview
    from ads_ranking_pipelines.planning.render import preview_json, preview_lines

    settings = Settings.from_environ(environ)
    catalog = load_catalog(catalog_path_from_env(environ))
    try:
        pool = catalog.get(params.gpu_pool)
        preview = range_preview(params, pool, StorageLayout(settings.home), source.with_root(settings.home), days,
                                budget.get("budget_gpu_hours"), budget.get("budget_cost"),
                                _run_limit(environ, params.gpu_pool, catalog))
    except (UnknownPoolError, ValueError) as exc:
        fail(str(exc), EXIT_INVALID)
    for line in preview_lines(preview):
        typer.echo(line)
    refusal = preview.refusal()
    if dry_run:
        typer.echo(json.dumps({"dry_run": True, **preview_json(preview)}, default=str))
        raise typer.Exit(EXIT_INVALID if refusal else 0)
    if refusal:
        fail(refusal, EXIT_INVALID)
