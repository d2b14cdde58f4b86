"""Rules the KubeRay v1.7 operator enforces that the CRD schema does not.

The CRDs carry no enum for ``submissionMode`` and nothing that links ``suspend``,
``shutdownAfterJobFinishes``, ``ttlSecondsAfterFinished``, ``clusterSelector`` and
``backoffLimit``; the operator checks them when it reconciles (``ValidateRayJobSpec`` and
``ValidateRayClusterSpec`` in ray-operator/controllers/ray/utils/validation.go) and marks the
object failed, long after ``kubectl apply`` said yes. These checks run on rendered manifests
(plain dicts) before anything is sent, and raise :class:`RuleError` naming the field.

A few rules are stricter than the operator, marked "(template)": they reject combinations
the operator tolerates but silently ignores, or that need operator feature gates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from ads_ranking_pipelines.config.validation import RequestError

SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
DEFAULT_SUBMISSION_MODE = "K8sJobMode"
AUTH_MODES = ("disabled", "token")
MIN_RAY_VERSION_TOKEN_AUTH = (2, 52, 0)
MIN_RAY_VERSION_K8S_TOKEN_AUTH = (2, 55, 0)
MAX_RAYCLUSTER_NAME = 53
MAX_RAYJOB_NAME = MAX_RAYCLUSTER_NAME - 6
CLUSTER_SELECTOR_KEY = "ray.io/cluster"
RAY_START_RESOURCE_KEYS = ("num-cpus", "num-gpus", "memory", "resources")
SUBMITTER_RESTART_POLICIES = ("Never", "OnFailure")  # a Kubernetes Job allows only these
AUTOSCALER_V2_ENV = "RAY_enable_autoscaler_v2"
# Spec fields that only work behind operator feature gates that are off by default.
FEATURE_GATED_CLUSTER_FIELDS = {
    "networkPolicy": "RayClusterNetworkPolicy",
    "tlsOptions": "RayClusterMTLS",
    "historyServerOptions": "RayClusterHistoryServer",
}

# Environment variable names that hold credentials: their values must come from a Secret
# (valueFrom.secretKeyRef), never sit in a manifest that is logged, stored and labelled.
SECRET_ENV_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|CREDENTIAL|PRIVATE_?KEY",
                             re.IGNORECASE)
SECRET_RAY_START_PARAMS = ("redis-password",)

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


class RuleError(RequestError):
    """A manifest the KubeRay operator would reject. ``field`` is a path into the manifest,
    e.g. ``spec.ttlSecondsAfterFinished``."""


def _fail(field: str, value: object, valid: object, reason: str) -> None:
    raise RuleError(field, value, valid, reason)


def _ray_version(text: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(text or "")
    if not match:
        return None
    return int(match[1]), int(match[2]), int(match[3] or 0)


def _env(container: Mapping[str, Any], name: str) -> str | None:
    for var in container.get("env") or ():
        if var.get("name") == name:
            return str(var.get("value", ""))
    return None


def _autoscaler_v2(spec: Mapping[str, Any]) -> bool:
    if (spec.get("autoscalerOptions") or {}).get("version") == "v2":
        return True
    head = _containers(spec.get("headGroupSpec") or {})
    return bool(head) and _env(head[0], AUTOSCALER_V2_ENV) in ("1", "true")


def _containers(group: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(((group.get("template") or {}).get("spec") or {}).get("containers") or [])


def check_name(name: object, *, kind: str, field: str = "metadata.name") -> None:
    limit = MAX_RAYJOB_NAME if kind == "RayJob" else MAX_RAYCLUSTER_NAME
    if not isinstance(name, str) or len(name) > limit or not _DNS1035.match(name):
        _fail(field, name, f"a DNS-1035 label of at most {limit} characters",
              f"KubeRay requires {kind} names to be DNS-1035 labels")


def check_raycluster_spec(spec: Mapping[str, Any], path: str = "spec") -> None:
    """``ValidateRayClusterSpec``: the operator's checks of a RayCluster spec."""
    autoscaling = bool(spec.get("enableInTreeAutoscaling"))
    head = spec.get("headGroupSpec") or {}
    head_containers = _containers(head)
    if not head_containers:
        _fail(f"{path}.headGroupSpec.template.spec.containers", [], "at least one container",
              "the head group has no container")
    _check_group_params(head, f"{path}.headGroupSpec")

    names: set[str] = set()
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        gpath = f"{path}.workerGroupSpecs[{i}]"
        name = group.get("groupName")
        if not name:
            _fail(f"{gpath}.groupName", name, "a non-empty name", "every worker group needs a name")
        if name in names:
            _fail(f"{gpath}.groupName", name, "a name unique in the cluster", "duplicate group name")
        names.add(name)
        if not _containers(group):
            _fail(f"{gpath}.template.spec.containers", [], "at least one container",
                  f"worker group {name} has no container")
        lo, hi, replicas = group.get("minReplicas"), group.get("maxReplicas"), group.get("replicas")
        if not autoscaling and (lo is None or hi is None):
            _fail(f"{gpath}.minReplicas", lo, "both minReplicas and maxReplicas set",
                  "required when enableInTreeAutoscaling is false")
        for key, value in (("minReplicas", lo), ("maxReplicas", hi), ("replicas", replicas)):
            if value is not None and value < 0:
                _fail(f"{gpath}.{key}", value, ">= 0", "replica counts cannot be negative")
        if lo is not None and hi is not None and lo > hi:
            _fail(f"{gpath}.minReplicas", lo, f"<= maxReplicas ({hi})", "minReplicas > maxReplicas")
        if replicas is not None and lo is not None and hi is not None and not lo <= replicas <= hi:
            # (template) the operator clamps replicas into range; we refuse the surprise.
            _fail(f"{gpath}.replicas", replicas, f"{lo}..{hi}", "replicas outside min/max")
        if group.get("suspend"):
            # Needs the RayJobDeletionPolicy gate, and is refused with the autoscaler.
            _fail(f"{gpath}.suspend", True, [False],
                  "suspending a worker group needs the RayJobDeletionPolicy feature gate and "
                  "no autoscaler")
        if group.get("idleTimeoutSeconds") is not None:
            if group["idleTimeoutSeconds"] < 0:
                _fail(f"{gpath}.idleTimeoutSeconds", group["idleTimeoutSeconds"], ">= 0",
                      "must be non-negative")
            if not _autoscaler_v2(spec):
                _fail(f"{gpath}.idleTimeoutSeconds", group["idleTimeoutSeconds"], "unset",
                      "only allowed with autoscalerOptions.version v2")
        if group.get("priority") and not _autoscaler_v2(spec):
            _fail(f"{gpath}.priority", group["priority"], "unset",
                  "only allowed with autoscalerOptions.version v2 (Ray >= 2.56)")
        _check_group_params(group, gpath)

    if not autoscaling and head_containers:
        if _env(head_containers[0], AUTOSCALER_V2_ENV) in ("1", "true"):
            _fail(f"{path}.enableInTreeAutoscaling", spec.get("enableInTreeAutoscaling"), [True],
                  f"{AUTOSCALER_V2_ENV} is set on the head but autoscaling is off")
    options = spec.get("autoscalerOptions") or {}
    if options.get("idleTimeoutSeconds") is not None and options["idleTimeoutSeconds"] < 0:
        _fail(f"{path}.autoscalerOptions.idleTimeoutSeconds", options["idleTimeoutSeconds"],
              ">= 0", "must be non-negative")
    if any(e.get("name") == "KUBERAY_GEN_AUTOSCALER_START_CMD" for e in options.get("env") or ()):
        _fail(f"{path}.autoscalerOptions.env", "KUBERAY_GEN_AUTOSCALER_START_CMD",
              "any other variable", "this variable is managed by KubeRay")

    _check_auth(spec, path)

    for key, gate in FEATURE_GATED_CLUSTER_FIELDS.items():
        if spec.get(key) is not None:
            _fail(f"{path}.{key}", spec[key], "unset",
                  f"needs the operator's {gate} feature gate (off by default)")


