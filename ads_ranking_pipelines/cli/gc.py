"""``ads-ranking cluster gc``: collect clusters and RayJobs left behind by runs that died or
finished without tearing down (see ``backends/gc.py``).

Run state comes from the Dagster instance in ``DAGSTER_HOME``; without one, only the rules
that need no run state apply (local clusters whose process died, RayJobs the operator left
behind after their TTL). Objects without our managed-by label are never touched.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import typer

from ads_ranking_pipelines.cli.backend_factory import (
    KubeOptions,
    backend_choice,
    cli_env,
    errors_to_exit_codes,
    kube_namespace,
    kuberay_backend,
)


def _no_instance(run_id: str) -> None:  # noqa: ARG001 - the RunStatus signature
    return None


def _run_status(environ: dict[str, str]) -> tuple[Any, Any]:
    """``(run_status, instance)`` from ``DAGSTER_HOME``, or ``(no-op, None)`` without one."""
    home = environ.get("DAGSTER_HOME")
    if not home or not os.path.isdir(home):
        return _no_instance, None
    import dagster as dg

    from ads_ranking_pipelines.definitions import dagster_run_status

    instance = dg.DagsterInstance.from_config(home)
    return dagster_run_status(instance), instance


def gc(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be collected; delete nothing."),
    grace: float = typer.Option(600.0, "--grace", help="Seconds before an object of an unknown run is collected."),
    ttl: float = typer.Option(1200.0, "--ttl", help="Seconds after a RayJob finished before it is collected."),
    backend: Optional[str] = typer.Option(None, "--backend", help="local or kuberay (default $ADS_RANKING_BACKEND)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="Kubernetes namespace."),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (kuberay)."),
    in_cluster: bool = typer.Option(False, "--in-cluster", help="Use the pod's service account (kuberay)."),
) -> None:
    """Delete Ray clusters / RayJobs of dead or finished runs; one JSON line per object."""
    from ads_ranking_pipelines.backends import gc as collector

    env = cli_env(ctx)
    status, instance = _run_status(env.environ)
    found = []
    if instance is None:
        typer.echo("no Dagster instance (DAGSTER_HOME): collecting by process and TTL only",
                   err=True)
    else:       # runs whose process died are failed first, so their RayJobs are collected below
        from ads_ranking_pipelines.definitions import mark_dead_runs

        found += mark_dead_runs(instance, env.settings.home, dry_run=dry_run)
    found += collector.collect_local(env.settings.state_dir, status, grace_s=grace, dry_run=dry_run)
    if backend_choice(env, backend) == "kuberay":
        kube = KubeOptions(context, in_cluster, namespace)
        with errors_to_exit_codes():
            found += collector.collect_kuberay(
                kuberay_backend(env, kube), kube_namespace(kube, env), status, grace_s=grace,
                ttl_s=ttl, dry_run=dry_run)
    if instance is not None and not dry_run:
        from ads_ranking_pipelines.definitions import mark_collected

        mark_collected(instance, found, env.settings.home)
    for item in found:
        typer.echo(json.dumps({"action": "would delete" if dry_run else "deleted",
                               "backend": item.backend, "kind": item.kind, "name": item.name,
                               "namespace": item.namespace, "run_id": item.run_id,
                               "reason": item.reason}))
    typer.echo(f"{'would collect' if dry_run else 'collected'} {len(found)} object(s)", err=True)
