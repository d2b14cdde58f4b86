"""What the template promises, checked on the rendered objects rather than on golden text."""

from __future__ import annotations

import json

import pytest

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.quantity import parse_memory
from ads_ranking_pipelines.config.validation import RequestError, RequestErrors, resolve_request
from ads_ranking_pipelines.kuberay.pod import GPU_RESOURCE, SHM_FRACTION, container_security_context
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.kuberay.cases import CASES, SUBMISSION_ID, Case
from ads_ranking_pipelines_tests.kuberay.pod_security import pod_templates
from ads_ranking_pipelines_tests.kuberay.golden import render

CATALOG = load_catalog()
IDS = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rayjob_cluster_is_the_raycluster(case: Case) -> None:
    rendered = render(case)
    cluster_spec = dict(rendered["raycluster"]["spec"])
    if case.catalog is not None:  # a Kueue pool: the RayJob is suspended, not its cluster spec
        assert cluster_spec.pop("suspend") is True
    assert rendered["rayjob"]["spec"]["rayClusterSpec"] == cluster_spec
    assert rendered["rayjob"]["metadata"] == rendered["raycluster"]["metadata"]


PLAIN = [c for c in CASES if c.catalog is None]


def test_kueue_pool_rayjob_is_suspended_labelled_and_cleans_up_without_rules() -> None:
    """Kueue's RayJob integration needs spec.suspend and the queue-name label; KubeRay's
    ValidateRayJobSpec refuses suspend with deletion rules (kueue #3994), and the pre-running
    deadline would reap a job waiting in the queue."""
    (case,) = [c for c in CASES if c.catalog is not None]
    rendered = render(case)
    job, cluster = rendered["rayjob"], rendered["raycluster"]
    for obj in (job, cluster):
        assert obj["spec"]["suspend"] is True
        assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ads-ranking-h100"
        assert obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "ads-ranking-backfill"
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and "deletionStrategy" not in spec
    assert spec["ttlSecondsAfterFinished"] == case.request.ttl_seconds_after_finished
    assert "preRunningDeadlineSeconds" not in spec
    for _, template in pod_templates(job):  # the pods are the job's, not Kueue's to gate
        assert not any(k.startswith("kueue.x-k8s.io/") for k in template["metadata"]["labels"])
    # Even when the backend is configured for deletion rules.
    resolved = resolve_request(case.request, load_catalog(case.catalog))
    again = build_rayjob(resolved, entrypoint="true", submission_id=SUBMISSION_ID,
                         deletion="rules")["spec"]
    assert again["shutdownAfterJobFinishes"] is True and "deletionStrategy" not in again


def test_priority_class_override_and_refusal_off_kueue() -> None:
    (case,) = [c for c in CASES if c.catalog is not None]
    request = case.request.model_copy(update={"priority_class": "urgent-retrain"})
    manifest = build_rayjob(resolve_request(request, load_catalog(case.catalog)),
                            entrypoint="true", submission_id=SUBMISSION_ID)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "urgent-retrain"
    with pytest.raises(RequestErrors) as info:
        resolve_request(request, CATALOG)  # the shipped catalog has no Kueue pool
    assert "priority_class='urgent-retrain'" in str(info.value) and "kueue" in str(info.value)