def _check_group_params(group: Mapping[str, Any], gpath: str) -> None:
    params = group.get("rayStartParams") or {}
    if "labels" in params:
        _fail(f"{gpath}.rayStartParams.labels", params["labels"], "unset",
              "use the group's top-level labels field instead")
    if group.get("resources") and any(params.get(k) for k in RAY_START_RESOURCE_KEYS):
        _fail(f"{gpath}.resources", group["resources"], "unset when rayStartParams sets "
              + "/".join(RAY_START_RESOURCE_KEYS), "resources set twice")


def _check_auth(spec: Mapping[str, Any], path: str) -> None:
    auth = spec.get("authOptions")
    if auth is None:
        return
    mode = auth.get("mode")
    if mode is not None and mode not in AUTH_MODES:
        _fail(f"{path}.authOptions.mode", mode, list(AUTH_MODES), "unknown auth mode")
    k8s_auth = bool(auth.get("enableK8sTokenAuth"))
    if mode == "token":
        version = _ray_version(spec.get("rayVersion", ""))
        minimum = MIN_RAY_VERSION_K8S_TOKEN_AUTH if k8s_auth else MIN_RAY_VERSION_TOKEN_AUTH
        if version is None or version < minimum:
            _fail(f"{path}.rayVersion", spec.get("rayVersion"), ">= " + ".".join(map(str, minimum)),
                  "token authentication needs a newer Ray")
        if k8s_auth and auth.get("secretName"):
            _fail(f"{path}.authOptions.secretName", auth["secretName"], "unset",
                  "enableK8sTokenAuth and secretName are exclusive")
    elif k8s_auth:
        _fail(f"{path}.authOptions.mode", mode, ["token"], "enableK8sTokenAuth needs mode token")


