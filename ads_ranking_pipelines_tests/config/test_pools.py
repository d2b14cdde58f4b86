from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from ads_ranking_pipelines.config.pools import (
    CATALOG_ENV_VAR,
    CatalogError,
    GpuPool,
    UnknownPoolError,
    catalog_path_from_env,
    load_catalog,
)


def test_shipped_catalog_has_the_expected_pools() -> None:
    catalog = load_catalog()
    assert catalog.names() == ["a100-80gb", "cpu-standard", "h100-80gb", "l4", "local"]
    assert catalog.default_pool == "local"
    local = catalog.get("local")
    assert local.local and not local.has_gpus and local.node_selector == {}


def test_gpu_pools_select_and_tolerate_gpu_nodes() -> None:
    catalog = load_catalog()
    for pool in catalog:
        if not pool.has_gpus:
            assert pool.gpu_type is None and not pool.tolerations
            continue
        assert pool.gpu_type and pool.gpu_product and pool.node_selector
        assert [t.to_k8s() for t in pool.tolerations] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    assert catalog.get("l4").node_selector == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert catalog.get("a100-80gb").node_selector == {
        "cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
    h100 = catalog.get("h100-80gb")
    assert h100.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert h100.gpu_product == "NVIDIA-H100-80GB-HBM3"
    assert h100.gpus_per_node == 8 and h100.cpus_per_node >= 192
    assert h100.memory_per_node_bytes >= 1800 * 2**30


def test_unknown_pool_names_the_bad_one_and_lists_valid_ones() -> None:
    with pytest.raises(UnknownPoolError) as info:
        load_catalog().get("h100")
    message = str(info.value)
    assert "'h100'" in message
    for name in ("local", "cpu-standard", "l4", "a100-80gb", "h100-80gb"):
        assert name in message
    assert info.value.name == "h100" and "h100-80gb" in info.value.valid
    assert isinstance(info.value, LookupError)


def test_catalog_path_from_env_reads_only_the_given_mapping() -> None:
    assert catalog_path_from_env({}) is None
    assert catalog_path_from_env({CATALOG_ENV_VAR: "  "}) is None
    assert catalog_path_from_env({CATALOG_ENV_VAR: "/etc/pools.yaml"}) == "/etc/pools.yaml"


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_load_catalog_override(tmp_path: Path) -> None:
    path = _write(tmp_path, {"default_pool": "tiny", "pools": [
        {"name": "tiny", "cpus_per_node": 2, "memory_per_node": "8Gi", "max_workers": 1,
         "local": True},
        {"name": "t4", "gpu_type": "nvidia-tesla-t4", "gpus_per_node": 4, "cpus_per_node": 48,
         "memory_per_node": "192Gi", "max_workers": 4,
         "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}]},
    ]})
    catalog = load_catalog(path)
    assert catalog.names() == ["t4", "tiny"]
    assert catalog.get("t4").tolerations[0].to_k8s() == {
        "key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    assert load_catalog(str(path)) == catalog


@pytest.mark.parametrize("data,needle", [
    ({"pools": []}, "default_pool"),
    ({"pools": [{"name": "local", "cpus_per_node": 1, "memory_per_node": "1Gi", "max_workers": 1},
                {"name": "local", "cpus_per_node": 1, "memory_per_node": "1Gi", "max_workers": 1}]},
     "duplicate"),
    ({"pools": [{"name": "local", "cpus_per_node": 1, "memory_per_node": "1GB", "max_workers": 1}]},
     "1GB"),
    ({"pools": [{"name": "local", "cpus_per_node": 1, "memory_per_node": "1Gi", "max_workers": 1,
                 "gpus_per_node": 2}]}, "gpu_type"),
    ({"pools": [{"name": "local", "cpus_per_node": 1, "memory_per_node": "1Gi", "max_workers": 1,
                 "surprise": 1}]}, "surprise"),
    ([1, 2], "mapping"),
])
def test_invalid_catalogs(tmp_path: Path, data: object, needle: str) -> None:
    with pytest.raises(CatalogError) as info:
        load_catalog(_write(tmp_path, data))
    assert needle in str(info.value)


def test_missing_catalog_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(tmp_path / "nope.yaml")


def test_pool_model_rules() -> None:
    base = {"name": "p", "cpus_per_node": 4, "memory_per_node": "16Gi", "max_workers": 2}
    with pytest.raises(ValidationError, match="gpus_per_node 0"):
        GpuPool(**base, gpu_type="nvidia-l4")
    with pytest.raises(ValidationError, match="local pool"):
        GpuPool(**base, local=True, node_selector={"a": "b"})
    with pytest.raises(ValidationError, match="Exists cannot set a value"):
        GpuPool(**base, tolerations=[{"key": "k", "operator": "Exists", "value": "v"}])
