"""A warm local cluster's leases and watchdog, without Ray: the cluster's "head" is a plain
process of the test, so what stops it (and what does not) is seen directly.

The watchdog of a run's own cluster stops it when the run's process is gone; a warm cluster's
watchdog never does: it reports the run failed only when that run died holding its lease."""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ads_ranking_pipelines.backends import local_watchdog
from ads_ranking_pipelines.backends.gc import collect_local
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.local_cluster_state import ClusterState
from ads_ranking_pipelines.backends.local_warm_lease import LeaseHolder, read_leases
from ads_ranking_pipelines.backends.processes import pid_alive, process_start


@pytest.fixture
def head():
    """A stand-in for a cluster's head node: a process in its own group, as `ray start` runs."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def dead_controller() -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    start = process_start(proc.pid)
    proc.wait()
    return proc.pid, start


def warm_state(state_dir: Path, head_pid: int, marker: Path, *, keep_warm_s: float = 300) -> Path:
    pid, start = dead_controller()
    temp = state_dir / "temp"
    temp.mkdir(parents=True)
    state = ClusterState(
        name="warm-1", owner="t", request={"name": "warm-1"}, temp_dir=str(temp), gcs_address="127.0.0.1:9",
        dashboard_url="http://127.0.0.1:9", head_pid=head_pid, created_at=dt.datetime.now(dt.timezone.utc).isoformat(),
        controller_pid=pid, controller_start=start, run_id="run-a", session=True, keep_warm_s=keep_warm_s,
        on_orphan=[sys.executable, "-c", f"open({str(marker)!r}, 'w').write('orphan')"])
    cluster = LocalRayCluster(state, state_dir)
    cluster.forget_watchdog()     # writes the state file (no watchdog process in this test)
    return LocalRayCluster.state_file(state_dir, "warm-1")


def maker_lease(state_dir: Path, pid: int, start: str, *, released: bool) -> None:
    holder = LeaseHolder(state_dir, "warm-1", "run-a", 60)
    holder.lease = dataclasses.replace(holder.lease, pid=pid, start=start)
    holder.renew()
    if released:
        holder.release()


@pytest.mark.parametrize("died", [True, False])
def test_the_watchdog_never_stops_a_warm_cluster(tmp_path, head, died: bool) -> None:
    """The run that made it died holding its lease: reported (on_orphan), the cluster kept. It
    ended normally (lease released): nothing run, the cluster kept. Either way the watchdog
    exits and records that it did, so nothing kills its PID later."""
    state_dir, marker = tmp_path / "clusters", tmp_path / "orphan-ran"
    state_file = warm_state(state_dir, head.pid, marker)
    state = LocalRayCluster.find("warm-1", state_dir).state
    maker_lease(state_dir, state.controller_pid, state.controller_start, released=not died)
    assert local_watchdog.main([str(state_file), "0.1"]) == 0
    assert pid_alive(head.pid) and state_file.exists(), "the watchdog stopped a warm cluster"
    assert marker.exists() == died
    assert LocalRayCluster.find("warm-1", state_dir).state.watchdog_pid == 0


@pytest.mark.slow
def test_leases_are_renewed_released_and_those_over_dropped_by_the_next_taker(tmp_path, head) -> None:
    state_dir = tmp_path / "clusters"
    warm_state(state_dir, head.pid, tmp_path / "m")
    pid, start = dead_controller()
    maker_lease(state_dir, pid, start, released=False)         # a holder that died
    first = LeaseHolder(state_dir, "warm-1", "run-b", timeout_s=3).take()   # renews every 0.5 s
    stamp = first.lease.renewed_at
    time.sleep(1.5)
    (mine,) = [lease for lease in read_leases(state_dir, "warm-1") if lease.run_id == "run-b"]
    assert mine.renewed_at > stamp and not mine.released_at
    assert [lease.run_id for lease in read_leases(state_dir, "warm-1")] == ["run-b"], "the dead one stays"
    first.release()
    (mine,) = read_leases(state_dir, "warm-1")
    assert mine.released_at
    second = LeaseHolder(state_dir, "warm-1", "run-c", timeout_s=60).take()
    assert [lease.run_id for lease in read_leases(state_dir, "warm-1")] == ["run-c"]
    second.release()


@pytest.mark.slow
def test_the_gc_keeps_a_held_warm_cluster_and_reaps_it_idle(tmp_path, head) -> None:
    """collect_local over real lease files and processes: kept while a live process holds it (its
    maker dead, its run unknown), stopped - head process and files - once idle past its TTL."""
    state_dir = tmp_path / "clusters"
    warm_state(state_dir, head.pid, tmp_path / "m", keep_warm_s=1)
    holder = LeaseHolder(state_dir, "warm-1", "run-b", timeout_s=60).take()
    time.sleep(1.2)
    assert collect_local(state_dir, lambda run_id: "unknown", grace_s=0) == []
    holder.release()
    assert collect_local(state_dir, lambda run_id: "unknown", grace_s=0) == [], "reaped before its TTL"
    time.sleep(1.2)
    (item,) = collect_local(state_dir, lambda run_id: "unknown", grace_s=0)
    assert "idle for 1s" in item.reason
    head.wait(timeout=10)
    assert LocalRayCluster.find("warm-1", state_dir) is None
    assert not LocalRayCluster.lease_dir(state_dir, "warm-1").exists()
