"""The Dagster provisioning resource on the KubeRay backend, against the fake API server.

``KubeRayResource`` reaches the fake through the real ``kubernetes``
client and a kubeconfig context (the way a deployment reaches a real cluster). A Dagster asset
runs a Ray job over that session with :func:`run_ray_job`; the fake's submitter pod prints
what the job's driver would: Dagster Pipes messages (opened, a log line, metrics and the
result, closed) between plain lines. After every run - a success or a failed RayJob - the
resource's ``teardown_after_execution`` has deleted everything the run created.
"""

# No ``from __future__ import annotations``: Dagster reads the asset's context annotation.
import json
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster_pipes import PIPES_PROTOCOL_VERSION, PIPES_PROTOCOL_VERSION_FIELD, decode_param

from ads_ranking_pipelines.backends.base import JobSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.pipes import run_ray_job
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)

NS = "ads-ranking"
CODE_LOCATION = "ads_ranking_pipelines"
KUBE_TOKEN = "not-a-real-token"  # the kubeconfig's credential (see write_kubeconfig)
H100 = TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, num_workers=4)
CPU = TrainingParams(gpu_pool="local", gpus_per_worker=0, num_workers=1)
JOB_ENV = {"OMP_NUM_THREADS": "1"}
PLAIN_LINE = "loading 3 days of impressions"
PIPES_LOG = "epoch 1/2 done on 4 workers"
RESULT = {"final_loss": 0.4213, "rows": 3000, "samples_per_s": 1234.5}


def pipes_line(method: str, params: dict[str, Any] | None) -> str:
    """One line of the driver's stdout as ``dagster_pipes`` writes it."""
    return json.dumps({PIPES_PROTOCOL_VERSION_FIELD: PIPES_PROTOCOL_VERSION, "method": method,
                       "params": params})


DRIVER_LOG = (
    pipes_line("opened", {"extras": {}}),
    PLAIN_LINE,
    pipes_line("log", {"message": PIPES_LOG, "level": "INFO"}),
    pipes_line("report_custom_message",
               {"payload": {"kind": "epoch", "values": {"epoch": 1, "loss": 0.52}}}),
    pipes_line("report_custom_message", {"payload": {"kind": "result", "values": RESULT}}),
    pipes_line("closed", {}),
)


IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0-gpu"


def make_resource(fake: FakeKubeApiServer, tmp_path) -> RayClusterResource:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake, context="fake")
    return KubeRayResource(kube_config_file=kubeconfig, kube_context="fake", namespace=NS,
                           storage_home="gs://ads-ranking-test/home", image=IMAGE,
                           replica_failure_grace_s=1.0)  # a quota failure fails in seconds


def train_asset(fake: FakeKubeApiServer, params: TrainingParams, seen: dict[str, Any]):
    """An asset that provisions through the resource and runs one Ray job over Pipes; it
    records what the fake holds while the session is still open."""

    @dg.asset(name="kuberay_train")
    def kuberay_train(context: dg.AssetExecutionContext,
                      ray_cluster: RayClusterResource) -> dg.MaterializeResult:
        request = ray_cluster.cluster_request(params, context.run.run_id)
        seen["request"] = request.request
        session = ray_cluster.session(request, context.log, run_id=context.run.run_id,
                                      code_location=CODE_LOCATION)
        job = JobSpec(submission_id=f"train-{context.run.run_id[:8]}",
                      entrypoint="python -m ads_ranking_pipelines.ray_jobs.train", env_vars=JOB_ENV)
        outcome = run_ray_job(context, session, job, poll_interval_s=0.05)
        seen["outcome"] = outcome
        seen["rayjob"] = fake.get(RAYJOBS, NS, outcome.job_id)
        seen["rayclusters"] = [fake.get(RAYCLUSTERS, NS, n) for n in fake.names(RAYCLUSTERS, NS)]
        seen["pods"] = fake.pod_names(NS)
        return dg.MaterializeResult(metadata=dict(outcome.result))

    return kuberay_train


def materialize(fake: FakeKubeApiServer, tmp_path, params: TrainingParams,
                seen: dict[str, Any]) -> tuple[dg.ExecuteInProcessResult, list[str]]:
    """Run the asset; the result and the run's log messages (the event log's user messages)."""
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([train_asset(fake, params, seen)], instance=instance,
                            resources={"ray_cluster": make_resource(fake, tmp_path)},
                            raise_on_error=False)
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    return result, messages


def assert_nothing_left(fake: FakeKubeApiServer) -> None:
    assert fake.created, "the run created nothing in the fake"
    assert fake.leftovers() == []
    assert fake.pod_names() == []
    assert fake.names(RAYJOBS) == [] and fake.names(RAYCLUSTERS) == []
    assert not fake.rejected, fake.rejected


