"""``ads-ranking``: one console script, one sub-command group per concern.

Exit codes everywhere: 0 ok, 2 invalid input (the message names the field and the valid
values), 1 runtime failure.
"""

from __future__ import annotations

import typer

from ads_ranking_pipelines.cli import cluster, events, instance, job, model, pipeline, pools, xray

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Daily ads-ranking retraining on Ray, orchestrated by Dagster.")
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(pools.app, name="pools")
app.add_typer(model.app, name="model")
app.add_typer(instance.app, name="instance")
app.add_typer(cluster.app, name="cluster")
app.add_typer(job.app, name="job")
app.add_typer(events.app, name="events")
app.add_typer(xray.app, name="xray")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
