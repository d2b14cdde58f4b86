"""Hypothesis strategies for ClusterRequests that fit the shipped catalog, and for ways to
break them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import GpuPool, PoolCatalog
from ads_ranking_pipelines.config.validation import usable_cpus, usable_memory_bytes

GPU_IMAGE = "rayproject/ray:2.60.0-py311-gpu"
CPU_IMAGE = "rayproject/ray:2.60.0-py311-cpu"

names = st.from_regex(r"\A[a-z]([-a-z0-9]{0,45}[a-z0-9])?\Z")
label_keys = st.builds(
    lambda prefix, name: prefix + name,
    st.sampled_from(["", "example.com/", "corp.example/"]),
    st.from_regex(r"\A[a-z]([-a-z0-9_.]{0,30}[a-z0-9])?\Z"),
)
free_text = st.text(max_size=80)


def _memory(min_mib: int, max_mib: int) -> st.SearchStrategy[str]:
    def fmt(mib: int, unit: str) -> str:
        return f"{mib // 1024}Gi" if unit == "Gi" and mib % 1024 == 0 else f"{mib}Mi"
    return st.builds(fmt, st.integers(min_mib, max_mib), st.sampled_from(["Mi", "Gi"]))


@st.composite
def valid_requests(draw: st.DrawFn, catalog: PoolCatalog) -> ClusterRequest:
    pool: GpuPool = draw(st.sampled_from(list(catalog)))
    max_cpu_millis = min(int(usable_cpus(pool) * 1000), 256_000)
    gpus = draw(st.integers(1, pool.gpus_per_node)) if pool.has_gpus else 0
    return ClusterRequest(
        name=draw(names),
        owner=draw(free_text.map(lambda s: s[:63])),
        team=draw(free_text.map(lambda s: s[:63])),
        gpu_pool=pool.name,
        workers=draw(st.integers(0, pool.max_workers)),
        gpus_per_worker=gpus,
        cpus_per_worker=draw(st.none() | st.integers(1, max_cpu_millis).map(lambda m: m / 1000)),
        memory_per_worker=draw(st.none() | _memory(512, usable_memory_bytes(pool) // 2**20)),
        head_cpus=draw(st.integers(100, 64_000)) / 1000,
        head_memory=draw(_memory(512, 256 * 1024)),
        image=GPU_IMAGE if gpus else draw(st.sampled_from([CPU_IMAGE, GPU_IMAGE])),
        ttl_seconds_after_finished=draw(st.integers(0, 7 * 24 * 3600)),
        active_deadline_seconds=draw(st.integers(60, 7 * 24 * 3600)),
        labels=draw(st.dictionaries(label_keys, free_text, max_size=4)),
        autoscaling=draw(st.booleans()),
        auth_secret_name=draw(st.none() | names),
    )


def _breakers(request: ClusterRequest, pool: GpuPool, catalog: PoolCatalog) -> list[tuple[str, dict[str, Any]]]:
    """(field, overrides) pairs each of which makes ``request`` invalid for exactly ``field``."""
    out: list[tuple[str, dict[str, Any]]] = [
        ("gpu_pool", {"gpu_pool": "no-such-pool"}),
        ("workers", {"workers": pool.max_workers + 1}),
        ("cpus_per_worker", {"cpus_per_worker": round(usable_cpus(pool) + 1, 3)}),
        ("cpus_per_worker", {"cpus_per_worker": 0.0001}),
        ("memory_per_worker", {"memory_per_worker": f"{usable_memory_bytes(pool) // 2**20 + 1}Mi"}),
        ("memory_per_worker", {"memory_per_worker": "511Mi"}),
        ("head_memory", {"head_memory": "64Mi"}),
        ("name", {"name": "0" + request.name[:46]}),
        ("labels", {"labels": {"ads-ranking.io/pool": "x"}}),
    ]
    if pool.has_gpus:
        out.append(("gpus_per_worker", {"gpus_per_worker": min(pool.gpus_per_node + 1, 16)}))
        out.append(("gpus_per_worker", {"gpus_per_worker": 0}))
        out.append(("image", {"image": CPU_IMAGE}))
    else:
        out.append(("gpus_per_worker", {"gpus_per_worker": 1, "image": GPU_IMAGE}))
    # ClusterRequest caps cpus_per_worker at 256; a bigger node cannot be over-asked that way.
    return [(f, o) for f, o in out if not (f == "cpus_per_worker" and o["cpus_per_worker"] > 256)]


@st.composite
def invalid_requests(draw: st.DrawFn, catalog: PoolCatalog) -> tuple[str, ClusterRequest]:
    """(the field at fault, a request invalid for that reason only)."""
    request = draw(valid_requests(catalog))
    pool = catalog.get(request.gpu_pool)
    field, overrides = draw(st.sampled_from(_breakers(request, pool, catalog)))
    return field, request.model_copy(update=overrides)
