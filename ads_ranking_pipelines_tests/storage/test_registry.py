from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError


def _version(reg: ModelRegistry, name: str, complete: bool = True, weights: bytes = b"w") -> None:
    uri = reg.version_uri(name)
    fs.write_bytes(fs.join(uri, "weights.pt"), weights)
    if complete:
        fs.write_json(fs.join(uri, "manifest.json"), {
            "model_version": name,
            "files": {"weights.pt": {"sha256": hashlib.sha256(weights).hexdigest(), "size": len(weights)}}})


def test_promote_and_rollback_record_who_why_when(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    assert reg.champion() is None and reg.history() == []
    _version(reg, "v1")
    _version(reg, "v2")
    reg.promote("v1", reason="first", by="alice")
    reg.promote("v2", reason="second", by="dagster run abc", metrics={"auc": 0.8})
    champ = reg.champion()
    assert champ["model_version"] == "v2" and champ["previous"][-1]["model_version"] == "v1"
    back = reg.rollback(reason="bad scores", by="bob")
    assert back["model_version"] == "v1" and reg.champion_version() == "v1"
    events = reg.history()
    assert [(e["action"], e["model_version"], e["from_version"], e["by"], e["reason"]) for e in events] == [
        ("promote", "v1", None, "alice", "first"),
        ("promote", "v2", "v1", "dagster run abc", "second"),
        ("rollback", "v1", "v2", "bob", "bad scores"),
    ]
    assert all(dt.datetime.fromisoformat(e["at"]).tzinfo is not None for e in events)
    with pytest.raises(RegistryError, match="no earlier champion to roll back to .champion: v1"):
        reg.rollback()
    assert reg.champion_version() == "v1" and len(reg.history()) == 3


def test_rollback_with_no_champion_names_it(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    with pytest.raises(RegistryError, match="m has no earlier champion to roll back to .no champion yet"):
        reg.rollback()


def test_unknown_half_written_and_corrupt_versions_are_never_promoted(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    _version(reg, "20260101-good")
    _version(reg, "20260102-half", complete=False)
    _version(reg, "20260103-bad")
    fs.write_bytes(fs.join(reg.version_uri("20260103-bad"), "weights.pt"), b"flipped")
    reg.promote("20260101-good", reason="x")
    assert reg.versions() == ["20260101-good", "20260103-bad"]
    with pytest.raises(RegistryError, match="no version 'nope'; recent versions: 20260101-good"):
        reg.promote("nope", reason="x")
    with pytest.raises(RegistryError, match="'20260102-half' is half-written"):
        reg.promote("20260102-half", reason="x")
    with pytest.raises(RegistryError, match="'20260103-bad' is corrupt: weights.pt does not match the sha256"):
        reg.promote("20260103-bad", reason="x")
    assert reg.champion_version() == "20260101-good" and len(reg.history()) == 1
    assert reg.discard_incomplete("20260102-half") and not fs.exists(reg.version_uri("20260102-half"))
    assert not reg.discard_incomplete("20260101-good") and reg.is_complete("20260101-good")


def test_rollback_refuses_a_previous_champion_that_is_no_longer_intact(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    _version(reg, "v1")
    _version(reg, "v2")
    reg.promote("v1", reason="a")
    reg.promote("v2", reason="b")
    fs.delete_dir(reg.version_uri("v1"))
    with pytest.raises(RegistryError, match="no version 'v1'"):
        reg.rollback()
    assert reg.champion_version() == "v2"


def test_evaluations_are_recorded_per_day(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    reg.record_evaluation("v1", dt.date(2026, 1, 2), {"auc": 0.7}, passed=True)
    assert reg.evaluation("v1", dt.date(2026, 1, 2))["metrics"] == {"auc": 0.7}
    assert [e["eval_day"] for e in reg.evaluations("v1")] == ["2026-01-02"]
    assert reg.evaluation("v1", dt.date(2026, 1, 3)) is None


def test_past_champions_and_training_windows(tmp_path):
    """Every earlier champion once, oldest first, never the current one; a window's last day."""
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    for v in ("v1", "v2", "v3"):
        _version(reg, v)
    assert reg.past_champions() == []
    reg.promote("v1", reason="a")
    reg.promote("v2", reason="b")
    reg.rollback(reason="c")                # v1 again
    reg.promote("v3", reason="d")
    assert reg.champion_version() == "v3" and reg.past_champions() == ["v1", "v2"]
    fs.write_json(fs.join(reg.version_uri("v2"), "manifest.json"),
                  {"model_version": "v2", "files": {}, "train_days": ["2026-03-09", "2026-03-08"]})
    assert reg.trained_through("v2") == dt.date(2026, 3, 9)
    assert reg.trained_through("v1") is None and reg.trained_through("gone") is None
