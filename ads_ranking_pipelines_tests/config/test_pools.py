from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from ads_ranking_pipelines.config.pools import (
    CATALOG_ENV_VAR,
    NODE_LABEL_PROVIDERS,
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
    # GKE sets this label on the A3 node pool; nvidia.com/gpu.product (GPU feature discovery)
    # is not there on GKE's managed GPU stack, so pods selecting on it stay Pending forever.
    assert h100.node_selector == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
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


# ---- node labels per provider (issue 6, item 7) -----------------------------------------------
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pool-catalogs"


def test_shipped_catalog_is_one_consistent_provider_gke() -> None:
    catalog = load_catalog()
    assert catalog.provider == "gke"
    gke = NODE_LABEL_PROVIDERS["gke"]
    for pool in catalog:
        assert set(pool.node_selector) <= gke.labels, pool.name
        if pool.has_gpus:
            assert pool.node_selector == {"cloud.google.com/gke-accelerator": pool.gpu_type}


def _gpu_pool(selector: dict[str, str], **extra: object) -> dict[str, object]:
    return {"name": "h100", "gpu_type": "nvidia-h100-80gb", "gpu_product": "NVIDIA-H100-80GB-HBM3",
            "machine_type": "p5.48xlarge", "gpus_per_node": 8, "cpus_per_node": 192,
            "memory_per_node": "2048Gi", "max_workers": 8, "node_selector": selector, **extra}


LOCAL = {"name": "local", "cpus_per_node": 1, "memory_per_node": "1Gi", "max_workers": 1,
         "local": True}


@pytest.mark.parametrize("provider,selector,needles", [
    # today's H100 pool in a GKE catalog: GPU feature discovery labels are not set on GKE
    ("gke", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
     ["'nvidia.com/gpu.product', a label gpu-operator nodes carry but gke nodes do not",
      "must select cloud.google.com/gke-accelerator: nvidia-h100-80gb"]),
    ("gke", {"cloud.google.com/gke-accelerator": "nvidia-h100"}, ["got 'nvidia-h100'"]),
    ("eks", {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
     ["a label gke nodes carry", "node.kubernetes.io/instance-type: p5.48xlarge"]),
    ("gpu-operator", {"node.kubernetes.io/instance-type": "p5.48xlarge"},
     ["nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3"]),
])
def test_a_selector_on_labels_the_provider_does_not_set_is_refused(
        tmp_path: Path, provider: str, selector: dict[str, str], needles: list[str]) -> None:
    path = _write(tmp_path, {"provider": provider, "pools": [LOCAL, _gpu_pool(selector)]})
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    message = str(info.value)
    assert f"provider {provider!r}" in message and "'h100'" in message
    assert "valid providers: gke, eks, gpu-operator, custom" in message
    for needle in needles:
        assert needle in message, message


@pytest.mark.parametrize("provider,selector", [
    ("gke", {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}),
    ("eks", {"node.kubernetes.io/instance-type": "p5.48xlarge"}),
    ("gpu-operator", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    ("custom", {"example.com/gpu": "h100"}),
])
def test_each_provider_accepts_its_own_gpu_label(tmp_path: Path, provider: str,
                                                  selector: dict[str, str]) -> None:
    catalog = load_catalog(_write(tmp_path, {"provider": provider,
                                             "pools": [LOCAL, _gpu_pool(selector)]}))
    assert catalog.provider == provider and catalog.get("h100").node_selector == selector


@pytest.mark.parametrize("name,provider", [("eks.yaml", "eks"), ("gpu-operator.yaml", "gpu-operator")])
def test_example_catalogs_for_other_providers_load(name: str, provider: str) -> None:
    catalog = load_catalog(EXAMPLES / name)
    assert catalog.provider == provider and "h100-80gb" in catalog
    label = NODE_LABEL_PROVIDERS[provider].gpu_label
    assert all(label in p.node_selector for p in catalog if p.has_gpus)


# ---- Kueue pools -------------------------------------------------------------------------------
def test_kueue_pool_leaves_the_run_limit_to_kueue_and_others_must_keep_one() -> None:
    from ads_ranking_pipelines.config.dagster_instance import GPU_POOL_TAG, instance_settings

    catalog = load_catalog(EXAMPLES / "gke-kueue.yaml")
    h100 = catalog.get("h100-80gb")
    assert h100.kueue is not None and h100.kueue.local_queue == "ads-ranking-h100"
    assert h100.kueue.priority_class("backfill") == "ads-ranking-backfill"
    assert h100.max_concurrent_runs is None
    limits = instance_settings(catalog)["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {entry["value"] for entry in limits} == {"local", "l4"}  # none for the Kueue pool
    assert all(entry["key"] == GPU_POOL_TAG for entry in limits)
    base = {"name": "gpu", "cpus_per_node": 8, "memory_per_node": "32Gi", "max_workers": 1}
    with pytest.raises(ValueError, match="max_concurrent_runs unset.*kueue"):
        GpuPool(**base, max_concurrent_runs=None)
    with pytest.raises(ValueError, match="local_queue"):
        GpuPool(**base, kueue={"local_queue": "Not A Name!"})
    with pytest.raises(ValueError, match="priority_classes"):
        GpuPool(**base, kueue={"local_queue": "q", "priority_classes": {"urgent": "x"}})
    with pytest.raises(ValueError, match="cannot use Kueue"):
        GpuPool(**base, local=True, kueue={"local_queue": "q"})


_LOCAL = {"name": "local", "local": True, "cpus_per_node": 8, "memory_per_node": "32Gi", "max_workers": 4}
_GPU = {"name": "g", "gpu_type": "nvidia-l4", "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        "gpus_per_node": 8, "cpus_per_node": 96, "memory_per_node": "384Gi", "max_workers": 4}


def test_cost_rates_and_budgets_load_from_the_catalog(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path, {"pools": [
        {**_LOCAL, "cost_per_worker_hour": 0.5, "budget_cost": 2},
        {**_GPU, "cost_per_gpu_hour": 1.2, "budget_gpu_hours": 40, "budget_cost": 100}]}))
    assert (catalog.get("local").cost_per_worker_hour, catalog.get("local").budget_cost) == (0.5, 2)
    g = catalog.get("g")
    assert (g.cost_per_gpu_hour, g.budget_gpu_hours, g.budget_cost) == (1.2, 40, 100)
    shipped = load_catalog().get("h100-80gb")
    assert shipped.cost_per_gpu_hour is None and shipped.budget_gpu_hours is None      # unknown, not invented


@pytest.mark.parametrize("pool, needle", [
    ({**_LOCAL, "budget_gpu_hours": 3}, "pool 'local' has no GPUs, so budget_gpu_hours=3 never binds; valid: "
                                        "budget_cost with cost_per_worker_hour"),
    ({**_GPU, "budget_cost": 9}, "pool 'g' has budget_cost=9 but no cost rate; valid: set cost_per_gpu_hour"),
    ({**_GPU, "cost_per_gpu_hour": -1}, "cost_per_gpu_hour\n  Input should be greater than or equal to 0"),
    ({**_GPU, "budget_gpu_hours": 0}, "budget_gpu_hours\n  Input should be greater than 0"),
])
def test_bad_cost_or_budget_names_the_value_and_what_is_valid(tmp_path: Path, pool: dict, needle: str) -> None:
    pools = [pool] if pool["name"] == "local" else [_LOCAL, pool]
    with pytest.raises(CatalogError) as info:
        load_catalog(_write(tmp_path, {"pools": pools}))
    assert needle in str(info.value)
