"""Every value set: lint clean, every object strictly valid for Kubernetes 1.30 and the newest
version kubernetes-validate bundles, every pod within the restricted Pod Security Standard."""

from __future__ import annotations

import kubernetes_validate
import pytest
from kubernetes_validate import utils as kv_utils

from ads_ranking_pipelines_tests.helm.chart import (
    CHART_DIR,
    VALUE_SETS,
    kinds_and_names,
    pod_templates,
    render,
    value_set,
)
from ads_ranking_pipelines_tests.kuberay.pod_security import as_pod, restricted_violations

import helm_python

OLDEST = "1.30"
NEWEST = kv_utils.major_minor(kv_utils.latest_version())
SETS = sorted(VALUE_SETS)
WARNING = 2


def test_value_sets_cover_the_issue() -> None:
    assert {"default", "gpu-pools", "xray", "existing-service-account", "extra-env",
            "support-only"} <= set(SETS)


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("kube", [OLDEST, NEWEST])
def test_lint_clean(name: str, kube: str) -> None:
    report = helm_python.lint(str(CHART_DIR), value_set(name), strict=True, kube_version=f"v{kube}.0")
    problems = [m for m in report["messages"] if m["severity"] >= WARNING]
    assert report["errors"] == [] and problems == [], report


def test_lint_without_required_values_names_them() -> None:
    report = helm_python.lint(str(CHART_DIR))
    text = "\n".join(report["errors"])
    for path in ("/image/repository", "/image/tag", "/storage/home"):
        assert f"at '{path}'" in text, text


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("kube", [OLDEST, NEWEST])
def test_every_object_strictly_valid(name: str, kube: str) -> None:
    objects = render(value_set(name))
    assert objects
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, kube, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{obj['kind']} {obj['metadata']['name']} invalid for {kube}: "
                                 f"{exc.message} at {list(exc.path)}") from None


def test_strict_validation_catches_a_typo() -> None:
    """The strict check is not vacuous: a misspelt field in a rendered Deployment fails it."""
    deployment = next(o for o in render(value_set("default")) if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["automountServiceAcountToken"] = False
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, NEWEST, strict=True)


@pytest.mark.parametrize("name", SETS)
def test_every_pod_restricted(name: str) -> None:
    for workload, template in pod_templates(render(value_set(name))):
        assert restricted_violations(template["spec"]) == [], workload
        kubernetes_validate.validate(as_pod(template, workload, "dagster"), NEWEST, strict=True)


def test_rendered_objects_for_defaults() -> None:
    assert kinds_and_names(render(value_set("default"))) == [
        ("ConfigMap", "ads-ranking-pipelines-pools"),
        ("Deployment", "ads-ranking-pipelines"),
        ("Role", "ads-ranking-pipelines-kuberay"),
        ("RoleBinding", "ads-ranking-pipelines-kuberay"),
        ("Service", "ads-ranking-pipelines"),
        ("ServiceAccount", "ads-ranking-pipelines"),
        ("ServiceAccount", "ads-ranking-pipelines-ray"),
    ]


def test_support_only_renders_no_code_server() -> None:
    kinds = {k for k, _ in kinds_and_names(render(value_set("support-only")))}
    assert "Deployment" not in kinds and "Service" not in kinds
    assert {"ServiceAccount", "Role", "RoleBinding", "ConfigMap"} <= kinds
