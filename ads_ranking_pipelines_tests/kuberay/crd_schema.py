"""Offline validation of rendered manifests against the real KubeRay CRDs.

The CRDs live outside the repository, in ``../shared/kuberay-crds`` relative to the repo
root (override with ``ADS_RANKING_KUBERAY_CRDS``); they are never copied here. Tests that
need them skip with a clear message when the directory is absent.

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
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CRDS_DIR = REPO_ROOT.parent / "shared" / "kuberay-crds"
CRD_FILES = {
    "RayCluster": "ray.io_rayclusters.yaml",
    "RayJob": "ray.io_rayjobs.yaml",
    "RayService": "ray.io_rayservices.yaml",
}


def crds_dir() -> Path:
    override = os.environ.get(CRDS_ENV_VAR, "").strip()
    return Path(override) if override else DEFAULT_CRDS_DIR


def require_crds() -> Path:
    """The CRD directory, or skip the calling test with a message saying where to put it."""
    path = crds_dir()
    missing = [CRD_FILES[k] for k in ("RayCluster", "RayJob") if not (path / CRD_FILES[k]).is_file()]
    if missing:
        pytest.skip(
            f"KubeRay CRDs not found: {path} lacks {', '.join(missing)}. Put the KubeRay v1.7.0 "
            f"CRDs in ../shared/kuberay-crds (relative to the repo root) or point "
            f"{CRDS_ENV_VAR} at a directory holding them."
        )
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
