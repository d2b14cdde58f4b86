"""Render the chart offline with the Helm v4 engine embedded in ``helm-python-sdk``.

``Chart.render`` ignores the chart's ``values.yaml`` unless given ``merge_values(...)`` (what
``helm template`` does), so :func:`render` always merges. Value sets live in the chart's
``ci/`` folder (the chart-testing convention), so ``helm lint -f ci/<set>-values.yaml`` and
``ct lint`` read the same files the tests do.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import helm_python
import yaml

from ads_ranking_pipelines_tests.helm.rbac_file import CHART_DIR

RELEASE = "ads-ranking-pipelines"
NAMESPACE = "dagster"
VALUE_SETS = {p.name.removesuffix("-values.yaml"): p for p in sorted((CHART_DIR / "ci").glob("*-values.yaml"))}
EXAMPLES = CHART_DIR / "examples"


@functools.lru_cache(maxsize=1)
def chart() -> helm_python.Chart:
    return helm_python.Chart.load(str(CHART_DIR))


def value_set(name: str) -> dict[str, Any]:
    return yaml.safe_load(VALUE_SETS[name].read_text(encoding="utf-8"))


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` deep-merged onto a copy of ``base`` (maps merge, anything else replaces)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render_files(values: Mapping[str, Any], *, release: str = RELEASE,
                 namespace: str = NAMESPACE) -> dict[str, str]:
    c = chart()
    return c.render(c.merge_values(dict(values)), name=release, namespace=namespace)


def render(values: Mapping[str, Any], *, release: str = RELEASE,
           namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every object the chart renders for ``values`` (NOTES.txt left out)."""
    objects = []
    for path, text in sorted(render_files(values, release=release, namespace=namespace).items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def kinds_and_names(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((o["kind"], o["metadata"]["name"]) for o in objects)


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {kinds_and_names(found)}"
    return found[0]


def all_of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod_templates(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, PodTemplateSpec) of every workload the chart renders."""
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield o["metadata"]["name"], o["spec"]["template"]


def env_of(container: Mapping[str, Any]) -> dict[str, Any]:
    """name -> value (or the valueFrom mapping) of a container's env."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or ()}
