"""How the CLI, X-Ray and the Dagster resources word things for a person: request errors
naming the CLI option and field, pydantic errors with their bounds, DNS-safe names, ages, and
manifests as YAML or JSON. Pure text; shared by every front end (a layer below them)."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import yaml
from pydantic import ValidationError

from ads_ranking_pipelines.config.errors import QUOTE_LIMIT, clause, format_validation_error, quoted  # noqa: F401 - shared
from ads_ranking_pipelines.config.validation import RequestError, RequestErrors

# ClusterRequest field -> the option that sets it, for error messages.
FIELD_OPTIONS = {
    "name": "--name", "owner": "--owner", "gpu_pool": "--gpu-pool", "workers": "--workers",
    "gpus_per_worker": "--gpus-per-worker", "cpus_per_worker": "--cpus-per-worker",
    "memory_per_worker": "--memory", "head_cpus": "--head-cpus", "head_memory": "--head-memory",
    "image": "--image", "namespace": "--namespace", "labels": "--label",
    "autoscaling": "--autoscaling", "entrypoint": "--entrypoint",
    "submission_id": "--submission-id", "working_dir": "--working-dir",
}


def option_for(field_name: str) -> str:
    head = field_name.split(".")[0].split("[")[0]
    option = FIELD_OPTIONS.get(head)
    return f"{option} ({field_name})" if option else field_name


def request_error(exc: RequestError) -> str:
    if isinstance(exc, RequestErrors):
        return exc.describe(request_error)
    valid = ", ".join(map(str, exc.valid)) if isinstance(exc.valid, (list, tuple)) else exc.valid
    return clause(option_for(exc.field), exc.value, exc.reason or None, str(valid))


def validation_error(exc: ValidationError) -> str:
    """A front end's wording of a request's pydantic errors: each field with its option."""
    return format_validation_error(exc, name=option_for)


def dns_name(text: str, limit: int = 47) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = "ray-" + name
    return name[:limit].rstrip("-")


def dump(obj: Any, fmt: str) -> str:
    """``obj`` as ``yaml`` or ``json`` text."""
    if str(getattr(fmt, "value", fmt)) == "json":
        return json.dumps(obj, indent=2, default=str) + "\n"
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=100)


def age(created_at: dt.datetime | None, now: dt.datetime | None = None) -> str:
    if created_at is None:
        return "?"
    now = now or dt.datetime.now(dt.timezone.utc)
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=dt.timezone.utc)
    seconds = max(0, int((now - created_at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
