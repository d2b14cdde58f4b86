"""``ads-ranking instance``: the Dagster instance settings, generated from the pool catalog."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from ads_ranking_pipelines.cli import render
from ads_ranking_pipelines.cli.common import EXIT_INVALID, fail
from ads_ranking_pipelines.config.dagster_instance import instance_settings, render_yaml
from ads_ranking_pipelines.config.pools import CatalogError, load_catalog
from ads_ranking_pipelines.config.settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Dagster instance settings (run queue per GPU pool, run monitoring, telemetry off).")


@app.command("dagster-yaml")
def dagster_yaml(
    out: Optional[Path] = typer.Option(None, "--out", help="Write here (e.g. $DAGSTER_HOME/dagster.yaml); default stdout."),
    max_concurrent_runs: int = typer.Option(10, "--max-concurrent-runs", min=1, help="Runs at once, all pools together."),
) -> None:
    """dagster.yaml for the pool catalog in effect (ADS_RANKING_POOL_CATALOG or the shipped one)."""
    try:
        catalog = load_catalog(Settings.from_environ(os.environ).pool_catalog)
    except (CatalogError, OSError, ValueError) as exc:
        fail(f"pool catalog: {exc}", EXIT_INVALID)
    text = render_yaml(instance_settings(catalog, max_concurrent_runs=max_concurrent_runs))
    if out is None:
        render.echo(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)
