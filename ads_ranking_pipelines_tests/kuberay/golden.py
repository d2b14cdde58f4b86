"""The golden manifests: what a case renders, where its file is, and the comparison (shared by
the tests, which only compare, and ``update_golden``, which writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.kuberay.cases import SUBMISSION_ID, Case

GOLDEN_DIR = Path(__file__).parent / "golden"
KINDS = ("raycluster", "rayjob")
REGENERATE = "python -m ads_ranking_pipelines_tests.kuberay.update_golden"


def render(case: Case) -> dict[str, dict[str, Any]]:
    resolved = resolve_request(case.request, load_catalog(case.catalog))
    return {
        "raycluster": build_raycluster(resolved, **case.label_kwargs()),
        "rayjob": build_rayjob(
            resolved, entrypoint=case.entrypoint, submission_id=SUBMISSION_ID,
            runtime_env=case.runtime_env, **case.label_kwargs(),
        ),
    }


def dump(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=100)


def golden_path(case: Case, kind: str, golden_dir: Path = GOLDEN_DIR) -> Path:
    return golden_dir / f"{case.name}.{kind}.yaml"


def assert_matches_golden(case: Case, kind: str, golden_dir: Path = GOLDEN_DIR) -> None:
    path = golden_path(case, kind, golden_dir)
    assert path.exists(), f"{path} missing; create it with `{REGENERATE}` and review it"
    assert dump(render(case)[kind]) == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from the rendered {kind}; if intended, regenerate with "
        f"`{REGENERATE}` and review the diff"
    )
