"""``ads-ranking job``: submit a Ray job to a running cluster, follow its log, watch, stop it.

Local backend: through the dashboard of a local cluster (``--cluster NAME``, or the only one
running, or - for an id - whichever running cluster knows it); the job id is Ray's
submission id. KubeRay: a RayJob with ``clusterSelector`` on one of our RayClusters; the job
id is the RayJob's name, and its log is the submitter pod's.

Environment variables given with ``--env`` end up in the job's runtime env (and, on KubeRay,
in the RayJob object): never pass secrets that way. They are not printed.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
import uuid
from typing import Optional

import typer

from ads_ranking_pipelines.backends.base import JobSpec, JobState, JobStatus
from ads_ranking_pipelines.cli import render
from ads_ranking_pipelines.cli.backend_factory import (
    CliEnv,
    KubeOptions,
    backend_choice,
    cli_env,
    errors_to_exit_codes,
    job_api,
    kube_namespace,
    kuberay_backend,
    local_cluster_for_job,
    make_env,
)
from ads_ranking_pipelines.cli.common import EXIT_INVALID, EXIT_RUNTIME, fail

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Ray jobs on a running cluster: submit, logs, status, stop.")


@app.callback()
def _settings(ctx: typer.Context) -> None:
    ctx.obj = make_env(os.environ)


CLUSTER = typer.Option(None, "--cluster", "-c", help="Cluster name; default: the only running "
                       "cluster (local: or the one that knows the job id).")
BACKEND = typer.Option(None, "--backend", help="local or kuberay; default $ADS_RANKING_BACKEND "
                       "or local.")
NAMESPACE = typer.Option(None, "--namespace", "-n", help="Kubernetes namespace (kuberay).")
CONTEXT = typer.Option(None, "--context", help="kubeconfig context (kuberay).")
IN_CLUSTER = typer.Option(False, "--in-cluster", help="Use the pod's service account (kuberay).")


def _kuberay_cluster(env: CliEnv, kube: KubeOptions, name: Optional[str]) -> str:
    if name:
        return name
    with errors_to_exit_codes():
        clusters = kuberay_backend(env, kube).list_clusters(kube_namespace(kube, env))
    standalone = [c for c in clusters if "ray.io/originated-from-crd" not in
                  (c.detail.get("metadata", {}).get("labels") or {})]
    if len(standalone) == 1:
        return standalone[0].name
    fail("pass --cluster (RayClusters in "
         f"{kube_namespace(kube, env)}: {', '.join(c.name for c in standalone) or 'none'})",
         EXIT_INVALID)


def _parse_env(values: Optional[list[str]]) -> dict[str, str]:
    env = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail("invalid --env: expected KEY=VALUE (value not shown)", EXIT_INVALID)
        env[key] = value
    return env


@app.command(context_settings={"allow_interspersed_args": False})
def submit(
    ctx: typer.Context,
    entrypoint: list[str] = typer.Argument(..., help="The command, after `--`."),
    cluster: Optional[str] = CLUSTER, backend: Optional[str] = BACKEND,
    working_dir: Optional[str] = typer.Option(None, "--working-dir", help="Directory uploaded "
                                              "as the job's working dir (kuberay: a remote URI)."),
    submission_id: Optional[str] = typer.Option(None, "--submission-id", help="Ray job id; "
                                                "default: a fresh one."),
    env_var: Optional[list[str]] = typer.Option(None, "--env", help="KEY=VALUE for the job "
                                                "(repeatable; no secrets)."),
    owner: Optional[str] = typer.Option(None, "--owner", help="Owner label (kuberay)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Follow the log; exit 1 unless "
                                "the job succeeds."),
    namespace: Optional[str] = NAMESPACE, context: Optional[str] = CONTEXT,
    in_cluster: bool = IN_CLUSTER,
) -> None:
    """Submit ENTRYPOINT as a Ray job; prints the job id on stdout."""
    env = cli_env(ctx)
    which = backend_choice(env, backend)
    if not entrypoint:
        fail("invalid entrypoint: empty; valid: a command after `--`", EXIT_INVALID)
    command = entrypoint[0] if len(entrypoint) == 1 else shlex.join(entrypoint)
    if working_dir and which == "local":
        if not os.path.isdir(working_dir):
            fail(f"invalid --working-dir (working_dir) = {working_dir!r}: not a directory; "
                 "valid: an existing directory", EXIT_INVALID)
        working_dir = os.path.abspath(working_dir)
    job = JobSpec(submission_id=submission_id or f"cli-{uuid.uuid4().hex[:12]}",
                  entrypoint=command, env_vars=_parse_env(env_var), working_dir=working_dir,
                  metadata={"submitted_by": "ads-ranking-cli"})
    err = render.stderr()
    kube = KubeOptions(context, in_cluster, namespace)
    if which == "local":
        target = local_cluster_for_job(env, cluster)
        with errors_to_exit_codes():
            job_id = job_api(target).submit(job)
        where = f"local cluster {target.name} ({target.state.dashboard_url})"
    else:
        name = _kuberay_cluster(env, kube, cluster)
        kr = kuberay_backend(env, kube)
        with errors_to_exit_codes():
            job_id = kr.submit_to_cluster(kube_namespace(kube, env), name, job,
                                          owner=owner or env.default_owner)
        where = f"RayCluster {kube_namespace(kube, env)}/{name}"
    render.echo(job_id)
    err.print(f"submitted {job.submission_id} to {where}; follow it with "
              f"`ads-ranking job logs {job_id} --follow`")
    if follow:
        _stream(env, which, job_id, cluster, kube, True)
        status = _status(env, which, job_id, cluster, kube, wait_terminal=True)
        err.print(f"job {job_id}: {status.state.value} {status.message}".rstrip())
        if status.state is not JobState.SUCCEEDED:
            raise typer.Exit(EXIT_RUNTIME)


def _stream(env: CliEnv, which: str, job_id: str, cluster: Optional[str], kube: KubeOptions,
            follow: bool) -> None:
    with errors_to_exit_codes():
        if which == "local":
            lines = job_api(local_cluster_for_job(env, cluster, job_id)).logs(job_id, follow=follow)
        else:
            lines = kuberay_backend(env, kube).job_logs(kube_namespace(kube, env), job_id, follow=follow)
        for line in lines:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def _status(env: CliEnv, which: str, job_id: str, cluster: Optional[str], kube: KubeOptions,
            wait_terminal: bool = False) -> JobStatus:
    deadline = time.monotonic() + 60
    with errors_to_exit_codes():
        if which == "local":
            api = job_api(local_cluster_for_job(env, cluster, job_id))
            get = lambda: api.status(job_id)  # noqa: E731
        else:
            kr = kuberay_backend(env, kube)
            get = lambda: kr.job_status(kube_namespace(kube, env), job_id)  # noqa: E731
        try:
            status = get()
            while wait_terminal and not status.state.terminal and time.monotonic() < deadline:
                time.sleep(0.5)
                status = get()
        except RuntimeError as exc:  # the Ray SDK: "Job … does not exist"
            if isinstance(exc, typer.Exit):
                raise
            fail(f"job {job_id}: {exc}", EXIT_RUNTIME)
    return status


@app.command()
def logs(
    ctx: typer.Context, job_id: str = typer.Argument(..., help="Job id from `job submit`."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep streaming until the job ends."),
    cluster: Optional[str] = CLUSTER, backend: Optional[str] = BACKEND,
    namespace: Optional[str] = NAMESPACE, context: Optional[str] = CONTEXT,
    in_cluster: bool = IN_CLUSTER,
) -> None:
    """Print the job's driver log (with --follow, until the job is over)."""
    env = cli_env(ctx)
    _stream(env, backend_choice(env, backend), job_id, cluster,
            KubeOptions(context, in_cluster, namespace), follow)