def _check_env_list(env: Any, path: str) -> None:
    for j, var in enumerate(env or ()):
        name = var.get("name", "")
        if "value" in var and var["value"] and SECRET_ENV_NAME.search(name):
            _fail(f"{path}[{j}].value", "<redacted>", "valueFrom.secretKeyRef",
                  f"{name} looks like a credential; reference a Secret instead of inlining it")


def _check_pod_env(template: Mapping[str, Any] | None, path: str) -> None:
    pod = (template or {}).get("spec") or {}
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(pod.get(kind) or ()):
            _check_env_list(container.get("env"), f"{path}.spec.{kind}[{i}].env")


def check_no_inline_secrets(spec: Mapping[str, Any], path: str = "spec") -> None:
    """(template) No credential in a RayCluster spec: env vars that look like tokens,
    passwords or keys must use ``valueFrom``; ``redis-password`` must not be a start param."""
    groups = [(spec.get("headGroupSpec") or {}, f"{path}.headGroupSpec")]
    groups += [(g, f"{path}.workerGroupSpecs[{i}]")
               for i, g in enumerate(spec.get("workerGroupSpecs") or [])]
    for group, gpath in groups:
        _check_pod_env(group.get("template"), f"{gpath}.template")
        for key in SECRET_RAY_START_PARAMS:
            if (group.get("rayStartParams") or {}).get(key):
                _fail(f"{gpath}.rayStartParams.{key}", "<redacted>", "unset",
                      "a credential in rayStartParams is stored in plain text")
    _check_env_list((spec.get("autoscalerOptions") or {}).get("env"), f"{path}.autoscalerOptions.env")


def check_raycluster(obj: Mapping[str, Any]) -> None:
    """All operator rules for a RayCluster manifest, plus the no-inline-secrets rule."""
    check_name((obj.get("metadata") or {}).get("name"), kind="RayCluster")
    spec = obj.get("spec") or {}
    check_raycluster_spec(spec, "spec")
    check_no_inline_secrets(spec, "spec")


