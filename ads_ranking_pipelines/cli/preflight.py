"""Pre-flight of ``pipeline run``: the run's cluster request checked the way the run's own
resource will check it (pool and sizes; on KubeRay also the Ray image and the storage root),
so bad input exits 2 with every problem listed before Dagster starts anything. A run on an
existing cluster (``--cluster``/``--ray-address``) has that cluster checked here too."""

from __future__ import annotations

from collections.abc import Mapping

from ads_ranking_pipelines.cli.common import EXIT_INVALID, fail
from ads_ranking_pipelines.config.settings import Settings, SettingsError
from ads_ranking_pipelines.config.training import TrainingParams


def check_run(params: TrainingParams, environ: Mapping[str, str], target: Mapping[str, str] | None = None) -> None:
    """``target``: the ``ray_cluster`` fields naming an existing cluster (it is checked too)."""
    import dagster as dg

    from ads_ranking_pipelines.definitions import ray_resource

    try:
        resource = ray_resource(Settings.from_environ(environ), target)
    except SettingsError as exc:
        fail(str(exc), EXIT_INVALID)
    try:
        resource.cluster_request(params, "preflight")
    except dg.Failure as exc:
        fail(exc.description or str(exc), EXIT_INVALID)
