"""The notebook pieces of the template (``kuberay/notebook.py``): the patched RayCluster stays
strictly valid against the KubeRay CRD, the operator rules and the restricted Pod Security
Standard; the Service is a valid v1 Service selecting the head pod on the Jupyter port."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ads_ranking_pipelines.kuberay import rules
from ads_ranking_pipelines.kuberay.notebook import (
    NOTEBOOK_PORT,
    OVERWRITE_CMD_ANNOTATION,
    notebook_service,
    with_notebook,
)
from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.cases import CASES, Case
from ads_ranking_pipelines_tests.kuberay.pod_security import (
    as_pod,
    kubernetes_version,
    pod_templates,
    restricted_violations,
    validate_pod,
)
from ads_ranking_pipelines_tests.kuberay.test_golden import render

IDS = [c.name for c in CASES]
SECRET = "ranker-notebook-token"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_raycluster_with_notebook_is_valid(case: Case) -> None:
    original = render(case)["raycluster"]
    manifest = with_notebook(original, SECRET)
    crd_schema.assert_valid(manifest, strict=True)
    rules.check_raycluster(manifest)
    for role, template in pod_templates(manifest):
        validate_pod(as_pod(template, f"{case.request.name}-{role}"))
        assert restricted_violations(template["spec"]) == [], role
    head = manifest["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert manifest["metadata"]["annotations"][OVERWRITE_CMD_ANNOTATION] == "true"
    assert {"containerPort": NOTEBOOK_PORT, "name": "jupyter", "protocol": "TCP"} in head["ports"]
    assert head["command"] == ["/bin/bash", "-lc", "--"]
    assert head["args"][0].endswith("& $KUBERAY_GEN_RAY_START_CMD")
    token_env = next(e for e in head["env"] if e["name"] == "JUPYTER_TOKEN")
    assert token_env["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": "token"}
    # Workers are untouched and the input is not modified.
    assert manifest["spec"]["workerGroupSpecs"] == original["spec"]["workerGroupSpecs"]
    assert "annotations" not in original["metadata"]
    assert "value" not in token_env  # only the Secret is named


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_notebook_service_is_a_valid_service_for_the_head(case: Case) -> None:
    cluster = render(case)["raycluster"]
    service = notebook_service(cluster)
    kubernetes_validate.validate(service, kubernetes_version(), strict=True)
    assert service["metadata"]["name"] == f"{case.request.name}-notebook"
    assert len(service["metadata"]["name"]) <= 63
    assert service["metadata"]["namespace"] == cluster["metadata"]["namespace"]
    assert service["spec"]["selector"] == {"ray.io/cluster": case.request.name,
                                           "ray.io/node-type": "head"}
    (port,) = service["spec"]["ports"]
    assert port["port"] == NOTEBOOK_PORT and port["targetPort"] == "jupyter"
    assert service["metadata"]["labels"] == cluster["metadata"]["labels"]


def test_with_notebook_is_idempotent() -> None:
    cluster = render(CASES[0])["raycluster"]
    once = with_notebook(cluster, SECRET)
    assert with_notebook(once, SECRET) == once
