"""``ads-ranking xray serve``: the X-Ray web UI over the local and KubeRay backends."""

from __future__ import annotations

import os
from typing import Optional

import typer

from ads_ranking_pipelines.cli.common import EXIT_INVALID, fail

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="X-Ray: one web page for every Ray cluster.")


def _kube_scope(kube: object) -> str:
    names = ", ".join(kube.namespaces)  # type: ignore[attr-defined]
    if kube.all_namespaces:  # type: ignore[attr-defined]
        return f"all namespaces, creating in {names}"
    return f"namespaces {names}"


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address; anything but loopback "
                             "needs --token."),
    port: int = typer.Option(8080, "--port", help="TCP port."),
    token: Optional[str] = typer.Option(None, "--token", envvar="ADS_RANKING_XRAY_TOKEN",
                                        show_envvar=True, help="Bearer token required by every "
                                        "request (mandatory off loopback)."),
    dagster_url: Optional[str] = typer.Option(None, "--dagster-url", help="Dagster UI address for "
                                              "run links; default $ADS_RANKING_DAGSTER_URL or "
                                              "http://127.0.0.1:3000."),
    kuberay: Optional[bool] = typer.Option(None, "--kuberay/--no-kuberay", help="List KubeRay "
                                           "clusters; default: when a kubeconfig exists."),
    namespace: Optional[list[str]] = typer.Option(None, "--namespace", "-n", help="KubeRay "
                                                  "namespace to list (repeatable); default "
                                                  "$ADS_RANKING_NAMESPACE or ads-ranking."),
    all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="List KubeRay "
                                        "clusters in every namespace (needs list granted "
                                        "cluster-wide: the chart's xray.crossNamespace); "
                                        "--namespace still says where to create."),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (kuberay)."),
    in_cluster: bool = typer.Option(False, "--in-cluster", help="Use the pod's service account."),
) -> None:
    """Serve X-Ray until Ctrl-C. Clusters and notebooks it started keep running."""
    from ads_ranking_pipelines.xray.server import UnsafeBind, check_bind, serve as run_server
    from ads_ranking_pipelines.xray.settings import kube_settings, make_settings

    if not 0 < port < 65536:
        fail(f"invalid --port = {port}; valid: 1..65535", EXIT_INVALID)
    environ = dict(os.environ)
    kube = kube_settings(environ, context=context, in_cluster=in_cluster,
                         namespaces=namespace or [], kuberay=kuberay,
                         all_namespaces=all_namespaces)
    settings = make_settings(environ, host=host, port=port, token=token,
                             dagster_url=dagster_url, kube=kube)
    try:
        check_bind(settings)
    except UnsafeBind as exc:
        fail(str(exc), EXIT_INVALID)
    typer.echo(f"X-Ray on http://{host}:{port}/ (local state {settings.settings.state_dir}; "
               f"KubeRay {_kube_scope(kube) if kube.enabled else 'off'})",
               err=True)
    run_server(settings, environ)
