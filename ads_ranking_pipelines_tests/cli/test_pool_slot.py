"""``pipeline run | backfill`` take a slot of their GPU pool the way queued runs do (``cli/pool_slot.py``).

The slot is held by a fake run (a STARTED run record with the pool tag, what the queue daemon
counts too) for the cheap tests; one test races two real ``pipeline run`` processes and a
queued run on pool ``local`` (limit 1) and checks from the run records that none overlapped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from ads_ranking_pipelines.cli.pool_slot import holders, pool_limit
from ads_ranking_pipelines.config.dagster_instance import GPU_POOL_TAG, instance_settings, render_yaml
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines_tests.cli.helpers import REPO_ROOT, cli_env, run_cli
from ads_ranking_pipelines_tests.instance.test_run_queue import _launch, _wait, _window, queue  # noqa: F401

pytestmark = pytest.mark.slow  # real processes (README: Tests)

DAY = "2026-03-10"
TINY = ["--window-days", "2", "--workers", "1", "--epochs", "1", "--batch-size", "256", "--rows-per-day", "2000",
        "--param", "hash_buckets=2000", "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]",
        "--param", "over_arch=[16]"]


def _home(tmp_path: Path, limit: int | None = 1) -> Path:
    """A DAGSTER_HOME with the shipped run queue (pool ``local`` limited to ``limit``); none if None."""
    home = tmp_path / "dagster_home"
    home.mkdir(parents=True)
    if limit is not None:
        settings = instance_settings(load_catalog(None))
        for rule in settings["run_coordinator"]["config"]["tag_concurrency_limits"]:
            rule["limit"] = limit if rule["value"] == "local" else rule["limit"]
        (home / "dagster.yaml").write_text(render_yaml(settings))
    return home


def _hold(instance: dg.DagsterInstance, pool: str = "local", status=dg.DagsterRunStatus.STARTED) -> dg.DagsterRun:
    return instance.add_run(dg.DagsterRun(job_name="slot_holder", run_id=str(uuid.uuid4()), status=status,
                                          tags={GPU_POOL_TAG: pool}))


def _empty_parquet_source(tmp_path: Path) -> Path:
    """A source with no day in it: the run starts, fails its first step in seconds, starts no cluster."""
    (tmp_path / "events").mkdir()
    base = SourceConfig()
    path = tmp_path / "source.yaml"
    path.write_text(yaml.safe_dump({"kind": "parquet", "uri": str(tmp_path / "events"), "label_column": "clicked",
                                    "dense_columns": list(base.dense_columns),
                                    "sparse_columns": list(base.sparse_columns)}))
    return path


def test_the_limit_is_the_instance_run_queue_s_else_the_catalog_s(tmp_path):
    catalog = load_catalog(None)
    with dg.DagsterInstance.from_config(str(_home(tmp_path / "queued", limit=2))) as instance:
        limit = pool_limit(instance, "local", catalog)
        assert (limit.limit, limit.queued) == (2, True) and "tag_concurrency_limits" in limit.source
        held = _hold(instance)
        _hold(instance, pool="cpu-standard")
        canceling = _hold(instance, status=dg.DagsterRunStatus.CANCELING)
        _hold(instance, status=dg.DagsterRunStatus.NOT_STARTED)
        _hold(instance, status=dg.DagsterRunStatus.SUCCESS)
        assert holders(instance, limit) == [held.run_id, canceling.run_id]
        assert holders(instance, limit, exclude=held.run_id) == [canceling.run_id]
    with dg.DagsterInstance.from_config(str(_home(tmp_path / "plain", limit=None))) as instance:
        limit = pool_limit(instance, "local", catalog)
        assert (limit.limit, limit.queued) == (catalog.get("local").max_concurrent_runs, False)
        assert "max_concurrent_runs" in limit.source


@pytest.mark.parametrize("command", [["run", "--date", DAY], ["backfill", "--from", DAY, "--to", "2026-03-11"]])
def test_no_wait_refuses_while_the_pool_s_slot_is_taken(tmp_path, command):
    home = _home(tmp_path)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        held = _hold(instance)
    result = run_cli("pipeline", *command, "--gpu-pool", "local", "--no-wait",
                     "--source", str(_empty_parquet_source(tmp_path)), env=cli_env(tmp_path, DAGSTER_HOME=str(home)))
    assert result.returncode == 1, result
    assert "pool 'local' allows 1 concurrent run" in result.stderr and held.run_id in result.stderr
    assert "--no-wait" in result.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert [r.run_id for r in instance.get_runs()] == [held.run_id], "the refused run was recorded"


def test_a_run_waits_for_the_slot_and_starts_once_it_is_free(tmp_path):
    home = _home(tmp_path)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        held = _hold(instance)
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run",
                                 "--date", DAY, "--gpu-pool", "local", "--source", str(_empty_parquet_source(tmp_path))],
                                env=cli_env(tmp_path, DAGSTER_HOME=str(home)), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=stderr, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while "waiting for a slot" not in err.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.5)
        time.sleep(7)                  # two more counts: still waiting, nothing recorded
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert proc.poll() is None and [r.run_id for r in instance.get_runs()] == [held.run_id]
            instance.report_run_canceled(held)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.read_text()
    assert text.count("waiting for a slot") == 1 and held.run_id in text and "pool 'local'" in text
    run_id = json.loads(out.strip().splitlines()[-1])["run_id"]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert _window(instance, run_id)[0] >= _window(instance, held.run_id)[1]


@dg.op
def _first_step() -> float:
    return time.time()


@dg.job(tags={GPU_POOL_TAG: "local"})
def _pool_job():
    _first_step()


@dg.op
def _slow_step() -> None:
    time.sleep(8)


@dg.job(tags={GPU_POOL_TAG: "local"})
def _slow_pool_job():
    _slow_step()


def test_two_claims_at_once_do_not_both_get_the_last_slot(tmp_path):
    """A claim holds the pool's lock until its run is STARTED: a second claim made meanwhile
    waits for the lock, then counts that run (here it refuses, ``wait=False``)."""
    from ads_ranking_pipelines.cli.pool_slot import PoolBusy, PoolSlot

    home = str(_home(tmp_path))
    outcome: list[str] = []

    def second_claim() -> None:
        with dg.DagsterInstance.from_config(home) as other:
            try:
                with PoolSlot(other, pool_limit(other, "local", load_catalog(None)), str(uuid.uuid4()), print,
                              wait=False):
                    outcome.append("took the slot")
            except PoolBusy:
                outcome.append("refused")

    with dg.DagsterInstance.from_config(home) as instance:
        run_id = str(uuid.uuid4())
        with PoolSlot(instance, pool_limit(instance, "local", load_catalog(None)), run_id, print, settle_s=0):
            claim = threading.Thread(target=second_claim)
            claim.start()
            claim.join(3.0)
            assert claim.is_alive() and outcome == [], "the second claim did not wait for the first's run to start"
            _slow_pool_job.execute_in_process(instance=instance, run_id=run_id)
        claim.join(30)
    assert outcome == ["refused"]


def test_a_run_the_queue_starts_at_the_same_moment_goes_first(tmp_path):
    """The race the lock cannot close: the queue daemon counted the runs just before this run
    was STARTED and starts a queued one just after. The CLI's run yields before its first step."""
    from ads_ranking_pipelines.cli.pool_slot import PoolSlot

    said: list[str] = []
    with dg.DagsterInstance.from_config(str(_home(tmp_path))) as instance:
        limit = pool_limit(instance, "local", load_catalog(None))
        run_id = str(uuid.uuid4())
        with PoolSlot(instance, limit, run_id, said.append, poll_s=0.5, settle_s=0.5):
            dequeued = _hold(instance)          # started by the daemon after our count
            ended = threading.Timer(3.0, instance.report_run_canceled, [dequeued])
            ended.start()
            result = _pool_job.execute_in_process(instance=instance, run_id=run_id)
            ended.join()
        assert result.success and result.output_for_node("_first_step") >= _window(instance, dequeued.run_id)[1]
    assert len(said) == 1 and dequeued.run_id in said[0] and "before its first step" in said[0], said


