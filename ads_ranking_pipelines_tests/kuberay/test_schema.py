"""Every rendered manifest against the real KubeRay CRDs (strictly) and every pod template
against the Kubernetes Pod schema and the restricted Pod Security Standard."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import kubernetes_validate
import pytest

from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.cases import CASES, Case
from ads_ranking_pipelines_tests.kuberay.pod_security import (
    as_pod,
    pod_templates,
    restricted_violations,
    validate_pod,
)
from ads_ranking_pipelines_tests.kuberay.golden import render

IDS = [c.name for c in CASES]
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("kind", ["raycluster", "rayjob"])
def test_strictly_valid_against_crd(case: Case, kind: str) -> None:
    crd_schema.assert_valid(render(case)[kind], strict=True)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("kind", ["raycluster", "rayjob"])
def test_pod_templates_valid_and_restricted(case: Case, kind: str) -> None:
    manifest = render(case)[kind]
    templates = pod_templates(manifest)
    assert len(templates) == (3 if kind == "rayjob" else 2)
    for role, template in templates:
        validate_pod(as_pod(template, f"{case.request.name}-{role}"))
        assert restricted_violations(template["spec"]) == [], role


def _cluster_spec(manifest: dict) -> dict:
    return manifest["spec"]["rayClusterSpec"] if manifest["kind"] == "RayJob" else manifest["spec"]


@pytest.mark.parametrize("kind", ["raycluster", "rayjob"])
def test_strict_check_catches_typos_the_plain_schema_misses(kind: str) -> None:
    manifest = copy.deepcopy(render(CASES[2])[kind])
    _cluster_spec(manifest)["workerGroupSpecs"][0]["maxReplica"] = 8  # typo of maxReplicas
    assert crd_schema.schema_errors(manifest, strict=False) == []
    errors = crd_schema.schema_errors(manifest, strict=True)
    assert len(errors) == 1 and "maxReplica" in errors[0], errors


@pytest.mark.parametrize("path,typo", [
    (("spec", "headGroupSpec", "template", "spec"), "nodeSelecter"),
    (("spec", "headGroupSpec", "template", "spec", "containers", 0, "securityContext"), "runAsNonroot"),
    (("spec", "authOptions"), "secretname"),
    (("spec",), "enableInTreeAutoscaler"),
])
def test_strict_check_catches_nested_typos(path: tuple, typo: str) -> None:
    manifest = copy.deepcopy(render(CASES[0])["raycluster"])
    node = manifest
    for key in path:
        node = node[key]
    node[typo] = True
    assert crd_schema.schema_errors(manifest, strict=False) == []
    assert any(typo in e for e in crd_schema.schema_errors(manifest, strict=True))


def test_schema_still_checks_types_and_enums() -> None:
    manifest = copy.deepcopy(render(CASES[0])["raycluster"])
    manifest["spec"]["authOptions"]["mode"] = "tokens"
    manifest["spec"]["workerGroupSpecs"][0]["replicas"] = "4"
    errors = crd_schema.schema_errors(manifest, strict=True)
    assert any("authOptions.mode" in e for e in errors), errors
    assert any("replicas" in e for e in errors), errors


def test_strictify_respects_preserve_unknown_fields() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "string"}}},
        "b": {"type": "object", "properties": {"x": {"type": "string"}},
              "x-kubernetes-preserve-unknown-fields": True},
        "c": {"type": "object", "additionalProperties": {"type": "string"}},
    }}
    strict = crd_schema.strictify(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["a"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["b"]
    assert strict["properties"]["c"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in schema  # the input is not modified


def test_kubernetes_validate_catches_pod_typos() -> None:
    template = copy.deepcopy(pod_templates(render(CASES[1])["rayjob"])[1][1])
    template["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalaton"] = False
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_pod(as_pod(template, "typo"))


def test_restricted_checker_flags_each_control() -> None:
    good = pod_templates(render(CASES[2])["raycluster"])[1][1]["spec"]
    assert restricted_violations(good) == []
    mutations = {
        "hostNetwork": lambda s: s.update(hostNetwork=True),
        "hostPID": lambda s: s.update(hostPID=True),
        "hostIPC": lambda s: s.update(hostIPC=True),
        "hostPath": lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "privileged": lambda s: s["containers"][0]["securityContext"].update(privileged=True),
        "allowPrivilegeEscalation": lambda s: s["containers"][0]["securityContext"].pop(
            "allowPrivilegeEscalation"),
        "capabilities": lambda s: s["containers"][0]["securityContext"].update(
            capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
        "drop ALL": lambda s: s["containers"][0]["securityContext"].update(capabilities={}),
        "runAsNonRoot": lambda s: (s["securityContext"].pop("runAsNonRoot"),
                                   s["containers"][0]["securityContext"].pop("runAsNonRoot")),
        "seccomp": lambda s: s["containers"][0]["securityContext"].update(
            seccompProfile={"type": "Unconfined"}),
        "hostPort": lambda s: s["containers"][0]["ports"][0].update(hostPort=8080),
    }
    for control, mutate in mutations.items():
        spec = copy.deepcopy(good)
        mutate(spec)
        assert restricted_violations(spec), f"{control} not flagged"
    allowed = copy.deepcopy(good)
    allowed["containers"][0]["securityContext"]["capabilities"]["add"] = ["NET_BIND_SERVICE"]
    assert restricted_violations(allowed) == []


def test_vendored_crds_are_the_recorded_release(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CRDs ship with the repository: found without any sibling folder or variable, and
    # byte-identical to what crds/SOURCE.md records for KubeRay v1.7.0.
    monkeypatch.delenv(crd_schema.CRDS_ENV_VAR, raising=False)
    path = crd_schema.require_crds()
    assert path == crd_schema.DEFAULT_CRDS_DIR and path.is_relative_to(REPO_ROOT)
    source = (path / "SOURCE.md").read_text(encoding="utf-8")
    assert "v1.7.0" in source
    for name in crd_schema.CRD_FILES.values():
        digest = hashlib.sha256((path / name).read_bytes()).hexdigest()
        assert f"`{name}`" in source and f"`{digest}`" in source, f"{name} is not the recorded file"


def test_missing_crds_fail_instead_of_skipping(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(crd_schema.CRDS_ENV_VAR, str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="KubeRay CRDs not found"):
        crd_schema.require_crds()
