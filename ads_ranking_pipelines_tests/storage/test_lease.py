"""The controller lease: renewed while its holder lives, seen stale on the watcher's own clock."""

from __future__ import annotations

import json

from ads_ranking_pipelines.storage.lease import LEASE_ENV, LeaseSpec, LeaseWatch, LeaseWriter, read_renewal


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_lease_is_stale_only_after_its_stamp_stops_changing_for_the_timeout() -> None:
    clock = Clock()
    watch = LeaseWatch(LeaseSpec("unused", timeout_s=10), clock)
    for i in range(5):                       # renewed every 5 s: never stale
        clock.t += 5
        assert watch.observe(f"stamp-{i}") is None
    clock.t += 9
    assert watch.observe("stamp-4") is None  # not renewed for 9 s
    clock.t += 2
    assert watch.observe("stamp-4") == 11    # 11 s without renewal > 10 s


def test_a_missing_lease_counts_from_the_last_renewal_or_the_watch_start() -> None:
    clock = Clock()
    watch = LeaseWatch(LeaseSpec("unused", timeout_s=10), clock)
    clock.t = 10.5
    assert watch.observe(None) == 10.5       # never taken (or released) for longer than the timeout


def test_the_writer_renews_until_released_and_then_removes_the_lease(tmp_path) -> None:
    spec = LeaseSpec(str(tmp_path / "runs" / "r1" / "controller-lease.json"), timeout_s=5)
    assert spec.interval_s < 1
    with LeaseWriter(spec, holder="host/1") as writer:
        first = read_renewal(spec.uri)
        assert first is not None
        doc = json.loads((tmp_path / "runs" / "r1" / "controller-lease.json").read_text())
        assert doc["holder"] == "host/1" and doc["timeout_s"] == 5
        import time

        deadline = time.monotonic() + 5
        while read_renewal(spec.uri) == first and time.monotonic() < deadline:
            time.sleep(0.1)
        assert read_renewal(spec.uri) != first, "the lease was not renewed"
        assert writer.holder == "host/1"
    assert read_renewal(spec.uri) is None


def test_the_spec_travels_in_one_environment_variable() -> None:
    spec = LeaseSpec("s3://bucket/runs/r/controller-lease.json", timeout_s=42)
    env = spec.to_env()
    assert list(env) == [LEASE_ENV]
    assert LeaseSpec.from_env(env) == spec
    assert LeaseSpec.from_env({}) is None
