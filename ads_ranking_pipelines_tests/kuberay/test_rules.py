"""The operator-only rules: each mutation of a valid manifest must fail, naming the field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from ads_ranking_pipelines.kuberay import rayjob, rules
from ads_ranking_pipelines.kuberay.rules import RuleError, check_raycluster, check_rayjob
from ads_ranking_pipelines_tests.kuberay.cases import CASES
from ads_ranking_pipelines_tests.kuberay.golden import render

Mutation = Callable[[dict[str, Any]], None]


def _job() -> dict[str, Any]:
    """A valid RayJob in the ``shutdown`` cleanup mode (shutdownAfterJobFinishes + TTL), the
    base most mutations below start from."""
    job = copy.deepcopy(render(CASES[0])["rayjob"])
    spec = job["spec"]
    del spec["deletionStrategy"]
    spec.update(rayjob.cleanup_fields("shutdown", CASES[0].request.ttl_seconds_after_finished))
    return job


def test_the_default_deletion_rules_pass() -> None:
    check_rayjob(copy.deepcopy(render(CASES[0])["rayjob"]))


def _cluster() -> dict[str, Any]:
    return copy.deepcopy(render(CASES[0])["raycluster"])


def _set(path: str, value: Any) -> Mutation:
    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obj
        for key in parents:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[last] = value
    return mutate


def _drop(path: str) -> Mutation:
    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obj
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        del node[last]
    return mutate


def _all(*mutations: Mutation) -> Mutation:
    def mutate(obj: dict[str, Any]) -> None:
        for m in mutations:
            m(obj)
    return mutate


SELECTOR = _set("spec.clusterSelector", {"ray.io/cluster": "shared-ranker"})
SELECTOR_ONLY = _all(SELECTOR, _drop("spec.rayClusterSpec"), _set("spec.shutdownAfterJobFinishes", False),
                     _set("spec.ttlSecondsAfterFinished", 0))
# Mutation paths use ".0" for list items; error fields use "[0]" like the operator's messages.
WG, WG_F = "spec.rayClusterSpec.workerGroupSpecs.0", "spec.rayClusterSpec.workerGroupSpecs[0]"
HEAD_ENV = "spec.rayClusterSpec.headGroupSpec.template.spec.containers.0.env"
HEAD_ENV_F = "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].env"

RAYJOB_CASES: list[tuple[str, Mutation, str]] = [
    ("unknown submission mode", _set("spec.submissionMode", "K8sMode"), "spec.submissionMode"),
    ("suspend without shutdown", _all(_set("spec.suspend", True),
                                      _set("spec.shutdownAfterJobFinishes", False),
                                      _set("spec.ttlSecondsAfterFinished", 0)), "spec.suspend"),
    ("ttl without shutdown", _set("spec.shutdownAfterJobFinishes", False),
     "spec.ttlSecondsAfterFinished"),
    ("negative ttl", _set("spec.ttlSecondsAfterFinished", -1), "spec.ttlSecondsAfterFinished"),
    ("selector with rayClusterSpec", _all(SELECTOR, _set("spec.shutdownAfterJobFinishes", False),
                                          _set("spec.ttlSecondsAfterFinished", 0)),
     "spec.rayClusterSpec"),
    ("selector with shutdown", _all(SELECTOR, _drop("spec.rayClusterSpec")),
     "spec.shutdownAfterJobFinishes"),
    ("selector with suspend", _all(SELECTOR_ONLY, _set("spec.suspend", True)), "spec.suspend"),
    ("selector without cluster name", _all(SELECTOR_ONLY, _set("spec.clusterSelector", {"a": "b"})),
     "spec.clusterSelector[ray.io/cluster]"),
    ("selector with backoffLimit", _all(SELECTOR_ONLY, _set("spec.backoffLimit", 2)),
     "spec.backoffLimit"),
    ("selector in SidecarMode", _all(SELECTOR_ONLY, _set("spec.submissionMode", "SidecarMode"),
                                     _drop("spec.submitterPodTemplate")), "spec.submissionMode"),
    ("neither spec nor selector", _drop("spec.rayClusterSpec"), "spec.rayClusterSpec"),
    ("negative backoffLimit", _set("spec.backoffLimit", -1), "spec.backoffLimit"),
    ("InteractiveMode retries", _all(_set("spec.submissionMode", "InteractiveMode"),
                                     _drop("spec.submitterPodTemplate"),
                                     _set("spec.backoffLimit", 1)), "spec.backoffLimit"),
    ("negative submitter backoffLimit", _set("spec.submitterConfig", {"backoffLimit": -1}),
     "spec.submitterConfig.backoffLimit"),
    ("SidecarMode with submitter template", _set("spec.submissionMode", "SidecarMode"),
     "spec.submitterPodTemplate"),
    ("SidecarMode with submitterConfig", _all(_set("spec.submissionMode", "SidecarMode"),
                                              _drop("spec.submitterPodTemplate"),
                                              _set("spec.submitterConfig", {"backoffLimit": 1})),
     "spec.submitterConfig"),
    ("SidecarMode head restartPolicy", _all(
        _set("spec.submissionMode", "SidecarMode"), _drop("spec.submitterPodTemplate"),
        _set("spec.rayClusterSpec.headGroupSpec.template.spec.restartPolicy", "Always")),
     "spec.rayClusterSpec.headGroupSpec.template.spec.restartPolicy"),
    ("HTTPMode with submitter template", _set("spec.submissionMode", "HTTPMode"),
     "spec.submitterPodTemplate"),
    ("submitter restartPolicy Always", _set("spec.submitterPodTemplate.spec.restartPolicy", "Always"),
     "spec.submitterPodTemplate.spec.restartPolicy"),
    ("submitter without containers", _set("spec.submitterPodTemplate.spec.containers", []),
     "spec.submitterPodTemplate.spec.containers"),
    ("zero activeDeadlineSeconds", _set("spec.activeDeadlineSeconds", 0), "spec.activeDeadlineSeconds"),
    ("negative preRunningDeadlineSeconds", _set("spec.preRunningDeadlineSeconds", -5),
     "spec.preRunningDeadlineSeconds"),
    ("empty entrypoint", _set("spec.entrypoint", ""), "spec.entrypoint"),
    ("runtimeEnvYAML not a mapping", _set("spec.runtimeEnvYAML", "- a\n- b\n"), "spec.runtimeEnvYAML"),
    ("runtimeEnvYAML not YAML", _set("spec.runtimeEnvYAML", "a: [b"), "spec.runtimeEnvYAML"),
    ("secret in runtime env", _set("spec.runtimeEnvYAML", "env_vars:\n  WANDB_API_KEY: abc\n"),
     "spec.runtimeEnvYAML.env_vars.WANDB_API_KEY"),
    ("deletionRules with shutdown", _set("spec.deletionStrategy", {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED"}}]}),
     "spec.deletionStrategy.deletionRules"),
    ("half a legacy deletion policy", _all(_set("spec.shutdownAfterJobFinishes", False),
                                           _set("spec.ttlSecondsAfterFinished", 0),
                                           _set("spec.deletionStrategy",
                                                {"onSuccess": {"policy": "DeleteCluster"}})),
     "spec.deletionStrategy"),
    ("k8s token auth in a RayJob", _set("spec.rayClusterSpec.authOptions.enableK8sTokenAuth", True),
     "spec.rayClusterSpec.authOptions.enableK8sTokenAuth"),
    ("upgradeStrategy in a RayJob", _set("spec.rayClusterSpec.upgradeStrategy", {"type": "Recreate"}),
     "spec.rayClusterSpec.upgradeStrategy"),
    ("name with a leading digit", _set("metadata.name", "1ranker"), "metadata.name"),
    ("name too long for a RayJob", _set("metadata.name", "r" * 48), "metadata.name"),
    ("min > max replicas", _set(f"{WG}.minReplicas", 5), f"{WG_F}.minReplicas"),
    ("secret env var inlined", _set(HEAD_ENV, [{"name": "RAY_AUTH_TOKEN", "value": "hunter2"}]),
     f"{HEAD_ENV_F}[0].value"),
    ("submitter secret inlined", _set("spec.submitterPodTemplate.spec.containers.0.env",
                                      [{"name": "DB_PASSWORD", "value": "hunter2"}]),
     "spec.submitterPodTemplate.spec.containers[0].env[0].value"),
]


@pytest.mark.parametrize("mutate,field", [(m, f) for _, m, f in RAYJOB_CASES],
                         ids=[name for name, _, _ in RAYJOB_CASES])
def test_rayjob_rule(mutate: Mutation, field: str) -> None:
    job = _job()
    check_rayjob(job)
    mutate(job)
    with pytest.raises(RuleError) as info:
        check_rayjob(job)
    assert info.value.field == field, str(info.value)
    assert field in str(info.value)
    assert "<redacted>" in str(info.value) or "hunter2" not in str(info.value)


CW, CW_F = "spec.workerGroupSpecs.0", "spec.workerGroupSpecs[0]"
CLUSTER_CASES: list[tuple[str, Mutation, str]] = [
    ("name with uppercase", _set("metadata.name", "Ranker"), "metadata.name"),
    ("name too long", _set("metadata.name", "r" * 54), "metadata.name"),
    ("no head container", _set("spec.headGroupSpec.template.spec.containers", []),
     "spec.headGroupSpec.template.spec.containers"),
    ("no worker container", _set(f"{CW}.template.spec.containers", []),
     f"{CW_F}.template.spec.containers"),
    ("missing minReplicas without autoscaler", _drop(f"{CW}.minReplicas"), f"{CW_F}.minReplicas"),
    ("negative maxReplicas", _set(f"{CW}.maxReplicas", -1), f"{CW_F}.maxReplicas"),
    ("replicas above max", _set(f"{CW}.replicas", 9), f"{CW_F}.replicas"),
    ("suspended worker group", _set(f"{CW}.suspend", True), f"{CW_F}.suspend"),
    ("idleTimeoutSeconds without autoscaler v2", _set(f"{CW}.idleTimeoutSeconds", 30),
     f"{CW_F}.idleTimeoutSeconds"),
    ("priority without autoscaler v2", _set(f"{CW}.priority", 3), f"{CW_F}.priority"),
    ("empty group name", _set(f"{CW}.groupName", ""), f"{CW_F}.groupName"),
    ("duplicate group name", lambda o: o["spec"]["workerGroupSpecs"].append(
        copy.deepcopy(o["spec"]["workerGroupSpecs"][0])), "spec.workerGroupSpecs[1].groupName"),
    ("rayStartParams labels", _set(f"{CW}.rayStartParams.labels", "a=b"),
     f"{CW_F}.rayStartParams.labels"),
    ("resources twice", _all(_set("spec.headGroupSpec.resources", {"CPU": "1"})),
     "spec.headGroupSpec.resources"),
    ("autoscaler v2 env without autoscaler",
     _set("spec.headGroupSpec.template.spec.containers.0.env",
          [{"name": "RAY_enable_autoscaler_v2", "value": "1"}]), "spec.enableInTreeAutoscaling"),
    ("negative autoscaler idle timeout", _set("spec.autoscalerOptions.idleTimeoutSeconds", -1),
     "spec.autoscalerOptions.idleTimeoutSeconds"),
    ("token auth with an old Ray", _set("spec.rayVersion", "2.51.0"), "spec.rayVersion"),
    ("token auth without rayVersion", _drop("spec.rayVersion"), "spec.rayVersion"),
    ("unknown auth mode", _set("spec.authOptions.mode", "oauth"), "spec.authOptions.mode"),
    ("k8s token auth without token mode", _all(_set("spec.authOptions.mode", "disabled"),
                                               _set("spec.authOptions.enableK8sTokenAuth", True)),
     "spec.authOptions.mode"),
    ("k8s token auth with secretName", _all(_set("spec.authOptions.enableK8sTokenAuth", True),
                                            _set("spec.authOptions.secretName", "tok")),
     "spec.authOptions.secretName"),
    ("feature-gated networkPolicy", _set("spec.networkPolicy", {"mode": "DenyAll"}),
     "spec.networkPolicy"),
    ("redis password in start params", _set("spec.headGroupSpec.rayStartParams.redis-password", "pw"),
     "spec.headGroupSpec.rayStartParams.redis-password"),
]


@pytest.mark.parametrize("mutate,field", [(m, f) for _, m, f in CLUSTER_CASES],
                         ids=[name for name, _, _ in CLUSTER_CASES])
def test_raycluster_rule(mutate: Mutation, field: str) -> None:
    cluster = _cluster()
    check_raycluster(cluster)
    mutate(cluster)
    with pytest.raises(RuleError) as info:
        check_raycluster(cluster)
    assert info.value.field == field, str(info.value)


def test_valid_variants_pass() -> None:
    selector_job = _job()
    SELECTOR_ONLY(selector_job)
    del selector_job["spec"]["submitterPodTemplate"]
    selector_job["spec"]["submissionMode"] = "HTTPMode"
    check_rayjob(selector_job)

    interactive = _job()
    interactive["spec"].update(submissionMode="InteractiveMode", entrypoint="")
    del interactive["spec"]["submitterPodTemplate"]
    check_rayjob(interactive)

    suspended = _job()
    suspended["spec"]["suspend"] = True
    check_rayjob(suspended)

    secret_ref = _job()
    secret_ref["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    check_rayjob(secret_ref)

    autoscaled = _cluster()
    autoscaled["spec"]["enableInTreeAutoscaling"] = True
    autoscaled["spec"]["autoscalerOptions"] = {"version": "v2"}
    autoscaled["spec"]["workerGroupSpecs"][0].update(idleTimeoutSeconds=30, priority=1)
    del autoscaled["spec"]["workerGroupSpecs"][0]["minReplicas"]
    check_raycluster(autoscaled)


def test_submission_modes_are_the_operators() -> None:
    assert rules.SUBMISSION_MODES == ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
    assert rules.MAX_RAYJOB_NAME == 47


def test_rule_error_is_a_value_error_with_field_value_valid() -> None:
    job = _job()
    job["spec"]["submissionMode"] = "Batch"
    with pytest.raises(ValueError) as info:
        check_rayjob(job)
    err = info.value
    assert isinstance(err, RuleError)
    assert (err.field, err.value) == ("spec.submissionMode", "Batch")
    assert list(err.valid) == list(rules.SUBMISSION_MODES)
    for part in ("spec.submissionMode", "'Batch'", "K8sJobMode", "SidecarMode"):
        assert part in str(err)