@pytest.mark.parametrize("case", PLAIN, ids=[c.name for c in PLAIN])
def test_rayjob_lifecycle_fields(case: Case) -> None:
    spec = render(case)["rayjob"]["spec"]
    assert spec["submissionMode"] == "K8sJobMode"
    # KubeRay v1.7 deletion rules: the cluster goes when the job ends, the RayJob (and its
    # submitter) after the TTL; rules exclude shutdownAfterJobFinishes and the global TTL.
    assert spec["shutdownAfterJobFinishes"] is False and "ttlSecondsAfterFinished" not in spec
    ttl = case.request.ttl_seconds_after_finished
    rules = {(r["policy"], tuple(sorted((k, v) for k, v in r["condition"].items()
                                        if k != "ttlSeconds")), r["condition"]["ttlSeconds"])
             for r in spec["deletionStrategy"]["deletionRules"]}
    for cond in ((("jobStatus", "SUCCEEDED"),), (("jobStatus", "FAILED"),),
                 (("jobDeploymentStatus", "Failed"),)):
        assert ("DeleteCluster", cond, 0) in rules and ("DeleteSelf", cond, ttl) in rules
    assert spec["activeDeadlineSeconds"] == case.request.active_deadline_seconds
    assert spec["preRunningDeadlineSeconds"] == case.request.pre_running_deadline_seconds
    assert spec["jobId"] == SUBMISSION_ID
    assert spec["backoffLimit"] == 0
    assert spec["submitterPodTemplate"]["spec"]["restartPolicy"] == "Never"
    assert ("runtimeEnvYAML" in spec) == bool(case.runtime_env)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_pods_are_hardened_and_sized(case: Case) -> None:
    request = resolve_request(case.request, CATALOG).request
    for role, template in pod_templates(render(case)["rayjob"]):
        pod = template["spec"]
        (container,) = pod["containers"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 1000
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["securityContext"] == container_security_context()
        assert container["resources"]["requests"] == container["resources"]["limits"]
        expect_token = role == "head" and request.autoscaling
        assert pod["automountServiceAccountToken"] is expect_token, role
        assert template["metadata"]["labels"] == {  # Kueue's labels stay on the RayJob
            k: v for k, v in render(case)["rayjob"]["metadata"]["labels"].items()
            if not k.startswith("kueue.x-k8s.io/")}
        if role == "submitter":
            assert "command" not in container  # KubeRay fills in `ray job submit`
            continue
        memory = request.head_memory if role == "head" else request.memory_per_worker
        (shm,) = pod["volumes"]
        assert shm["emptyDir"]["medium"] == "Memory"
        ratio = parse_memory(shm["emptyDir"]["sizeLimit"]) / parse_memory(memory)
        assert ratio == pytest.approx(SHM_FRACTION, abs=0.01)
        assert container["volumeMounts"] == [{"name": shm["name"], "mountPath": "/dev/shm"}]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gpus_selectors_and_tolerations(case: Case) -> None:
    request = case.request
    pool = CATALOG.get(request.gpu_pool)
    cluster = render(case)["raycluster"]["spec"]
    head = cluster["headGroupSpec"]["template"]["spec"]
    worker = cluster["workerGroupSpecs"][0]["template"]["spec"]
    limits = worker["containers"][0]["resources"]["limits"]
    if request.gpus_per_worker:
        assert limits[GPU_RESOURCE] == str(request.gpus_per_worker)
        assert worker["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        # The head stays off GPU nodes: no GPU, no GPU selector, no GPU toleration.
        assert "nodeSelector" not in head and "tolerations" not in head
    else:
        assert GPU_RESOURCE not in limits and "tolerations" not in worker
    assert GPU_RESOURCE not in head["containers"][0]["resources"]["limits"]
    assert worker.get("nodeSelector", {}) == pool.node_selector


def test_h100_shape() -> None:
    cluster = render(CASES[2])["raycluster"]["spec"]
    group = cluster["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (4, 4, 4)
    pod = group["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert pod["containers"][0]["resources"]["limits"] == {
        "cpu": "176", "memory": "1600Gi", GPU_RESOURCE: "8"}
    assert cluster["enableInTreeAutoscaling"] is False and "autoscalerOptions" not in cluster
    assert cluster["authOptions"] == {"mode": "token"}
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"


def test_autoscaler_gets_the_same_security_context() -> None:
    cluster = render(CASES[3])["raycluster"]["spec"]
    assert cluster["enableInTreeAutoscaling"] is True
    options = cluster["autoscalerOptions"]
    assert options["securityContext"] == container_security_context()
    assert options["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert options["resources"]["requests"] == options["resources"]["limits"]
    group = cluster["workerGroupSpecs"][0]
    assert (group["minReplicas"], group["replicas"], group["maxReplicas"]) == (0, 3, 3)


def test_auth_secret_is_referenced_by_name_only() -> None:
    cluster = render(CASES[3])["raycluster"]["spec"]
    assert cluster["authOptions"] == {"mode": "token", "secretName": "ranker-ray-token"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_no_secret_values_rendered(case: Case) -> None:
    text = json.dumps(render(case))
    for needle in ("auth_token", "RAY_AUTH_TOKEN", "password", "stringData", '"data"'):
        assert needle not in text


def test_gpu_workers_default_to_their_share_of_the_node() -> None:
    # Item 8: an 8-GPU worker that names no CPUs/memory gets the node's share, not 1 CPU / 4Gi.
    request = ClusterRequest(name="r", gpu_pool="h100-80gb", workers=2, gpus_per_worker=8,
                             image="rayproject/ray:2.60.0-py311-gpu")
    worker = build_raycluster(resolve_request(request, CATALOG))["spec"]["workerGroupSpecs"][0]
    pod = worker["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {
        "cpu": "184", "memory": "1680Gi", GPU_RESOURCE: "8"}
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "504Gi"  # 30% for /dev/shm


def test_head_only_cluster_schedules_on_the_head() -> None:
    cluster = build_raycluster(resolve_request(ClusterRequest(name="solo", workers=0), CATALOG))
    assert "num-cpus" not in cluster["spec"]["headGroupSpec"]["rayStartParams"]
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 0


def test_one_rayjob_per_submission_renames_without_revalidating() -> None:
    resolved = resolve_request(ClusterRequest(name="r"), CATALOG)
    job = build_rayjob(resolved.renamed("r-step-1"), entrypoint="python x.py", submission_id="s")
    assert job["metadata"]["name"] == "r-step-1"
    assert job["spec"]["rayClusterSpec"] == build_raycluster(resolved)["spec"]
    with pytest.raises(RequestErrors) as info:
        resolved.renamed("Not A Name")
    assert info.value.field == "name" and "DNS-1035" in str(info.value)


@pytest.mark.parametrize("kwargs,field", [
    ({"entrypoint": "  ", "submission_id": "s"}, "entrypoint"),
    ({"entrypoint": "python x.py", "submission_id": ""}, "submission_id"),
    ({"entrypoint": "python x.py", "submission_id": "has space"}, "submission_id"),
    ({"entrypoint": "python x.py", "submission_id": "s", "runtime_env": ["pip"]}, "runtime_env"),
    ({"entrypoint": "python x.py", "submission_id": "s",
      "runtime_env": {"env_vars": {"HF_TOKEN": "hf_abc"}}},
     "spec.runtimeEnvYAML.env_vars.HF_TOKEN"),
    ({"entrypoint": "python x.py", "submission_id": "s", "backoff_limit": -1}, "spec.backoffLimit"),
])
def test_rayjob_arguments_are_checked(kwargs: dict, field: str) -> None:
    with pytest.raises(RequestError) as info:
        build_rayjob(resolve_request(ClusterRequest(name="r"), CATALOG), **kwargs)
    assert info.value.field == field
    assert "hf_abc" not in str(info.value)


def test_shutdown_mode_for_operators_without_the_deletion_gate() -> None:
    from ads_ranking_pipelines.config.pools import load_catalog
    from ads_ranking_pipelines.config.validation import resolve_request
    from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

    case = CASES[0]
    spec = build_rayjob(resolve_request(case.request, load_catalog()), entrypoint="true",
                        submission_id=SUBMISSION_ID, deletion="shutdown")["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and "deletionStrategy" not in spec
    assert spec["ttlSecondsAfterFinished"] == case.request.ttl_seconds_after_finished


def test_unknown_deletion_mode_is_refused_naming_the_valid_ones() -> None:
    from ads_ranking_pipelines.config.pools import load_catalog
    from ads_ranking_pipelines.config.validation import RequestError, resolve_request
    from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

    with pytest.raises(RequestError) as info:
        build_rayjob(resolve_request(CASES[0].request, load_catalog()), entrypoint="true",
                     submission_id=SUBMISSION_ID, deletion="forever")
    assert "rayjob_deletion" in str(info.value) and "'forever'" in str(info.value)
    assert "rules" in str(info.value) and "shutdown" in str(info.value)
