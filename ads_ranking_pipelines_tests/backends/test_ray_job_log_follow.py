"""Following a Ray job's log ends as soon as the caller says the job is terminal.

The dashboard's log tail notices a finished job only after its own 1 s sleeps (1-2 s); a
follower told by ``job_finished`` stops reading the websocket and takes the rest of the log
from one ``get_job_logs`` read. The fake client's stream never closes by itself, so a follower
that waited for it would never end.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from ads_ranking_pipelines.backends.ray_job_api import RayJobApi

FULL_LOG = "first\nsecond\nthird line\nlast"


class NeverClosingClient:
    """``JobSubmissionClient`` stand-in: the websocket sends two chunks, then stays open."""

    def __init__(self) -> None:
        self.tail_started = threading.Event()
        self.chunks_sent = threading.Event()
        self.full_reads = 0
        self.status_reads = 0

    async def tail_job_logs(self, job_id: str):
        self.tail_started.set()
        yield "first\nsec"
        yield "ond\nthi"
        self.chunks_sent.set()
        await asyncio.Event().wait()      # the stream stays open
        yield "never"

    def get_job_logs(self, job_id: str) -> str:
        self.full_reads += 1
        return FULL_LOG

    def get_job_info(self, job_id: str):
        self.status_reads += 1
        return SimpleNamespace(status="SUCCEEDED", message="")


def _follow_in_thread(api: RayJobApi, job_id: str) -> tuple[threading.Thread, list[str]]:
    lines: list[str] = []
    it = api.logs(job_id, follow=True)
    t = threading.Thread(target=lambda: lines.extend(it), daemon=True)
    t.start()
    return t, lines


def test_job_finished_drains_the_rest_of_the_log_and_ends_the_follower():
    client = NeverClosingClient()
    api = RayJobApi("http://127.0.0.1:1", client=client)
    t, lines = _follow_in_thread(api, "job-1")
    assert client.chunks_sent.wait(30)
    api.job_finished("job-1")
    t.join(30)
    assert not t.is_alive(), "the follower kept waiting for the websocket to close"
    assert lines == ["first", "second", "third line", "last"]
    assert client.full_reads == 1
    assert api._followers == {}


def test_job_finished_before_the_follower_starts_reads_the_whole_log_once():
    client = NeverClosingClient()
    api = RayJobApi("http://127.0.0.1:1", client=client)
    it = api.logs("job-2", follow=True)
    api.job_finished("job-2")
    assert list(it) == FULL_LOG.split("\n")
    assert client.full_reads == 1
    assert not client.tail_started.is_set()


def test_other_jobs_followers_keep_following():
    client = NeverClosingClient()
    api = RayJobApi("http://127.0.0.1:1", client=client)
    t, lines = _follow_in_thread(api, "job-3")
    assert client.chunks_sent.wait(30)
    api.job_finished("another-job")
    t.join(0.5)
    assert t.is_alive()
    api.job_finished("job-3")
    t.join(30)
    assert not t.is_alive()
    assert lines[-1] == "last"


class ClosingClient(NeverClosingClient):
    async def tail_job_logs(self, job_id: str):
        yield "only\nline"


def test_a_stream_that_closes_by_itself_ends_after_one_status_read():
    client = ClosingClient()
    api = RayJobApi("http://127.0.0.1:1", client=client)
    assert list(api.logs("job-4", follow=True)) == ["only", "line"]
    assert client.full_reads == 0
    assert client.status_reads == 1


class DroppingClient(NeverClosingClient):
    """The first stream drops mid-job (a websocket closed with code 1006 under load); the
    dashboard sends the whole log again on the next one, and the job ends meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.streams = 0

    async def tail_job_logs(self, job_id: str):
        self.streams += 1
        if self.streams == 1:
            yield "first\nsec"
            return
        yield "first\nsecond\nthi"
        yield "rd line\nlast"

    def get_job_info(self, job_id: str):
        self.status_reads += 1
        return SimpleNamespace(status="RUNNING" if self.streams < 2 else "SUCCEEDED", message="")


def test_a_stream_that_drops_while_the_job_runs_is_opened_again_without_repeating_lines():
    client = DroppingClient()
    api = RayJobApi("http://127.0.0.1:1", client=client)
    assert list(api.logs("job-5", follow=True)) == ["first", "second", "third line", "last"]
    assert client.streams == 2 and client.full_reads == 0
