from __future__ import annotations

from typing import Any

import pytest

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.quantity import parse_memory
from ads_ranking_pipelines.config.validation import (
    NODE_HEADROOM_FRACTION,
    default_worker_resources,
    RequestError,
    RequestErrors,
    ResolvedRequest,
    usable_cpus,
    usable_memory_bytes,
    resolve_request,
)

CATALOG = load_catalog()
GPU_IMAGE = "rayproject/ray:2.60.0-py311-gpu"


def _request(**overrides: Any) -> ClusterRequest:
    return ClusterRequest(**{"name": "ranker", **overrides})


def test_defaults_are_valid() -> None:
    resolved = resolve_request(_request(), CATALOG)
    assert resolved.pool == CATALOG.get("local")
    assert resolved.request == _request(cpus_per_worker=1.0, memory_per_worker="4Gi")


@pytest.mark.parametrize("overrides", [
    {"gpu_pool": "l4", "gpus_per_worker": 8, "cpus_per_worker": 86.4, "memory_per_worker": "345Gi",
     "workers": 16, "image": GPU_IMAGE},
    {"gpu_pool": "h100-80gb", "gpus_per_worker": 8, "cpus_per_worker": 176,
     "memory_per_worker": "1600Gi", "workers": 4, "image": GPU_IMAGE},
    {"gpu_pool": "cpu-standard", "workers": 0},
    {"gpu_pool": "local", "workers": 4, "cpus_per_worker": 0.25, "memory_per_worker": "512Mi"},
    {"labels": {"example.com/team": "x", "cost-center": "any value: sanitized later"}},
])
def test_valid(overrides: dict[str, Any]) -> None:
    resolve_request(_request(**overrides), CATALOG)


@pytest.mark.parametrize("overrides,field,valid_part", [
    ({"gpu_pool": "h100"}, "gpu_pool", "h100-80gb"),
    ({"gpu_pool": "l4", "gpus_per_worker": 9, "image": GPU_IMAGE}, "gpus_per_worker", "1..8"),
    ({"gpu_pool": "l4", "gpus_per_worker": 0}, "gpus_per_worker", "1..8"),
    ({"gpu_pool": "cpu-standard", "gpus_per_worker": 1, "image": GPU_IMAGE}, "gpus_per_worker", "0"),
    ({"gpu_pool": "local", "gpus_per_worker": 1}, "gpus_per_worker", "0"),
    ({"gpu_pool": "l4", "gpus_per_worker": 1}, "image", "gpu"),
    ({"gpu_pool": "local", "cpus_per_worker": 8}, "cpus_per_worker", "<= 7.2"),
    ({"gpu_pool": "local", "memory_per_worker": "32Gi"}, "memory_per_worker", "<="),
    ({"gpu_pool": "h100-80gb", "gpus_per_worker": 8, "image": GPU_IMAGE,
      "memory_per_worker": "1800Gi"}, "memory_per_worker", "<="),
    ({"gpu_pool": "local", "workers": 5}, "workers", "0..4"),
    ({"gpu_pool": "h100-80gb", "workers": 9, "gpus_per_worker": 8, "image": GPU_IMAGE},
     "workers", "0..8"),
    ({"memory_per_worker": "100Mi"}, "memory_per_worker", ">= 512Mi"),
    ({"head_memory": "0Gi"}, "head_memory", ">= 512Mi"),
    ({"cpus_per_worker": 0.0005}, "cpus_per_worker", "0.001"),
    ({"head_cpus": 1.23456}, "head_cpus", "0.001"),
    ({"name": "1ranker"}, "name", "DNS-1035"),
    ({"labels": {"ads-ranking.io/owner": "me"}}, "labels", "prefixes"),
    ({"labels": {"ray.io/node-type": "head"}}, "labels", "prefixes"),
    ({"labels": {"bad key": "v"}}, "labels", "label keys"),
    ({"labels": {"x" * 64: "v"}}, "labels", "label keys"),
])
def test_invalid(overrides: dict[str, Any], field: str, valid_part: str) -> None:
    request = _request(**overrides)
    with pytest.raises(RequestError) as info:
        resolve_request(request, CATALOG)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.field == field
    message = str(err)
    assert field in message
    assert repr(err.value) in message
    assert valid_part in str(err.valid) and valid_part in message


@pytest.mark.parametrize("field,bad", [("memory_per_worker", "16GB"), ("head_memory", "lots")])
def test_bad_quantity_bypassing_the_model(field: str, bad: str) -> None:
    # ClusterRequest refuses these itself; resolve_request must too (model_construct skips
    # pydantic validation, as do requests rebuilt from stored state).
    request = ClusterRequest.model_construct(**{**_request().model_dump(), field: bad})
    with pytest.raises(RequestError) as info:
        resolve_request(request, CATALOG)
    assert info.value.field == field and bad in str(info.value) and "Gi" in str(info.value)


def test_headroom_is_applied() -> None:
    h100 = CATALOG.get("h100-80gb")
    assert usable_cpus(h100) == pytest.approx(h100.cpus_per_node * (1 - NODE_HEADROOM_FRACTION))
    assert usable_memory_bytes(h100) < h100.memory_per_node_bytes
    assert usable_memory_bytes(h100) % 2**20 == 0