@app.command()
def status(
    ctx: typer.Context, job_id: str = typer.Argument(..., help="Job id from `job submit`."),
    cluster: Optional[str] = CLUSTER, backend: Optional[str] = BACKEND,
    namespace: Optional[str] = NAMESPACE, context: Optional[str] = CONTEXT,
    in_cluster: bool = IN_CLUSTER,
    output: render.TableOutput = typer.Option(render.TableOutput.table, "--output", "-o"),
) -> None:
    """The job's state (QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED) and message;
    QUEUED (Kueue has not admitted it) with Kueue's words, position and time queued."""
    env = cli_env(ctx)
    st = _status(env, backend_choice(env, backend), job_id, cluster,
                 KubeOptions(context, in_cluster, namespace))
    if output is render.TableOutput.json:
        render.echo(render.dump({"job_id": job_id, "state": st.state.value,
                                 "message": st.message}, "json"))
    else:
        render.echo(f"{st.state.value}\t{st.message}".rstrip())


@app.command()
def stop(
    ctx: typer.Context, job_id: str = typer.Argument(..., help="Job id from `job submit`."),
    cluster: Optional[str] = CLUSTER, backend: Optional[str] = BACKEND,
    namespace: Optional[str] = NAMESPACE, context: Optional[str] = CONTEXT,
    in_cluster: bool = IN_CLUSTER,
) -> None:
    """Stop the job (KubeRay: delete its RayJob; KubeRay stops the Ray job)."""
    env = cli_env(ctx)
    which = backend_choice(env, backend)
    with errors_to_exit_codes():
        if which == "local":
            job_api(local_cluster_for_job(env, cluster, job_id)).stop(job_id)
        else:
            kube = KubeOptions(context, in_cluster, namespace)
            if not kuberay_backend(env, kube).stop_job(kube_namespace(kube, env), job_id):
                fail(f"RayJob {kube_namespace(kube, env)}/{job_id} not found", EXIT_RUNTIME)
    render.stderr().print(f"stopped {job_id}")
