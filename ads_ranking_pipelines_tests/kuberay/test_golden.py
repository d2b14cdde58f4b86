"""Golden files: the rendered manifests for a table of requests, reviewed as YAML.

The tests only compare; they never write. After an intended change, regenerate with
``.venv/bin/python -m ads_ranking_pipelines_tests.kuberay.update_golden``, review
``git diff``, then run the tests: no flag can turn a differing file green.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ads_ranking_pipelines_tests.kuberay import update_golden
from ads_ranking_pipelines_tests.kuberay.cases import CASES, Case
from ads_ranking_pipelines_tests.kuberay.golden import (
    GOLDEN_DIR,
    KINDS,
    assert_matches_golden,
    dump,
    golden_path,
    render,
)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("kind", KINDS)
def test_matches_golden(case: Case, kind: str) -> None:
    assert_matches_golden(case, kind)


def test_rendering_is_deterministic() -> None:
    for case in CASES:
        assert dump(render(case)["rayjob"]) == dump(render(case)["rayjob"])


def test_no_orphan_golden_files() -> None:
    expected = {golden_path(c, k).name for c in CASES for k in KINDS}
    assert {p.name for p in GOLDEN_DIR.glob("*.yaml")} == expected


def test_no_update_flag_can_pass_a_differing_golden_file(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[0]
    assert update_golden.write_all(tmp_path) == sorted(golden_path(c, k, tmp_path).name
                                                       for c in CASES for k in KINDS)
    assert_matches_golden(case, "raycluster", tmp_path)
    stale = golden_path(case, "raycluster", tmp_path)
    stale.write_text("stale\n", encoding="utf-8")
    for flag in ("UPDATE_GOLDEN", "UPDATE_SNAPSHOTS", "REGENERATE"):
        monkeypatch.setenv(flag, "1")
    with pytest.raises(AssertionError, match="differs from the rendered raycluster"):
        assert_matches_golden(case, "raycluster", tmp_path)
    assert stale.read_text(encoding="utf-8") == "stale\n"  # the test did not rewrite it
    assert update_golden.write_all(tmp_path) == [stale.name]  # only the regenerator does
