"""The create form → a :class:`ClusterRequest`, validated by the code the CLI uses
(``ClusterRequest`` + ``config.validation.validate_request``), with the CLI's wording:
``invalid --gpus-per-worker (gpus_per_worker) = 99: …; valid: …``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ads_ranking_pipelines.cli.backend_factory import (
    GPU_IMAGE,
    dns_name,
    request_error,
    validation_error,
)
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.validation import RequestError, validate_request

# Form fields, in order, with their defaults (the CLI's option defaults).
FIELDS: dict[str, str] = {
    "backend": "local", "name": "", "owner": "", "gpu_pool": "", "workers": "1",
    "gpus_per_worker": "0", "cpus_per_worker": "1", "memory_per_worker": "4Gi",
    "namespace": "",
}


@dataclass
class FormResult:
    values: dict[str, str]
    request: ClusterRequest | None = None
    errors: list[str] = field(default_factory=list)
    fields: set[str] = field(default_factory=set)  # form fields named by an error

    @property
    def ok(self) -> bool:
        return self.request is not None and not self.errors


def _number(text: str) -> Any:
    """``"99"`` → 99 and ``"1.5"`` → 1.5 (so messages show numbers as the CLI does); other
    text is passed on for pydantic to refuse with the field's name."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def form_values(form: Mapping[str, Any], default_owner: str, catalog: PoolCatalog) -> dict[str, str]:
    values = {k: str(form.get(k, default) or "").strip() for k, default in FIELDS.items()}
    values["owner"] = values["owner"] or default_owner
    values["gpu_pool"] = values["gpu_pool"] or catalog.default_pool
    return values


def parse_request(values: dict[str, str], catalog: PoolCatalog, backends: tuple[str, ...],
                  namespaces: tuple[str, ...]) -> FormResult:
    result = FormResult(values)
    if values["backend"] not in backends:
        result.errors.append(f"invalid --backend = {values['backend']!r}; valid: {', '.join(backends)}")
        result.fields.add("backend")
        return result
    pool = values["gpu_pool"]
    fields: dict[str, Any] = {
        "name": values["name"] or dns_name(f"{values['owner']}-{pool}"), "owner": values["owner"],
        "gpu_pool": pool, "memory_per_worker": values["memory_per_worker"],
        **{k: _number(values[k]) for k in ("workers", "gpus_per_worker", "cpus_per_worker")},
    }
    if values["backend"] == "kuberay":
        fields["namespace"] = values["namespace"] or namespaces[0]
        if fields["namespace"] not in namespaces:
            result.errors.append(f"invalid --namespace (namespace) = {fields['namespace']!r}; "
                                 f"valid: {', '.join(namespaces)}")
            result.fields.add("namespace")
            return result
    if pool in catalog and catalog.get(pool).has_gpus:
        fields["image"] = GPU_IMAGE
    try:
        request = ClusterRequest(**fields)
        validate_request(request, catalog)
    except ValidationError as exc:
        result.errors.append(validation_error(exc))
        result.fields.update(str(e["loc"][0]) for e in exc.errors() if e.get("loc"))
        return result
    except RequestError as exc:
        result.errors.append(request_error(exc))
        result.fields.add(exc.field.split(".")[0].split("[")[0])
        return result
    if values["backend"] == "local":
        _check_local(request, catalog, result)
    if not result.errors:
        result.request = request
    return result


def _check_local(request: ClusterRequest, catalog: PoolCatalog, result: FormResult) -> None:
    """The local backend has no GPUs (the check and words of ``cluster create --backend local``)."""
    pool = catalog.get(request.gpu_pool)
    if pool.has_gpus or request.gpus_per_worker:
        cpu_pools = ", ".join(p.name for p in catalog if not p.has_gpus)
        result.errors.append(f"invalid --gpu-pool (gpu_pool) = {request.gpu_pool!r}: the local "
                             f"backend has no GPUs; valid: {cpu_pools}")
        result.fields.add("gpu_pool")
