"""Offline validation of rendered manifests against the real KubeRay CRDs.

The KubeRay v1.7.0 CRDs are vendored next to this file (``crds/``, source and checksums in
``crds/SOURCE.md``), so no test skips for want of them. ``ADS_RANKING_KUBERAY_CRDS`` points
the tests at another directory (e.g. another KubeRay release); a directory that lacks them
fails the tests, it does not skip them.

The CRD schemas omit ``additionalProperties: false`` (the API server prunes unknown fields
silently), so a plain check misses typos. :func:`strictify` injects it into every object
schema that lists ``properties`` and does not set ``x-kubernetes-preserve-unknown-fields``.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

# The CRDs are megabytes of YAML: libyaml parses them ~20x faster than pure Python.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

CRDS_ENV_VAR = "ADS_RANKING_KUBERAY_CRDS"
DEFAULT_CRDS_DIR = Path(__file__).resolve().parent / "crds"
CRD_FILES = {
    "RayCluster": "ray.io_rayclusters.yaml",
    "RayJob": "ray.io_rayjobs.yaml",
}


def crds_dir() -> Path:
    override = os.environ.get(CRDS_ENV_VAR, "").strip()
    return Path(override) if override else DEFAULT_CRDS_DIR


def require_crds() -> Path:
    """The CRD directory; fails the calling test (never skips) when the CRDs are not there."""
    path = crds_dir()
    missing = [name for name in CRD_FILES.values() if not (path / name).is_file()]
    if missing:
        pytest.fail(
            f"KubeRay CRDs not found: {path} lacks {', '.join(missing)}. They are vendored in "
            f"{DEFAULT_CRDS_DIR.relative_to(DEFAULT_CRDS_DIR.parents[2])}; unset {CRDS_ENV_VAR} "
            "or point it at a directory holding them.", pytrace=False)
    return path


def strictify(schema: Any) -> Any:
    """A copy of ``schema`` where every object schema with ``properties`` (and without
    ``x-kubernetes-preserve-unknown-fields``) also has ``additionalProperties: false``, and
    ``nullable: true`` admits null as OpenAPI v3 means it to."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if (
                "properties" in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
                and "additionalProperties" not in node
            ):
                node["additionalProperties"] = False
            if node.get("nullable") is True and isinstance(node.get("type"), str):
                node["type"] = [node["type"], "null"]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@functools.lru_cache(maxsize=None)
def _load_schema(directory: str, kind: str, version: str) -> dict[str, Any]:
    with open(Path(directory) / CRD_FILES[kind], encoding="utf-8") as fh:
        crd = yaml.load(fh, Loader=_LOADER)  # noqa: S506 - a safe loader, libyaml when present
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == kind
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return served["schema"]["openAPIV3Schema"]
    raise LookupError(f"{kind} CRD has no version {version}")


def crd_schema(kind: str, *, version: str = "v1") -> dict[str, Any]:
    """The CRD's ``openAPIV3Schema`` for ``kind``/``version`` as written (not strict)."""
    return _load_schema(str(require_crds()), kind, version)


@functools.lru_cache(maxsize=None)
def _validator(directory: str, kind: str, version: str, strict: bool) -> jsonschema.protocols.Validator:
    schema = _load_schema(directory, kind, version)
    if strict:
        schema = strictify(schema)
    cls = jsonschema.Draft7Validator
    cls.check_schema(schema)
    return cls(schema)


def validator(kind: str, *, strict: bool = True, version: str = "v1") -> jsonschema.protocols.Validator:
    return _validator(str(require_crds()), kind, version, strict)


def schema_errors(manifest: dict[str, Any], *, strict: bool = True) -> list[str]:
    """Every schema violation in ``manifest`` (by its ``kind``), as readable lines."""
    assert manifest.get("apiVersion") == "ray.io/v1", manifest.get("apiVersion")
    v = validator(manifest["kind"], strict=strict)
    return sorted(
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in v.iter_errors(manifest)
    )


def assert_valid(manifest: dict[str, Any], *, strict: bool = True) -> None:
    errors = schema_errors(manifest, strict=strict)
    assert not errors, f"{manifest['kind']} fails the CRD schema:\n" + "\n".join(errors)
