"""``ads-ranking events import``: write a file-kind source (criteo_tsv, avazu_csv) into the
event-parquet layout once; the pipeline also does this on first use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from ads_ranking_pipelines.cli.common import EXIT_INVALID, fail

app = typer.Typer(no_args_is_help=True, help="Event sources: import public-format files.")


@app.command("import")
def import_events(
    source: Path = typer.Option(..., "--source", help="Source YAML of kind criteo_tsv or avazu_csv."),
    force: bool = typer.Option(False, "--force", help="Import again even if already imported."),
    chunk_mb: float = typer.Option(4.0, "--chunk-mb", min=0.0625, max=1024.0,
                                   help="Bytes read per block (memory stays at about this)."),
) -> None:
    """Import the source's files into daily partitions; the last line printed is one JSON object."""
    from ads_ranking_pipelines.cli.pipeline import load_source
    from ads_ranking_pipelines.config.settings import Settings
    from ads_ranking_pipelines.events.file_import import import_source
    from ads_ranking_pipelines.events.layout import EventLayoutError
    from ads_ranking_pipelines.storage.layout import StorageLayout

    src = load_source(source)
    if not src.is_file_kind:
        fail(f"--source {source}: kind {src.kind!r} needs no import; only criteo_tsv and avazu_csv "
             "sources are imported", EXIT_INVALID)
    src = src.with_root(StorageLayout(Settings.from_environ(os.environ).home).root)
    try:
        report = import_source(src, chunk_bytes=int(chunk_mb * (1 << 20)), force=force,
                               log=lambda m: typer.echo(m, err=True))
    except EventLayoutError as exc:
        fail(str(exc), EXIT_INVALID)
    if report.skipped:
        typer.echo(f"already imported under {report.events_uri} (use --force to import again)", err=True)
    out = report.to_dict()
    out.pop("files", None)
    typer.echo(json.dumps(out))
