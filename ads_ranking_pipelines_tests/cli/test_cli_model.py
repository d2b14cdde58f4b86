"""``ads-ranking model`` by subprocess, on the registry the assets write (versions made here by hand)."""

from __future__ import annotations

import hashlib
import json

import pytest

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.cli.helpers import cli_env, ok, ok_json, run_cli

pytestmark = pytest.mark.slow  # real processes (README: Tests)


def _version(reg: ModelRegistry, name: str, weights: bytes = b"w") -> None:
    uri = reg.version_uri(name)
    fs.write_bytes(fs.join(uri, "weights.pt"), weights)
    fs.write_json(fs.join(uri, "manifest.json"), {
        "model_version": name, "train_days": ["2026-01-01", "2026-01-02"], "code_version": "abc",
        "files": {"weights.pt": {"sha256": hashlib.sha256(weights).hexdigest(), "size": len(weights)}}})


def test_list_show_promote_rollback_history(tmp_path):
    env = cli_env(tmp_path, DAGSTER_HOME=str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    reg = ModelRegistry(StorageLayout(env["ADS_RANKING_HOME"]), "quest_ranker")
    _version(reg, "20260103-aaaa")
    _version(reg, "20260104-bbbb")
    reg.record_evaluation("20260103-aaaa", __import__("datetime").date(2026, 1, 3), {"auc": 0.71}, passed=True)

    assert ok_json(run_cli("model", "list", "-o", "json", env=env))["champion"] is None
    out = ok_json(run_cli("model", "promote", "20260103-aaaa", "--reason", "first", "--by", "alice", "-o", "json", env=env))
    assert (out["action"], out["model_version"], out["by"], out["reason"]) == ("promote", "20260103-aaaa", "alice", "first")
    ok(run_cli("model", "promote", "20260104-bbbb", "--reason", "better on 01-04", env=env))
    listed = ok_json(run_cli("model", "list", "-o", "json", env=env))
    assert listed["champion"] == "20260104-bbbb"
    assert [(v["version"], v["champion"], v["auc"]) for v in listed["versions"]] == [
        ("20260103-aaaa", False, 0.71), ("20260104-bbbb", True, None)]
    table = ok(run_cli("model", "list", env=env)).stdout
    assert "20260104-bbbb" in table and "passed" in table

    shown = ok_json(run_cli("model", "show", "20260103-aaaa", "-o", "json", env=env))
    assert shown["manifest"]["train_days"] == ["2026-01-01", "2026-01-02"] and shown["champion"] is False
    back = ok_json(run_cli("model", "rollback", "--reason", "scores drifted", "--by", "bob", "-o", "json", env=env))
    assert (back["action"], back["model_version"], back["from_version"]) == ("rollback", "20260103-aaaa", "20260104-bbbb")
    events = ok_json(run_cli("model", "history", "-o", "json", env=env))["events"]
    assert [(e["action"], e["model_version"], e["by"]) for e in events] == [
        ("promote", "20260103-aaaa", "alice"), ("promote", "20260104-bbbb", events[1]["by"]),
        ("rollback", "20260103-aaaa", "bob")]
    assert ok_json(run_cli("model", "show", "champion", "-o", "json", env=env))["model_version"] == "20260103-aaaa"
    import dagster as dg

    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:      # the UI's champion history too
        records = instance.fetch_materializations(dg.AssetKey("model_champion"), limit=10, ascending=True).records
    assert [(r.asset_materialization.metadata["action"].value, r.asset_materialization.metadata["model_version"].value,
             r.asset_materialization.metadata["by"].value) for r in records] == [
        ("promote", "20260103-aaaa", "alice"), ("promote", "20260104-bbbb", events[1]["by"]),
        ("rollback", "20260103-aaaa", "bob")]


def test_bad_input_exits_2_and_leaves_the_champion(tmp_path):
    env = cli_env(tmp_path)
    reg = ModelRegistry(StorageLayout(env["ADS_RANKING_HOME"]), "quest_ranker")
    _version(reg, "20260103-aaaa")
    _version(reg, "20260104-bad")
    fs.write_bytes(fs.join(reg.version_uri("20260104-bad"), "weights.pt"), b"truncated")
    fs.write_bytes(fs.join(reg.version_uri("20260105-half"), "weights.pt"), b"w")   # no manifest

    r = run_cli("model", "rollback", env=env)
    assert r.returncode == 2 and "no earlier champion to roll back to (no champion yet)" in r.stderr
    ok(run_cli("model", "promote", "20260103-aaaa", "--reason", "x", env=env))
    for version, why in (("nope", "has no version 'nope'"), ("20260105-half", "is half-written"),
                         ("20260104-bad", "is corrupt: weights.pt does not match")):
        r = run_cli("model", "promote", version, "--reason", "x", env=env)
        assert r.returncode == 2 and why in r.stderr, r.stderr
    r = run_cli("model", "promote", "20260103-aaaa", "--reason", "  ", env=env)
    assert r.returncode == 2 and "--reason" in r.stderr
    assert reg.champion_version() == "20260103-aaaa" and len(reg.history()) == 1
    listed = json.loads(ok(run_cli("model", "list", "-o", "json", env=env)).stdout)
    assert {v["version"]: v["intact"] for v in listed["versions"]} == {"20260103-aaaa": True, "20260104-bad": False}
