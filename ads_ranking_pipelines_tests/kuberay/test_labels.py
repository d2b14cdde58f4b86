from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import RequestError, is_label_value, resolve_request
from ads_ranking_pipelines.kuberay.labels import (
    LABEL_DAGSTER_CODE_LOCATION,
    LABEL_DAGSTER_RUN_ID,
    LABEL_GPU_TYPE,
    LABEL_OWNER,
    LABEL_POOL,
    LABEL_TEAM,
    LABEL_TEMPLATE_VERSION,
    TEMPLATE_VERSION,
    build_labels,
    sanitize_label_value,
)


@pytest.mark.parametrize("raw,expected", [
    ("alice", "alice"),
    ("", ""),
    ("Jane.Doe@example.com", "Jane.Doe-example.com"),
    ("Ads Ranking / Quest", "Ads-Ranking-Quest"),
    ("--x--", "x"),
    ("_a_", "a"),
    ("@@@", ""),
    ("a" * 63, "a" * 63),
])
def test_sanitize_examples(raw: str, expected: str) -> None:
    assert sanitize_label_value(raw) == expected


def test_long_values_keep_a_distinguishing_hash() -> None:
    a, b = sanitize_label_value("x" * 70 + "a"), sanitize_label_value("x" * 70 + "b")
    assert len(a) == len(b) == 63 and a != b


@given(st.text(max_size=200))
def test_sanitize_always_valid_and_idempotent(raw: str) -> None:
    clean = sanitize_label_value(raw)
    assert is_label_value(clean)
    assert sanitize_label_value(clean) == clean


def test_build_labels_precedence_and_contents() -> None:
    catalog = load_catalog()
    request = ClusterRequest(name="r", owner="bob", gpu_pool="h100-80gb", gpus_per_worker=8,
                             image="rayproject/ray:2.60.0-py311-gpu",
                             labels={"tier": "from-request", "keep": "me"})
    labels = build_labels(resolve_request(request, catalog),
                          labels={"tier": "from-caller", LABEL_OWNER: "spoofed"},
                          run_id="abc-123", code_location="ads_ranking_pipelines")
    assert labels[LABEL_OWNER] == "bob"
    assert labels["tier"] == "from-caller" and labels["keep"] == "me"
    assert labels[LABEL_TEAM] == "ads-ranking"
    assert labels[LABEL_POOL] == "h100-80gb"
    assert labels[LABEL_GPU_TYPE] == "nvidia-h100-80gb"
    assert labels[LABEL_TEMPLATE_VERSION] == TEMPLATE_VERSION
    assert labels[LABEL_DAGSTER_RUN_ID] == "abc-123"
    assert labels[LABEL_DAGSTER_CODE_LOCATION] == "ads_ranking_pipelines"
    assert list(labels) == sorted(labels)


def test_build_labels_without_dagster_and_on_cpu() -> None:
    catalog = load_catalog()
    labels = build_labels(resolve_request(ClusterRequest(name="r"), catalog))
    assert LABEL_DAGSTER_RUN_ID not in labels and LABEL_DAGSTER_CODE_LOCATION not in labels
    assert labels[LABEL_GPU_TYPE] == "none"


def test_caller_label_keys_are_checked() -> None:
    catalog = load_catalog()
    with pytest.raises(RequestError) as info:
        build_labels(resolve_request(ClusterRequest(name="r"), catalog), labels={"bad key!": "x"})
    assert info.value.field == "labels" and "bad key!" in str(info.value)
