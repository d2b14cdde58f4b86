"""``ads-ranking cluster``: render, create, list, describe and delete Ray clusters.

``render`` prints the manifest the one template makes (no API calls). The other commands
work on the local backend (a real Ray cluster on this machine, found again through its state
file under ``$ADS_RANKING_HOME/clusters``) or on KubeRay (RayClusters carrying our
``app.kubernetes.io/managed-by`` label, through a kubeconfig context or in-cluster). On a
Kueue pool ``list`` / ``describe`` show a queued RayCluster - and a queued RayJob of ours with
no RayCluster yet - as ``queued``, with Kueue's words, position and time queued.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Optional

import typer

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.cli import render
from ads_ranking_pipelines.cli.backend_factory import (
    CliEnv,
    KubeOptions,
    backend_choice,
    build_request,
    cli_env,
    errors_to_exit_codes,
    sigterm_as_interrupt,
    find_local,
    kube_namespace,
    kuberay_backend,
    local_clusters,
    local_info,
    make_env,
    request_error,
)
from ads_ranking_pipelines.cli.common import EXIT_INVALID, EXIT_RUNTIME, fail
from ads_ranking_pipelines.cli.gc import gc
from ads_ranking_pipelines.config.validation import RequestError, ResolvedRequest

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Ray clusters from the one template: render, create, list, describe, delete.")
app.command("gc")(gc)


@app.callback()
def _settings(ctx: typer.Context) -> None:
    ctx.obj = make_env(os.environ)


# ---- shared options -------------------------------------------------------------------------
GPU_POOL = typer.Option(None, "--gpu-pool", help="Pool from the catalog (`ads-ranking pools list`); "
                        "default: the catalog's default pool.")
WORKERS = typer.Option(2, "--workers", help="Ray worker pods (nodes).")
GPUS = typer.Option(0, "--gpus-per-worker", help="GPUs per worker (GPU pools: 1..GPUs per node).")
CPUS = typer.Option(None, "--cpus-per-worker", help="CPUs per worker; default: on GPU pools a "
                    "share of the node per GPU (node CPUs less headroom / GPUs per node), else 1.")
MEMORY = typer.Option(None, "--memory", help="Memory per worker, a Kubernetes quantity (64Gi); "
                      "default: on GPU pools a share of the node per GPU, else 4Gi.")
HEAD_CPUS = typer.Option(1.0, "--head-cpus", help="CPUs of the head.")
HEAD_MEMORY = typer.Option("4Gi", "--head-memory", help="Memory of the head.")
OWNER = typer.Option(None, "--owner", help="Owner label; default $ADS_RANKING_OWNER or $USER.")
NAME = typer.Option(None, "--name", help="Cluster name (DNS-1035); default <owner>-<pool>.")
IMAGE = typer.Option(None, "--image", help="Ray image; default the CPU image, or the GPU image "
                     "on GPU pools.")
NAMESPACE = typer.Option(None, "--namespace", "-n", help="Kubernetes namespace (default ads-ranking).")
LABEL = typer.Option(None, "--label", help="Extra label KEY=VALUE (repeatable).")
AUTOSCALING = typer.Option(False, "--autoscaling", help="KubeRay autoscaler: 0..workers.")
BACKEND = typer.Option(None, "--backend", help="local or kuberay; default $ADS_RANKING_BACKEND "
                       "or local.")
CONTEXT = typer.Option(None, "--context", help="kubeconfig context (kuberay).")
IN_CLUSTER = typer.Option(False, "--in-cluster", help="Use the pod's service account (kuberay).")
NOTEBOOK = typer.Option(False, "--notebook", help="KubeRay: the head can serve a Jupyter notebook, "
                        "started and stopped later from X-Ray without restarting it (cannot be "
                        "added to a running cluster).")


def _request(env: CliEnv, **options: Any) -> ResolvedRequest:
    return build_request(env, **options)


# ---- render -----------------------------------------------------------------------------------
@app.command("render")
def render_cmd(
    ctx: typer.Context,
    gpu_pool: Optional[str] = GPU_POOL, workers: int = WORKERS, gpus_per_worker: int = GPUS,
    cpus_per_worker: Optional[float] = CPUS, memory: Optional[str] = MEMORY,
    head_cpus: float = HEAD_CPUS, head_memory: str = HEAD_MEMORY, owner: Optional[str] = OWNER,
    name: Optional[str] = NAME, image: Optional[str] = IMAGE, namespace: Optional[str] = NAMESPACE,
    label: Optional[list[str]] = LABEL, autoscaling: bool = AUTOSCALING, notebook: bool = NOTEBOOK,
    kind: str = typer.Option("raycluster", "--kind", help="raycluster or rayjob"),
    entrypoint: Optional[str] = typer.Option(None, "--entrypoint",
                                             help="The job's command (--kind rayjob)."),
    submission_id: Optional[str] = typer.Option(None, "--submission-id",
                                                help="Ray job id (--kind rayjob); default: the name."),
    output: render.Output = typer.Option(render.Output.yaml, "--output", "-o", help="yaml or json"),
    priority_class: Optional[str] = typer.Option(
        None, "--priority-class", help="Kueue WorkloadPriorityClass (a Kueue pool only); "
        "default: the pool's for an interactive cluster / a manual job."),
) -> None:
    """Print the manifest for a cluster request. No API calls."""
    from ads_ranking_pipelines.kuberay.notebook import with_notebook
    from ads_ranking_pipelines.kuberay.raycluster import build_raycluster
    from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

    env = cli_env(ctx)
    if kind not in ("raycluster", "rayjob"):
        fail(f"invalid --kind={kind!r}; valid: raycluster, rayjob", EXIT_INVALID)
    if notebook and kind != "raycluster":
        fail(f"invalid --notebook with --kind={kind!r}: a RayJob's cluster ends with its job; "
             "valid: --kind raycluster", EXIT_INVALID)
    resolved = _request(env, name=name, owner=owner, gpu_pool=gpu_pool, workers=workers,
                        gpus_per_worker=gpus_per_worker, cpus_per_worker=cpus_per_worker,
                        memory=memory, head_cpus=head_cpus, head_memory=head_memory, image=image,
                        namespace=namespace, labels=label, autoscaling=autoscaling,
                        run_kind="interactive" if kind == "raycluster" else "manual",
                        priority_class=priority_class)
    try:
        if kind == "raycluster":
            manifest = build_raycluster(resolved)
            manifest = with_notebook(manifest) if notebook else manifest
        else:
            if not entrypoint:
                fail("invalid --entrypoint (entrypoint) = None: required with --kind rayjob; "
                     "valid: a shell command", EXIT_INVALID)
            manifest = build_rayjob(resolved, entrypoint=entrypoint,
                                    submission_id=submission_id or resolved.name)
    except RequestError as exc:
        fail(request_error(exc), EXIT_INVALID)
    render.echo(render.dump(manifest, output))


# ---- create -----------------------------------------------------------------------------------
@app.command()
def create(
    ctx: typer.Context,
    gpu_pool: Optional[str] = GPU_POOL, workers: int = WORKERS, gpus_per_worker: int = GPUS,
    cpus_per_worker: Optional[float] = CPUS, memory: Optional[str] = MEMORY,
    head_cpus: float = HEAD_CPUS, head_memory: str = HEAD_MEMORY, owner: Optional[str] = OWNER,
    name: Optional[str] = NAME, image: Optional[str] = IMAGE, namespace: Optional[str] = NAMESPACE,
    label: Optional[list[str]] = LABEL, autoscaling: bool = AUTOSCALING,
    backend: Optional[str] = BACKEND, context: Optional[str] = CONTEXT,
    in_cluster: bool = IN_CLUSTER, notebook: bool = NOTEBOOK,
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait until the cluster is ready."),
    timeout: float = typer.Option(900.0, "--timeout", help="Seconds to wait for readiness."),
    output: render.TableOutput = typer.Option(render.TableOutput.table, "--output", "-o"),
) -> None:
    """Create a long-lived Ray cluster and (by default) wait until it is ready."""
    env = cli_env(ctx)
    which = backend_choice(env, backend)
    if notebook and which != "kuberay":
        fail(f"invalid --notebook with --backend {which}: local clusters start a notebook from "
             "X-Ray at any time; valid: --backend kuberay, or no --notebook", EXIT_INVALID)
    resolved = _request(env, name=name, owner=owner, gpu_pool=gpu_pool, workers=workers,
                        gpus_per_worker=gpus_per_worker, cpus_per_worker=cpus_per_worker,
                        memory=memory, head_cpus=head_cpus, head_memory=head_memory, image=image,
                        namespace=namespace, labels=label, autoscaling=autoscaling,
                        kuberay=which == "kuberay")
    request = resolved.request
    err = render.stderr()
    if which == "local":
        info = _create_local(env, resolved, timeout)
    else:
        kube = KubeOptions(context, in_cluster, namespace)
        with err.status(f"creating RayCluster {request.name}…") as spinner:
            def progress(obj_name: str, status: dict) -> None:
                ready = status.get("readyWorkerReplicas", 0)
                spinner.update(f"RayCluster {obj_name}: {status.get('state') or 'provisioning'} "
                               f"({ready}/{request.workers} workers ready)")

            kr = kuberay_backend(env, kube, on_status=progress)
            with errors_to_exit_codes(), sigterm_as_interrupt():
                info = kr.create_cluster(resolved, wait=wait, timeout_s=timeout,
                                         notebook=notebook)
    _print_infos([info], output)
    if output is render.TableOutput.table:
        err.print(f"cluster {info.name} {'ready' if wait else 'created'} ({which}); "
                  f"dashboard {info.dashboard or 'n/a'}")


def _create_local(env: CliEnv, resolved: ResolvedRequest, timeout: float):
    from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster

    request, pool = resolved.request, resolved.pool
    if pool.has_gpus or request.gpus_per_worker:
        cpu_pools = ", ".join(p.name for p in env.catalog if not p.has_gpus)
        fail(f"invalid --gpu-pool (gpu_pool) = {request.gpu_pool!r}: the local backend has no "
             f"GPUs; valid: {cpu_pools}", EXIT_INVALID)
    err = render.stderr()
    started = time.monotonic()
    single = env.settings.local_single_node
    layout = (f"one node for {request.workers} worker(s)" if single
              else f"head + {request.workers} worker node(s)")
    with err.status(f"starting local Ray cluster {request.name} ({layout})…"), sigterm_as_interrupt():
        try:
            # The node processes run in their own sessions: they outlive this command.
            cluster = LocalRayCluster.start(request, env.settings.state_dir,
                                            start_timeout_s=timeout, single_node=single)
        except BackendError as exc:
            fail(str(exc), EXIT_RUNTIME)
    err.print(f"started in {time.monotonic() - started:.1f}s; stop it with "
              f"`ads-ranking cluster delete {request.name} --yes`")
    return local_info(cluster)


# ---- list / describe / delete -----------------------------------------------------------------
def _queue(info: Any) -> dict[str, Any] | None:
    """Kueue's words, position and time queued of a queued KubeRay row (None otherwise)."""
    queue = info.queue
    return {**queue.to_json(), "summary": queue.summary()} if queue is not None else None


