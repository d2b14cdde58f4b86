from __future__ import annotations

import datetime as dt

import pytest

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError


def _version(reg: ModelRegistry, name: str, complete: bool = True) -> None:
    uri = reg.version_uri(name)
    fs.write_bytes(fs.join(uri, "weights.pt"), b"w")
    if complete:
        fs.write_json(fs.join(uri, "manifest.json"), {"model_version": name})


def test_promote_and_rollback(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    assert reg.champion() is None
    _version(reg, "v1")
    _version(reg, "v2")
    reg.promote("v1", reason="first")
    reg.promote("v2", reason="second", metrics={"auc": 0.8})
    champ = reg.champion()
    assert champ["model_version"] == "v2" and champ["history"][-1]["model_version"] == "v1"
    back = reg.rollback()
    assert back["model_version"] == "v1" and reg.champion()["model_version"] == "v1"
    with pytest.raises(RegistryError, match="no earlier champion"):
        reg.rollback()


def test_incomplete_version_is_not_promotable_and_is_discarded(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    _version(reg, "good")
    _version(reg, "half", complete=False)
    assert reg.versions() == ["good"]
    with pytest.raises(RegistryError, match="'half'.*recent complete versions: good"):
        reg.promote("half", reason="x")
    assert reg.champion() is None
    assert reg.discard_incomplete("half") and not fs.exists(reg.version_uri("half"))
    assert not reg.discard_incomplete("good") and reg.is_complete("good")


def test_record_evaluation(tmp_path):
    reg = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    uri = reg.record_evaluation("v1", dt.date(2026, 1, 2), {"auc": 0.7})
    assert fs.read_json(uri)["metrics"] == {"auc": 0.7}