def test_unknown_pool_lists_every_valid_pool() -> None:
    with pytest.raises(RequestError) as info:
        resolve_request(_request(gpu_pool="tpu-v5"), CATALOG)
    assert info.value.valid == CATALOG.names()
    for name in CATALOG.names():
        assert name in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    request = _request(name="1ranker", gpu_pool="l4", gpus_per_worker=9, cpus_per_worker=500 / 2,
                       memory_per_worker="100Mi", head_memory="64Mi",
                       labels={"ray.io/node-type": "x"})
    with pytest.raises(RequestErrors) as info:
        resolve_request(request, CATALOG)
    err = info.value
    assert isinstance(err, RequestError) and isinstance(err, ValueError)
    assert err.fields == ["name", "memory_per_worker", "head_memory", "gpus_per_worker", "image",
                          "cpus_per_worker", "labels"]
    assert (err.field, err.value) == ("name", "1ranker")  # the first, for single-error handlers
    message = str(err)
    assert message.startswith("7 problems in the request:\n")
    for problem in err.problems:
        assert f"invalid {problem.field}={problem.value!r}" in message
        assert "valid:" in str(problem)


def test_an_unknown_pool_still_reports_the_other_problems() -> None:
    with pytest.raises(RequestErrors) as info:
        resolve_request(_request(gpu_pool="h100", head_cpus=1.23456, labels={"bad key": "v"}),
                        CATALOG)
    assert info.value.fields == ["gpu_pool", "head_cpus", "labels"]


def test_one_problem_reads_like_a_single_error() -> None:
    with pytest.raises(RequestErrors) as info:
        resolve_request(_request(gpu_pool="local", workers=5), CATALOG)
    assert str(info.value) == str(info.value.problems[0])
    assert "\n" not in str(info.value)


def test_the_resolved_request_carries_its_pool_and_is_frozen() -> None:
    resolved = resolve_request(_request(gpu_pool="cpu-standard"), CATALOG)
    assert resolved.pool is CATALOG.get("cpu-standard")
    with pytest.raises(Exception):
        resolved.pool = CATALOG.get("local")  # type: ignore[misc]
    with pytest.raises(ValueError):
        ResolvedRequest(_request(gpu_pool="local"), CATALOG.get("l4"))
    moved = resolved.in_namespace("team-b")
    assert moved.namespace == "team-b" and moved.pool is resolved.pool
    with pytest.raises(RequestErrors, match="namespace"):
        resolved.in_namespace("Team B")


# ---- worker sizes from the pool (issue 6, item 8) ---------------------------------------------
@pytest.mark.parametrize("pool,gpus,cpus,memory", [
    # per GPU: (node CPUs x 0.9) // GPUs per node, (node memory x 0.9) // GPUs per node in GiB
    ("h100-80gb", 8, 184.0, "1680Gi"),   # 208 CPUs, 1872Gi, 8 GPUs: 23 CPUs + 210Gi per GPU
    ("h100-80gb", 1, 23.0, "210Gi"),
    ("l4", 2, 20.0, "86Gi"),             # 96 CPUs, 384Gi, 8 GPUs: 10 CPUs + 43Gi per GPU
    ("a100-80gb", 4, 40.0, "612Gi"),     # 96 CPUs, 1360Gi, 8 GPUs: 10 CPUs + 153Gi per GPU
    ("cpu-standard", 0, 1.0, "4Gi"),     # CPU pools keep 1 CPU, 4Gi
    ("local", 0, 1.0, "4Gi"),
])
def test_gpu_workers_get_a_share_of_the_node_by_default(pool: str, gpus: int, cpus: float,
                                                         memory: str) -> None:
    image = {"image": GPU_IMAGE} if gpus else {}
    resolved = resolve_request(_request(gpu_pool=pool, gpus_per_worker=gpus, **image), CATALOG)
    assert (resolved.request.cpus_per_worker, resolved.request.memory_per_worker) == (cpus, memory)
    assert default_worker_resources(CATALOG.get(pool), gpus) == (cpus, memory)


def test_default_shares_fit_every_worker_of_a_node() -> None:
    for pool in CATALOG:
        for gpus in range(1, pool.gpus_per_node + 1):
            cpus, memory = default_worker_resources(pool, gpus)
            per_node = pool.gpus_per_node // gpus
            assert per_node * cpus <= usable_cpus(pool)
            assert per_node * parse_memory(memory) <= usable_memory_bytes(pool)


def test_explicit_sizes_override_the_pool_share() -> None:
    resolved = resolve_request(_request(gpu_pool="h100-80gb", gpus_per_worker=8, image=GPU_IMAGE,
                                        cpus_per_worker=32, memory_per_worker="256Gi"), CATALOG)
    assert (resolved.request.cpus_per_worker, resolved.request.memory_per_worker) == (32, "256Gi")
    only_cpus = resolve_request(_request(gpu_pool="l4", gpus_per_worker=1, image=GPU_IMAGE,
                                         cpus_per_worker=4), CATALOG)
    assert (only_cpus.request.cpus_per_worker, only_cpus.request.memory_per_worker) == (4, "43Gi")


def test_a_bad_gpu_count_does_not_add_size_errors_for_unset_sizes() -> None:
    with pytest.raises(RequestErrors) as info:
        resolve_request(_request(gpu_pool="h100-80gb", gpus_per_worker=12, image=GPU_IMAGE), CATALOG)
    assert info.value.fields == ["gpus_per_worker"]