def _print_infos(infos: list, output: render.TableOutput) -> None:
    if output is render.TableOutput.json:
        render.echo(render.dump([{
            "name": i.name, "backend": i.backend, "namespace": i.namespace, "owner": i.owner,
            "pool": i.pool, "gpu_type": i.gpu_type, "workers_ready": i.workers_ready,
            "workers_desired": i.workers_desired, "status": i.status,
            "created_at": i.created_at.isoformat() if i.created_at else None,
            "age": render.age(i.created_at), "dashboard": i.dashboard,
            "kind": i.kind if i.backend == "kuberay" else None, "queue": _queue(i),
        } for i in infos], "json"))
        return
    render.stdout().print(render.table(
        None, ["NAME", "OWNER", "POOL", "GPU TYPE", "WORKERS", "STATUS", "AGE", "DASHBOARD"],
        [[i.name, i.owner, i.pool, i.gpu_type, i.workers, i.status, render.age(i.created_at),
          i.dashboard or "-"] for i in infos]))
    for i in infos:  # Kueue's words are too long for a column
        if (queue := _queue(i)) is not None:
            what = "RayJob (no RayCluster yet)" if i.kind == "RayJob" else "RayCluster"
            render.echo(f"{i.name}: queued {what}: {queue['summary']}")


@app.command("list")
def list_clusters(
    ctx: typer.Context, backend: Optional[str] = BACKEND, namespace: Optional[str] = NAMESPACE,
    context: Optional[str] = CONTEXT, in_cluster: bool = IN_CLUSTER,
    output: render.TableOutput = typer.Option(render.TableOutput.table, "--output", "-o"),
) -> None:
    """Clusters of this backend: name, owner, pool, GPU type, workers, status, age, dashboard."""
    env = cli_env(ctx)
    if backend_choice(env, backend) == "local":
        infos = [local_info(c) for c in local_clusters(env)]
    else:
        kube = KubeOptions(context, in_cluster, namespace)
        with errors_to_exit_codes():
            infos = kuberay_backend(env, kube).list_clusters(kube_namespace(kube, env))
    if not infos and output is render.TableOutput.table:
        render.stderr().print("no clusters")
        return
    _print_infos(infos, output)


