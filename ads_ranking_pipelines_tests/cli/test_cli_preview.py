"""``ads-ranking pipeline backfill --dry-run`` and a budget, as a user runs them (local backend).

The history is what earlier runs of the training step record (``storage/train_history.py``);
it is written here directly so that no Ray cluster is needed: a preview and a refusal start
nothing, which is what these tests check.
"""

from __future__ import annotations

import json

import dagster as dg
import pytest
import yaml

from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.train_history import record_day
from ads_ranking_pipelines_tests.cli.helpers import cli_env, run_cli

RANGE = ["--from", "2026-03-10", "--to", "2026-03-13"]
SMALL = ["--workers", "1", "--window-days", "2", "--rows-per-day", "2000", "--epochs", "1"]


def _env(tmp_path, **pool):
    catalog = tmp_path / "pools.yaml"
    catalog.write_text(yaml.safe_dump({"pools": [{"name": "local", "local": True, "cpus_per_node": 8,
                                                  "memory_per_node": "32Gi", "max_workers": 4,
                                                  "max_concurrent_runs": 2, **pool}]}))
    (tmp_path / "dagster_home").mkdir()
    return cli_env(tmp_path, ADS_RANKING_POOL_CATALOG=str(catalog), DAGSTER_HOME=str(tmp_path / "dagster_home"))


def _history(tmp_path, seconds=(30.0, 40.0, 50.0)):
    layout = StorageLayout(str(tmp_path / "ads_home"))
    for i, s in enumerate(seconds):
        record_day(layout, "quest_ranker", {
            "model_version": f"2026030{i + 1}-abcdef12", "day": f"2026-03-0{i + 1}", "gpu_pool": "local",
            "num_workers": 1, "gpus_per_worker": 0, "rows": 4000, "wall_seconds": s, "gpu_hours": 0.0,
            "worker_hours": s / 3600, "estimate": None})


def _nothing_started(tmp_path):
    assert not (tmp_path / "ads_home" / "clusters").exists() or not list((tmp_path / "ads_home" / "clusters").iterdir())
    assert not (tmp_path / "ads_home" / "models" / "quest_ranker" / "versions").exists()
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        assert instance.get_runs() == []


@pytest.mark.slow
def test_dry_run_prints_the_estimate_its_basis_spread_capacity_and_split_and_starts_nothing(tmp_path):
    env = _env(tmp_path, cost_per_worker_hour=2.0)
    _history(tmp_path)
    result = run_cli("pipeline", "backfill", *RANGE, *SMALL, "--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "backfill preview: quest_ranker on pool local, 2026-03-10..2026-03-13 (4 day(s), 1 worker(s) x 0 GPU)" in out
    assert "estimate: wall 0:02:40 (spread 0:02:00..0:03:20), 0 GPU-hours, 0.04444 worker-hours, cost 0.08889" in out
    assert "rests on 3 past day(s) of quest_ranker on local" in out and "median 10,000, spread 7,500..12,500" in out
    assert "pool local runs at most 2 run(s) at once" in out
    assert "proposal: 2 runs side by side (the pool holds 2 at once), wall ~0:01:20: " \
           "2026-03-10..2026-03-11, 2026-03-12..2026-03-13" in out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["dry_run"] and summary["basis_days"] == 3 and summary["wall_seconds"] == 160.0
    assert summary["over_budget"] is None and summary["per_day"]["2026-03-10"] == {"rows": 4000, "wall_seconds": 40.0}
    _nothing_started(tmp_path)


def test_dry_run_without_history_says_so_instead_of_inventing(tmp_path):
    result = run_cli("pipeline", "backfill", *RANGE, *SMALL, "--dry-run", env=_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "estimate: unknown: no history of quest_ranker on pool local: estimate unknown" in result.stdout
    assert json.loads(result.stdout.strip().splitlines()[-1])["wall_seconds"] is None


def test_a_range_over_the_pools_budget_exits_2_before_anything_starts_naming_estimate_and_limit(tmp_path):
    env = _env(tmp_path, cost_per_worker_hour=2.0, budget_cost=0.05)
    _history(tmp_path)
    result = run_cli("pipeline", "backfill", *RANGE, *SMALL, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert ("estimated cost 0.08889 (from 3 past day(s), spread 0.06667..0.1111) > budget_cost 0.05 "
            "(pool local's budget in the pool catalog)") in result.stderr
    assert "refused before any cluster starts" in result.stderr
    _nothing_started(tmp_path)


@pytest.mark.slow
def test_the_runs_budget_override_refuses_too_and_dry_run_shows_over(tmp_path):
    env = _env(tmp_path, cost_per_worker_hour=2.0, budget_cost=10)
    _history(tmp_path)
    result = run_cli("pipeline", "backfill", *RANGE, *SMALL, "--budget-cost", "0.01", "--dry-run", env=env)
    assert result.returncode == 2
    assert "budget: OVER: refused before any cluster starts" in result.stdout
    assert "> budget_cost 0.01 (the run's budget_cost)" in result.stdout
    bad = run_cli("pipeline", "backfill", *RANGE, *SMALL, "--budget-gpu-hours", "-3", env=env)
    assert bad.returncode == 2 and "invalid budget_gpu_hours=-3.0; valid: a number > 0" in bad.stderr
    _nothing_started(tmp_path)


def test_pools_list_shows_the_cost_rates_and_budgets(tmp_path):
    result = run_cli("pools", "list", "-o", "json", env=_env(tmp_path, cost_per_worker_hour=2.0, budget_cost=0.05))
    assert result.returncode == 0, result.stderr
    (pool,) = json.loads(result.stdout)["pools"]
    assert (pool["cost_per_worker_hour"], pool["budget_cost"], pool["cost_per_gpu_hour"], pool["budget_gpu_hours"]
            ) == (2.0, 0.05, None, None)
    assert pool["max_concurrent_runs"] == 2