@pytest.mark.slow
def test_gpu_request_reaches_the_rayjob(fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    fake_apiserver.scenario = Scenario(log_lines=DRIVER_LOG)
    seen: dict[str, Any] = {}
    result, messages = materialize(fake_apiserver, tmp_path, H100, seen)
    assert result.success, messages
    request, rayjob = seen["request"], seen["rayjob"]
    assert (request.gpu_pool, request.workers, request.gpus_per_worker) == ("h100-80gb", 4, 8)

    # The one RayJob the run created, in the resource's namespace, labelled with the run id.
    assert [key for key in fake_apiserver.created if key[0] == RAYJOBS] == \
        [(RAYJOBS, NS, seen["outcome"].job_id)]
    labels = rayjob["metadata"]["labels"]
    assert labels["dagster/run-id"] == result.run_id
    assert labels["dagster/code-location"] == CODE_LOCATION

    # Its workers: 4 pods on H100 nodes, 8 GPUs each (requests = limits), the GPU image.
    (group,) = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 4
    pod = group["template"]
    assert pod["metadata"]["labels"]["dagster/run-id"] == result.run_id
    assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    (worker,) = pod["spec"]["containers"]
    assert worker["resources"]["requests"]["nvidia.com/gpu"] == "8"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert worker["image"] == IMAGE
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert "nvidia.com/gpu" not in head["containers"][0]["resources"].get("limits", {})
    # The toy operator made that cluster with 4 worker pods (and a head and a submitter).
    (cluster,) = fake_apiserver.operator_made
    assert cluster["metadata"]["labels"]["ray.io/originated-from-cr-name"] == rayjob["metadata"]["name"]
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 4

    # The Pipes bootstrap travels in runtimeEnvYAML, next to the job's own env vars, and
    # nothing else does: no credential of the kubeconfig anywhere in the object.
    env_vars = yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"])["env_vars"]
    assert set(env_vars) == {*JOB_ENV, "DAGSTER_PIPES_CONTEXT", "DAGSTER_PIPES_MESSAGES"}
    assert env_vars["OMP_NUM_THREADS"] == "1"
    context = decode_param(env_vars["DAGSTER_PIPES_CONTEXT"])["data"]
    assert context["run_id"] == result.run_id
    assert context["asset_keys"] == ["kuberay_train"]
    assert decode_param(env_vars["DAGSTER_PIPES_MESSAGES"]) == {"stdio": "stdout"}
    assert KUBE_TOKEN not in json.dumps(rayjob)
    # The bootstrap values are in the RayJob only: never in the run's log.
    log_text = "\n".join(messages)
    assert env_vars["DAGSTER_PIPES_CONTEXT"] not in log_text
    assert KUBE_TOKEN not in log_text

    assert_nothing_left(fake_apiserver)
    assert (RAYJOBS, NS, rayjob["metadata"]["name"]) in fake_apiserver.deleted


@pytest.mark.slow
def test_pipes_messages_and_driver_lines_reach_the_run(fake_apiserver: FakeKubeApiServer,
                                                       tmp_path) -> None:
    fake_apiserver.scenario = Scenario(log_lines=DRIVER_LOG)
    seen: dict[str, Any] = {}
    result, messages = materialize(fake_apiserver, tmp_path, CPU, seen)
    assert result.success, messages

    # A plain driver line and a Pipes log message are both entries of the run's event log;
    # the Pipes protocol lines themselves are not.
    assert PLAIN_LINE in messages
    assert PIPES_LOG in messages
    assert "[pipes] external process successfully opened dagster pipes." in messages
    assert not any(PIPES_PROTOCOL_VERSION_FIELD in m for m in messages)
    outcome = seen["outcome"]
    assert outcome.lines_forwarded == 1

    # The result came back over Pipes and became the materialization's metadata.
    assert outcome.result == RESULT
    assert [m["kind"] for m in outcome.custom_messages] == ["epoch", "result"]
    (materialization,) = result.asset_materializations_for_node("kuberay_train")
    assert {k: v.value for k, v in materialization.metadata.items()} == RESULT
    # The epoch metrics were recorded live, as an observation of the asset.
    (observation,) = result.asset_observations_for_node("kuberay_train")
    assert observation.metadata["loss"].value == 0.52

    assert_nothing_left(fake_apiserver)


@pytest.mark.parametrize("outcome,reason", [
    ("cluster_failed", "exceeded quota: gpu-quota"),
    ("app_failed", "AppFailed: Job entrypoint command failed with exit code 1"),
])
@pytest.mark.slow
def test_failed_rayjob_fails_the_run_and_leaves_nothing(fake_apiserver: FakeKubeApiServer,
                                                        tmp_path, outcome: str,
                                                        reason: str) -> None:
    # The app failure comes after the resource's first status polls (every 2 s): the job was
    # running by then, so its driver log is followed into the run before the failure.
    fake_apiserver.scenario = Scenario(outcome=outcome, log_lines=(PLAIN_LINE, "Traceback"),
                                       hold_running_s=4.0)
    seen: dict[str, Any] = {}
    result, messages = materialize(fake_apiserver, tmp_path, CPU, seen)
    assert not result.success
    failure = result.failure_data_for_node("kuberay_train")
    assert failure is not None and reason in failure.error.to_string()
    assert "outcome" not in seen
    if outcome == "app_failed":  # the driver ran: its log reached the run before the failure
        assert PLAIN_LINE in messages and "Traceback" in messages
    assert [key[0] for key in fake_apiserver.created] == [RAYJOBS]
    assert_nothing_left(fake_apiserver)