@app.command()
def describe(
    ctx: typer.Context, name: str = typer.Argument(..., help="Cluster name."),
    backend: Optional[str] = BACKEND, namespace: Optional[str] = NAMESPACE,
    context: Optional[str] = CONTEXT, in_cluster: bool = IN_CLUSTER,
    output: render.Output = typer.Option(render.Output.yaml, "--output", "-o"),
) -> None:
    """Everything known about one cluster (never its auth token)."""
    env = cli_env(ctx)
    if backend_choice(env, backend) == "local":
        cluster = find_local(env, name)
        info = local_info(cluster)
        data: dict[str, Any] = {
            "name": info.name, "backend": "local", "status": info.status, "owner": info.owner,
            "pool": info.pool, "workers": info.workers,
            "age": render.age(info.created_at), "created_at": cluster.state.created_at,
            "dashboard": info.dashboard, **info.detail,
        }
    else:
        kube = KubeOptions(context, in_cluster, namespace)
        kr = kuberay_backend(env, kube)
        with errors_to_exit_codes():
            info, pods = kr.describe_cluster(kube_namespace(kube, env), name)
        obj = info.detail
        data = {
            "name": info.name, "kind": info.kind, "backend": "kuberay",
            "namespace": info.namespace, "status": info.status, "owner": info.owner,
            "pool": info.pool, "gpu_type": info.gpu_type, "workers": info.workers,
            "age": render.age(info.created_at), "dashboard": info.dashboard,
            "queue": _queue(info),
            "labels": obj["metadata"].get("labels", {}),
            "status_detail": obj.get("status", {}),
            "pods": [{"name": p["metadata"]["name"],
                      "node_type": (p["metadata"].get("labels") or {}).get("ray.io/node-type"),
                      "phase": (p.get("status") or {}).get("phase")} for p in pods],
        }
    render.echo(render.dump(data, output))