def _work(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float]:
    """From the run's first step start to the run's end: a CLI run that yielded to a queued run
    is STARTED earlier (its record's start_time) but does nothing until its first step."""
    (first_step,) = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_START, limit=1).records
    return first_step.timestamp, instance.get_run_record_by_id(run_id).end_time


def _start(cmd: list[str], env: dict, out: Path) -> subprocess.Popen:
    with open(out.with_suffix(".out"), "w") as stdout, open(out.with_suffix(".err"), "w") as stderr:
        return subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=stdout, stderr=stderr, text=True,
                                stdin=subprocess.DEVNULL)


@pytest.mark.ray
def test_two_cli_runs_and_a_queued_run_on_a_limit_1_pool_never_overlap(queue, tmp_path):
    """Two real ``pipeline run`` back to back on pool ``local`` (limit 1), and a run queued while
    the first holds the slot: one at a time, whatever order the second and the queued one get
    (when the first ends both go for the slot at once: the queued one wins, see pool_slot.py).
    The second reads a source with no day: it takes the slot like any run and fails its first
    step in seconds, without a cluster of its own (the first run is the one that trains)."""
    env, workspace = queue
    env = cli_env(tmp_path, DAGSTER_HOME=env["DAGSTER_HOME"])
    cmd = [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--date", DAY,
           "--gpu-pool", "local", *TINY, "--gate", "max_auc_drop_vs_champion=1.0"]
    procs = []
    try:
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            procs.append(_start(cmd, env, tmp_path / "first"))
            deadline = time.monotonic() + 180
            while not instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
                assert procs[0].poll() is None and time.monotonic() < deadline, (tmp_path / "first.err").read_text()
                time.sleep(0.5)
            (first,) = instance.get_runs()
            procs.append(_start([*cmd, "--source", str(_empty_parquet_source(tmp_path))], env, tmp_path / "second"))
            queued = _launch(env, workspace, "local", 1)
            time.sleep(5)           # the daemon dequeues every second: it must not start it
            assert instance.get_run_by_id(first.run_id).status == dg.DagsterRunStatus.STARTED
            assert instance.get_run_by_id(queued).status == dg.DagsterRunStatus.QUEUED
            for p in procs:
                p.wait(timeout=900)
            out = (tmp_path / "second.out").read_text().strip().splitlines()
            assert out, f"the second run printed no summary (exit {procs[1].returncode}):\n" \
                + (tmp_path / "second.err").read_text()[-3000:]
            second = json.loads(out[-1])["run_id"]
            err = (tmp_path / "second.err").read_text()
            assert "waiting for a slot" in err and first.run_id in err, err
            _wait(instance, [queued], lambda rs: rs[0].is_finished)
            assert instance.get_run_by_id(queued).status == dg.DagsterRunStatus.SUCCESS
            windows = sorted(_work(instance, r) for r in (first.run_id, second, queued))
            assert all(w[1] is not None for w in windows), windows
            assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:])), f"runs overlapped: {windows}"
            assert _work(instance, first.run_id) == windows[0]
            print("work windows (first step start, end):", windows,
                  "yielded to the queued run" if "started from the run queue" in err else "")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_a_count_waits_out_a_locked_sqlite_storage(tmp_path):
    """The instance's SQLite storage answers "database is locked" while another process writes
    (the full suite's CI run: a waiting CLI run crashed on it); the count asks again."""
    from sqlalchemy.exc import OperationalError

    from ads_ranking_pipelines.cli.pool_slot import PoolLimit, count_holders

    class Busy:
        def __init__(self, times: int) -> None:
            self.times = times

        def get_run_records(self, **kwargs):
            if self.times:
                self.times -= 1
                raise OperationalError("PRAGMA main.table_xinfo(\"runs\")", {}, Exception("database is locked"))
            return []

    limit = PoolLimit("local", 1, "the pool catalog's max_concurrent_runs", False)
    assert count_holders(Busy(2), limit) == []
    with pytest.raises(OperationalError):
        count_holders(Busy(1000), limit, busy_wait_s=0.1)
