"""``ads-ranking``: one console script, one sub-command group per concern.

Exit codes everywhere: 0 ok, 2 invalid input (the message names the field and the valid
values), 1 runtime failure.
"""

from __future__ import annotations

import typer

from ads_ranking_pipelines.cli import pipeline

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Daily ads-ranking retraining on Ray, orchestrated by Dagster.")
app.add_typer(pipeline.app, name="pipeline")


def _register_optional() -> None:
    """Sub-command groups added by their own modules (pools, cluster, job)."""
    import importlib

    for name in ("pools", "cluster", "job"):
        try:
            module = importlib.import_module(f"ads_ranking_pipelines.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"ads_ranking_pipelines.cli.{name}":
                raise
            continue
        app.add_typer(module.app, name=name)


_register_optional()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
