"""The create form → a resolved cluster request, validated by the code the CLI and Dagster use
(``ClusterRequest``, then ``resolve_request`` with the image check on KubeRay, as ``cluster
create`` does, or ``backends.factory.local_request``: every problem at once), with the CLI's wording: ``invalid --gpus-per-worker (gpus_per_worker) = 99: …``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ads_ranking_pipelines.backends import factory
from ads_ranking_pipelines.config.messages import (
    QUOTE_LIMIT,
    dns_name,
    quoted,
    request_error,
    validation_error,
)
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.images import image_problems
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.config.validation import (
    RequestError,
    RequestErrors,
    ResolvedRequest,
    resolve_request,
)

# Form fields, in order, with their defaults (the CLI's option defaults; empty sizes are
# filled from the pool like the CLI's).
FIELDS: dict[str, str] = {
    "backend": "local", "name": "", "owner": "", "gpu_pool": "", "workers": "1",
    "gpus_per_worker": "0", "cpus_per_worker": "", "memory_per_worker": "", "namespace": "",
    "notebook": "",
}
VALID_FIELDS = ", ".join(FIELDS)
UNKNOWN_SHOWN = 20  # unknown fields named in one message (then how many more)
# The "Notebook support" checkbox (KubeRay; local clusters can always start a notebook).
NOTEBOOK_YES, NOTEBOOK_NO = ("yes", "on", "true", "1"), ("", "no", "off", "false", "0")


def notebook_support(values: Mapping[str, str]) -> bool:
    return values.get("backend") == "kuberay" and values.get("notebook", "").lower() in NOTEBOOK_YES


@dataclass
class FormResult:
    values: dict[str, str]
    resolved: ResolvedRequest | None = None
    errors: list[str] = field(default_factory=list)
    fields: set[str] = field(default_factory=set)  # form fields named by an error

    @property
    def ok(self) -> bool:
        return self.resolved is not None and not self.errors

    @property
    def request(self) -> ClusterRequest | None:
        return self.resolved.request if self.resolved else None


def _number(text: str) -> Any:
    """``"99"`` → 99 and ``"1.5"`` → 1.5 (so messages show numbers as the CLI does); other
    text is passed on for pydantic to refuse with the field's name; empty → unset."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class BodyError(ValueError):
    """A JSON create body the form does not understand; ``fields``: the fields it names."""

    def __init__(self, message: str, fields: list[str] | None = None) -> None:
        super().__init__(message)
        self.fields = sorted(fields or [])


def _json_kind(body: Any) -> str:
    if body is None:
        return "JSON null"
    kinds = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}
    return f"a JSON {kinds.get(type(body), type(body).__name__)}"


def json_form(body: Any) -> dict[str, Any]:
    """The create form's fields from a decoded JSON body: an object of known fields whose values
    are strings, numbers, booleans or null; :class:`BodyError` naming what is not."""
    if not isinstance(body, dict):
        raise BodyError(f"invalid body = {_json_kind(body)}: it must be a JSON object with the "
                        f"create form's fields; valid fields: {VALID_FIELDS}")
    unknown = [quoted(k) for k in body if k not in FIELDS]
    if unknown:
        more = len(unknown) - UNKNOWN_SHOWN
        names = ", ".join(unknown[:UNKNOWN_SHOWN]) + (f" and {more} more" if more > 0 else "")
        raise BodyError(f"unknown field{'s' if len(unknown) > 1 else ''} {names}; valid fields: "
                        f"{VALID_FIELDS}", [k[:QUOTE_LIMIT] for k in body if k not in FIELDS][:UNKNOWN_SHOWN])
    nested = [k for k, v in body.items() if isinstance(v, (dict, list))]
    if nested:
        raise BodyError("; ".join(f"invalid {k} = {quoted(body[k])}: a JSON object or array; "
                                  "valid: a string, number or boolean" for k in nested), nested)
    return body


def _text(value: Any) -> str:
    """A form or JSON value as the form's text: null → empty; 0 and false stay values."""
    return "" if value is None else str(value).strip()


def form_values(form: Mapping[str, Any], default_owner: str, catalog: PoolCatalog) -> dict[str, str]:
    values = {k: _text(form.get(k, default)) for k, default in FIELDS.items()}
    values["owner"] = values["owner"] or default_owner
    values["gpu_pool"] = values["gpu_pool"] or catalog.default_pool
    return values


def _fields(values: dict[str, str], settings: Settings, namespaces: tuple[str, ...]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": values["name"] or dns_name(f"{values['owner']}-{values['gpu_pool']}"),
        "owner": values["owner"], "gpu_pool": values["gpu_pool"],
        "memory_per_worker": values["memory_per_worker"] or None,
        **{k: _number(values[k]) for k in ("workers", "gpus_per_worker", "cpus_per_worker")},
    }
    if values["backend"] == "kuberay":
        fields.update(factory.kuberay_fields(settings, factory.ray_image(settings)))
        fields["namespace"] = values["namespace"] or namespaces[0]
    return {k: v for k, v in fields.items() if v is not None}


def parse_request(values: dict[str, str], catalog: PoolCatalog, backends: tuple[str, ...],
                  namespaces: tuple[str, ...], settings: Settings) -> FormResult:
    result = FormResult(values)
    backend = values["backend"]
    if values["notebook"].lower() not in NOTEBOOK_YES + NOTEBOOK_NO:
        result.errors.append(f"invalid notebook = {quoted(values['notebook'])}; valid: yes, no")
        result.fields.add("notebook")
        return result
    if backend not in backends:
        result.errors.append(f"invalid --backend = {quoted(backend)}; valid: {', '.join(backends)}")
        result.fields.add("backend")
        return result
    fields = _fields(values, settings, namespaces)
    if backend == "kuberay" and fields["namespace"] not in namespaces:
        result.errors.append(f"invalid --namespace (namespace) = {quoted(fields['namespace'])}; "
                             f"valid: {', '.join(namespaces)}")
        result.fields.add("namespace")
        return result
    try:
        request = ClusterRequest(**fields)
        if backend == "kuberay":  # what `cluster create --backend kuberay` checks
            result.resolved = resolve_request(request, catalog, extra_problems=image_problems(
                request.image or None, field="image"))
        else:
            result.resolved = factory.local_request(request, catalog)
    except ValidationError as exc:
        result.errors.append(validation_error(exc))
        result.fields.update(str(e["loc"][0]) for e in exc.errors() if e.get("loc"))
    except RequestError as exc:
        problems = exc.problems if isinstance(exc, RequestErrors) else (exc,)
        result.errors.extend(request_error(p) for p in problems)
        result.fields.update(p.field.split(".")[0].split("[")[0] for p in problems)
    return result
