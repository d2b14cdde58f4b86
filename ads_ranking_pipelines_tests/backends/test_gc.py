"""The garbage collector's decisions (backends/gc.py): what is collected and what never is."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from ads_ranking_pipelines.backends.gc import kuberay_garbage, local_garbage, warm_reason

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


# ---- warm clusters (keep_warm_s): reap or keep, by their leases alone ---------------------------
def warm(name: str = "warm", *, ttl: float = 300, created_ago: float = 3600, run_id: str = "done",
         alive: bool = False) -> SimpleNamespace:
    """A warm cluster whose maker's run has finished and whose maker's process is gone: the rules
    of a run's session cluster would stop it at once."""
    return SimpleNamespace(name=name, session=True, run_id=run_id, controller_pid=4242, alive=alive,
                           created_at=stamp(created_ago), keep_warm_s=ttl)


def lease(run_id: str, *, renewed_ago: float = 5, released_ago: float | None = None, alive: bool = True,
          timeout_s: float = 60) -> SimpleNamespace:
    return SimpleNamespace(run_id=run_id, renewed_at=stamp(renewed_ago), timeout_s=timeout_s, alive=alive,
                           released_at=stamp(released_ago) if released_ago is not None else "")


@pytest.mark.parametrize("st,leases,reaped,why", [
    # a live lease keeps it, however long ago it was made and whatever its maker's run did
    (warm(), [lease("b")], False, ""),
    (warm(), [lease("a", released_ago=1000), lease("b")], False, ""),
    # released by every run: idle since the last release
    (warm(), [lease("a", released_ago=1000), lease("b", released_ago=100)], False, ""),
    (warm(), [lease("a", released_ago=1000), lease("b", released_ago=400)], True, "idle for 400s"),
    # a holder whose process died keeps nothing; idle since its last renewal
    (warm(), [lease("dead", alive=False, renewed_ago=30)], False, ""),
    (warm(), [lease("dead", alive=False, renewed_ago=500)], True, "idle for 500s (keep_warm_s 300)"),
    # a holder that stopped renewing (hung, or its PID reused by a live process) is not live either
    (warm(), [lease("stale", renewed_ago=600, timeout_s=60)], True, "no live lease (1 over)"),
    # no lease at all: idle since it was made (a maker killed before its first renewal)
    (warm(created_ago=100), [], False, ""),
    (warm(created_ago=301), [], True, "idle for 301s"),
])
def test_warm_decisions(st: SimpleNamespace, leases: list, reaped: bool, why: str) -> None:
    assert (warm_reason(st, leases, lambda s: s.alive, now=NOW) is not None) == reaped
    found = local_garbage([st], RUNS.get, lambda s: s.alive, now=NOW, grace_s=600,
                          leases=lambda s: leases, holder_alive=lambda s: s.alive)
    assert bool(found) == reaped
    if reaped:
        assert why in found[0].reason and found[0].kind == "warm local cluster"
        assert found[0].run_id is None      # no run to report failed: the runs that used it are over


def test_a_warm_cluster_is_not_a_session_cluster_to_the_run_rules() -> None:
    """Its maker's process gone, its run finished or unknown: kept while another run holds it."""
    states = [warm("w1", run_id="done"), warm("w2", run_id="gone", alive=True), warm("w3", run_id="live")]
    found = local_garbage(states, RUNS.get, lambda s: s.alive, now=NOW, grace_s=0,
                          leases=lambda s: [lease("other")], holder_alive=lambda s: s.alive)
    assert found == []
