"""``make test``'s prerequisites (scripts/test_prereqs.sh): without the public CTR samples it
stops with one line saying where they go and how to leave those tests out, instead of letting
the dataset tests skip; with them it goes on."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test_prereqs.sh"


def _checkout(tmp_path: Path) -> Path:
    """A repository-shaped folder holding the script, with nothing beside it."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / "scripts" / SCRIPT.name)
    return repo


def _run(repo: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "ADS_RANKING_SHARED_DATASETS"}
    return subprocess.run(["bash", str(repo / "scripts" / SCRIPT.name)], capture_output=True, text=True,
                          env={**environ, **env}, timeout=60)


def _samples(root: Path) -> Path:
    (root / "criteo-sample").mkdir(parents=True)
    (root / "avazu-sample").mkdir()
    (root / "criteo-sample" / "train_head_10k.txt").write_text("0\t1\n")
    (root / "avazu-sample" / "avazu_part_a.csv").write_text("id,click\n")
    return root


def test_without_the_samples_make_test_stops_with_one_line_saying_where_they_go(tmp_path):
    result = _run(_checkout(tmp_path))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert str(tmp_path / "repo" / ".." / "shared" / "datasets") in line
    assert "ADS_RANKING_SHARED_DATASETS" in line and "not needs_datasets" in line


@pytest.mark.skipif(not (shutil.which("chromium") or os.access("/usr/bin/chromium", os.X_OK)),
                    reason="the script would go on to install chromium")
def test_samples_beside_the_repository_or_named_by_the_variable_are_found(tmp_path):
    repo = _checkout(tmp_path)
    elsewhere = _samples(tmp_path / "elsewhere")
    assert _run(repo, ADS_RANKING_SHARED_DATASETS=str(elsewhere)).returncode == 0
    _samples(tmp_path / "shared" / "datasets")
    assert _run(repo).returncode == 0
    assert _run(repo, ADS_RANKING_SHARED_DATASETS=str(tmp_path / "nowhere")).returncode == 0
