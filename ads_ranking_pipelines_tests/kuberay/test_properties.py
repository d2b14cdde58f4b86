"""Property tests: any request that fits the catalog renders manifests that pass the CRD
schema (strictly), the Pod schema and the restricted Pod Security Standard; any request
broken in one known way is refused with that field named."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import RequestError, is_label_value, resolve_request
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.pod_security import (
    as_pod,
    pod_templates,
    restricted_violations,
    validate_pod,
)
from ads_ranking_pipelines_tests.kuberay.strategies import invalid_requests, valid_requests

CATALOG = load_catalog()
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

run_ids = st.none() | st.text(max_size=100)
code_locations = st.none() | st.text(max_size=100)


@pytest.mark.slow
@SETTINGS
@given(valid_requests(CATALOG), run_ids, code_locations)
def test_valid_requests_render_valid_manifests(
    request: ClusterRequest, run_id: str | None, code_location: str | None
) -> None:
    crd_schema.require_crds()
    kwargs = {"run_id": run_id, "code_location": code_location}
    resolved = resolve_request(request, CATALOG)
    cluster = build_raycluster(resolved, **kwargs)
    job = build_rayjob(resolved, entrypoint="python -m train", submission_id="run-1",
                       runtime_env={"env_vars": {"SEED": "1"}}, **kwargs)
    for manifest in (cluster, job):
        crd_schema.assert_valid(manifest, strict=True)
        assert all(is_label_value(v) for v in manifest["metadata"]["labels"].values())
        for role, template in pod_templates(manifest):
            validate_pod(as_pod(template, f"{request.name}-{role}"))
            assert restricted_violations(template["spec"]) == []


@SETTINGS
@given(invalid_requests(CATALOG))
def test_invalid_requests_name_the_field(case: tuple[str, ClusterRequest]) -> None:
    field, request = case
    try:
        resolve_request(request, CATALOG)
    except RequestError as err:
        assert err.field == field, str(err)
        message = str(err)
        assert field in message and repr(err.value) in message and "valid:" in message
    else:
        raise AssertionError(f"{field}: {request!r} was accepted")