@app.command()
def delete(
    ctx: typer.Context, name: str = typer.Argument(..., help="Cluster name."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
    backend: Optional[str] = BACKEND, namespace: Optional[str] = NAMESPACE,
    context: Optional[str] = CONTEXT, in_cluster: bool = IN_CLUSTER,
) -> None:
    """Delete a cluster (local: stops exactly its own processes, by PID)."""
    env = cli_env(ctx)
    which = backend_choice(env, backend)
    if not yes:
        if not sys.stdin.isatty():
            fail("refusing to delete without --yes (stdin is not a terminal)", EXIT_INVALID)
        typer.confirm(f"delete {which} cluster {name}?", abort=True)
    err = render.stderr()
    if which == "local":
        cluster = find_local(env, name)
        with err.status(f"stopping local Ray cluster {name}…"):
            cluster.stop()
        left = cluster.leftover_pids()
        if left:
            fail(f"local cluster {name}: processes still running: {left}", EXIT_RUNTIME)
        err.print(f"deleted local cluster {name}")
        return
    kube = KubeOptions(context, in_cluster, namespace)
    kr = kuberay_backend(env, kube)
    with err.status(f"deleting RayCluster {name}…"), errors_to_exit_codes():
        existed = kr.delete_cluster(kube_namespace(kube, env), name)
    if not existed:
        fail(f"RayCluster {kube_namespace(kube, env)}/{name} not found", EXIT_RUNTIME)
    err.print(f"deleted RayCluster {kube_namespace(kube, env)}/{name}")
