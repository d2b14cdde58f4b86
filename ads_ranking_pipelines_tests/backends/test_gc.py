"""The garbage collector's decisions (backends/gc.py): what is collected and what never is."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from ads_ranking_pipelines.backends.gc import kuberay_garbage, local_garbage

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


def stamp(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def rayjob(name: str, *, created_ago: float = 3600, run_id: str | None = None,
           deployment: str = "Running", ended_ago: float | None = None,
           deleting: bool = False) -> dict:
    meta = {"name": name, "namespace": "ads-ranking", "creationTimestamp": stamp(created_ago),
            "labels": {"app.kubernetes.io/managed-by": "ads-ranking-pipelines",
                       **({"dagster/run-id": run_id} if run_id else {})}}
    if deleting:
        meta["deletionTimestamp"] = stamp(1)
    status = {"jobDeploymentStatus": deployment}
    if ended_ago is not None:
        status["endTime"] = stamp(ended_ago)
    return {"metadata": meta, "status": status}


RUNS = {"done": "finished", "live": "running", "gone": "unknown"}


@pytest.mark.parametrize("obj,collected,why", [
    (rayjob("leaked", deployment="Complete", ended_ago=1300), True, "finished 1300s ago"),
    (rayjob("fresh", deployment="Complete", ended_ago=60), False, ""),
    (rayjob("failed", deployment="Failed", ended_ago=5000), True, "(Failed) and left behind"),
    (rayjob("of-done-run", run_id="done"), True, "run done has finished"),
    (rayjob("of-live-run", run_id="live"), False, ""),
    (rayjob("of-gone-run", run_id="gone", created_ago=900), True, "unknown to the instance"),
    (rayjob("of-gone-run-young", run_id="gone", created_ago=30), False, ""),
    (rayjob("no-run", created_ago=99999), False, ""),  # a CLI job, not finished: kept
    (rayjob("deleting", run_id="done", deleting=True), False, ""),
])
def test_kuberay_decisions(obj: dict, collected: bool, why: str) -> None:
    found = kuberay_garbage([obj], RUNS.get, now=NOW, grace_s=600, ttl_s=1200)
    assert bool(found) == collected
    if collected:
        assert why in found[0].reason and found[0].name == obj["metadata"]["name"]


def test_kuberay_without_an_instance_only_ttl_rules_apply() -> None:
    jobs = [rayjob("a", run_id="whatever"), rayjob("b", deployment="Complete", ended_ago=5000)]
    found = kuberay_garbage(jobs, lambda run_id: None, now=NOW, grace_s=0, ttl_s=1200)
    assert [g.name for g in found] == ["b"]


def state(name: str, *, session: bool = True, run_id: str = "", alive: bool = True,
          created_ago: float = 3600) -> SimpleNamespace:
    return SimpleNamespace(name=name, session=session, run_id=run_id, controller_pid=4242,
                           alive=alive, created_at=stamp(created_ago))


@pytest.mark.parametrize("st,collected,why", [
    (state("killed-run", alive=False, run_id="live"), True, "pid 4242) is gone"),
    (state("long-lived", session=False, alive=False), False, ""),   # `cluster create`
    (state("running", run_id="live"), False, ""),
    (state("finished-run", run_id="done"), True, "has finished"),
    (state("unknown-run", run_id="gone"), True, "unknown"),
])
def test_local_decisions(st: SimpleNamespace, collected: bool, why: str) -> None:
    found = local_garbage([st], RUNS.get, lambda s: s.alive, now=NOW, grace_s=600)
    assert bool(found) == collected
    if collected:
        assert why in found[0].reason
