"""Golden files: the rendered manifests for a table of requests, reviewed as YAML.

Regenerate after an intended change with
``UPDATE_GOLDEN=1 .venv/bin/python -m pytest ads_ranking_pipelines_tests/kuberay/test_golden.py``
and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.kuberay.cases import CASES, SUBMISSION_ID, Case

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def render(case: Case) -> dict[str, dict[str, Any]]:
    resolved = resolve_request(case.request, load_catalog())
    return {
        "raycluster": build_raycluster(resolved, **case.label_kwargs()),
        "rayjob": build_rayjob(
            resolved, entrypoint=case.entrypoint, submission_id=SUBMISSION_ID,
            runtime_env=case.runtime_env, **case.label_kwargs(),
        ),
    }


def dump(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=100)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("kind", ["raycluster", "rayjob"])
def test_matches_golden(case: Case, kind: str) -> None:
    rendered = dump(render(case)[kind])
    path = GOLDEN_DIR / f"{case.name}.{kind}.yaml"
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(rendered, encoding="utf-8")
    assert path.exists(), f"{path} missing; run with UPDATE_GOLDEN=1 to create it"
    assert rendered == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from the rendered {kind}; if intended, regenerate with UPDATE_GOLDEN=1"
    )


def test_rendering_is_deterministic() -> None:
    for case in CASES:
        assert dump(render(case)["rayjob"]) == dump(render(case)["rayjob"])


def test_no_orphan_golden_files() -> None:
    expected = {f"{c.name}.{k}.yaml" for c in CASES for k in ("raycluster", "rayjob")}
    assert {p.name for p in GOLDEN_DIR.glob("*.yaml")} == expected