def check_rayjob(obj: Mapping[str, Any]) -> None:
    """``ValidateRayJobSpec`` and friends: the operator's checks of a RayJob manifest."""
    check_name((obj.get("metadata") or {}).get("name"), kind="RayJob")
    spec = obj.get("spec") or {}
    mode = spec.get("submissionMode", DEFAULT_SUBMISSION_MODE)
    if mode not in SUBMISSION_MODES:
        _fail("spec.submissionMode", mode, list(SUBMISSION_MODES), "unknown submission mode")

    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    suspend = bool(spec.get("suspend"))
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    selector = spec.get("clusterSelector") or {}
    cluster_spec = spec.get("rayClusterSpec")
    backoff = spec.get("backoffLimit")

    if suspend and not shutdown:
        _fail("spec.suspend", True, [False], "only a RayJob with shutdownAfterJobFinishes: true "
              "may be suspended")
    if ttl < 0:
        _fail("spec.ttlSecondsAfterFinished", ttl, ">= 0", "must be non-negative")
    if ttl > 0 and not shutdown:
        _fail("spec.ttlSecondsAfterFinished", ttl, [0],
              "needs shutdownAfterJobFinishes: true (nothing is deleted otherwise)")
    _check_deletion_strategy(spec, shutdown)

    if selector:
        if not selector.get(CLUSTER_SELECTOR_KEY):
            _fail(f"spec.clusterSelector[{CLUSTER_SELECTOR_KEY}]", selector.get(CLUSTER_SELECTOR_KEY),
                  "the name of an existing RayCluster", "empty cluster name")
        if suspend:
            _fail("spec.suspend", True, [False], "clusterSelector mode cannot be suspended")
        if cluster_spec is not None:
            # (template) the operator ignores rayClusterSpec when a selector is set.
            _fail("spec.rayClusterSpec", "<set>", "unset with clusterSelector",
                  "clusterSelector uses an existing cluster; the spec would be ignored")
        if shutdown:
            # (template) the operator never deletes a cluster it did not create.
            _fail("spec.shutdownAfterJobFinishes", True, [False],
                  "clusterSelector uses an existing cluster, which is never shut down")
        if mode == "SidecarMode":
            _fail("spec.submissionMode", mode, [m for m in SUBMISSION_MODES if m != "SidecarMode"],
                  "clusterSelector is not supported in SidecarMode")
        if backoff is not None and backoff > 0:
            _fail("spec.backoffLimit", backoff, [0], "retries create new clusters; not possible "
                  "with clusterSelector")
    elif cluster_spec is None:
        _fail("spec.rayClusterSpec", None, "a RayCluster spec, or a clusterSelector",
              "one of rayClusterSpec or clusterSelector must be set")

    if backoff is not None and backoff < 0:
        _fail("spec.backoffLimit", backoff, ">= 0", "must be non-negative")
    if mode == "InteractiveMode" and backoff is not None and backoff > 0:
        _fail("spec.backoffLimit", backoff, [0], "InteractiveMode does not retry")
    submitter_backoff = (spec.get("submitterConfig") or {}).get("backoffLimit")
    if submitter_backoff is not None and submitter_backoff < 0:
        _fail("spec.submitterConfig.backoffLimit", submitter_backoff, ">= 0", "must be non-negative")

    if mode != "InteractiveMode" and not spec.get("entrypoint"):
        # (template) the operator would submit an empty command.
        _fail("spec.entrypoint", spec.get("entrypoint"), "a non-empty command",
              f"{mode} submits the entrypoint")

    submitter = spec.get("submitterPodTemplate")
    if mode == "SidecarMode":
        if submitter is not None:
            _fail("spec.submitterPodTemplate", "<set>", "unset", "SidecarMode has no submitter pod")
        if spec.get("submitterConfig") is not None:
            _fail("spec.submitterConfig", spec["submitterConfig"], "unset",
                  "SidecarMode has no submitter Job")
        head_restart = (((cluster_spec or {}).get("headGroupSpec") or {}).get("template") or {}) \
            .get("spec", {}).get("restartPolicy")
        if head_restart not in (None, "", "Never"):
            _fail("spec.rayClusterSpec.headGroupSpec.template.spec.restartPolicy", head_restart,
                  ["Never"], "SidecarMode needs a head that is not restarted in place")
    elif submitter is not None:
        if mode != "K8sJobMode":
            # (template) only K8sJobMode creates a submitter Job.
            _fail("spec.submitterPodTemplate", "<set>", "unset", f"{mode} has no submitter pod")
        pod = submitter.get("spec") or {}
        if not pod.get("containers"):
            _fail("spec.submitterPodTemplate.spec.containers", [], "at least one container",
                  "the submitter needs a container")
        restart = pod.get("restartPolicy")
        if restart not in SUBMITTER_RESTART_POLICIES:
            _fail("spec.submitterPodTemplate.spec.restartPolicy", restart,
                  list(SUBMITTER_RESTART_POLICIES), "a Kubernetes Job's pods cannot restart Always")

    for key in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        if spec.get(key) is not None and spec[key] <= 0:
            _fail(f"spec.{key}", spec[key], "> 0", "must be a positive number of seconds")

    runtime_env = spec.get("runtimeEnvYAML")
    if runtime_env:
        try:
            parsed = yaml.safe_load(runtime_env)
        except yaml.YAMLError as exc:
            _fail("spec.runtimeEnvYAML", runtime_env, "a YAML mapping", f"not YAML: {exc}")
        else:
            if not isinstance(parsed, dict):
                _fail("spec.runtimeEnvYAML", runtime_env, "a YAML mapping", "not a mapping")
            for name, value in (parsed.get("env_vars") or {}).items():
                if value and SECRET_ENV_NAME.search(str(name)):
                    _fail(f"spec.runtimeEnvYAML.env_vars.{name}", "<redacted>",
                          "no credentials in the runtime env (mount a Secret on the pods)",
                          f"{name} looks like a credential")

    if cluster_spec is not None:
        if (cluster_spec.get("authOptions") or {}).get("enableK8sTokenAuth"):
            _fail("spec.rayClusterSpec.authOptions.enableK8sTokenAuth", True, [False],
                  "Kubernetes token auth is not supported for RayJob")
        if cluster_spec.get("upgradeStrategy") is not None:
            _fail("spec.rayClusterSpec.upgradeStrategy", cluster_spec["upgradeStrategy"], "unset",
                  "upgradeStrategy cannot be set on a cluster created by a RayJob")
        check_raycluster_spec(cluster_spec, "spec.rayClusterSpec")
        check_no_inline_secrets(cluster_spec, "spec.rayClusterSpec")
    _check_pod_env(submitter, "spec.submitterPodTemplate")


def _check_deletion_strategy(spec: Mapping[str, Any], shutdown: bool) -> None:
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return
    rules = strategy.get("deletionRules") or []
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    if rules and shutdown:
        _fail("spec.deletionStrategy.deletionRules", "<set>", "unset with shutdownAfterJobFinishes",
              "shutdownAfterJobFinishes and deletionRules are exclusive")
    if rules and legacy:
        _fail("spec.deletionStrategy", "<onSuccess/onFailure and deletionRules>",
              "either deletionRules or both onSuccess and onFailure", "both styles set")
    if legacy and (strategy.get("onSuccess") is None or strategy.get("onFailure") is None):
        _fail("spec.deletionStrategy", "<one of onSuccess/onFailure>", "both onSuccess and onFailure",
              "the legacy deletion policy needs both")
    if not rules and not legacy:
        _fail("spec.deletionStrategy", strategy, "deletionRules, or both onSuccess and onFailure",
              "empty deletion strategy")
