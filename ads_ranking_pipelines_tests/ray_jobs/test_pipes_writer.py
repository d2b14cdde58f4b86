"""The job driver's Pipes writer stamps every message ``[writer id, counter]``: the counter
counts up from 1 in the order the lines are written, whichever thread writes, and each writer
has its own id; the message itself is Dagster's, untouched."""

from __future__ import annotations

import json
import threading

from dagster_pipes import PIPES_PROTOCOL_VERSION_FIELD, PipesDefaultMessageWriter

from ads_ranking_pipelines.contracts.pipes_stamp import STAMP_FIELD
from ads_ranking_pipelines.ray_jobs.pipes_writer import StampingMessageWriter


def _message(i: int) -> dict:
    return {PIPES_PROTOCOL_VERSION_FIELD: "0.1", "method": "log",
            "params": {"message": f"m{i}", "level": "INFO"}}


def test_every_message_is_stamped_in_order(capsys) -> None:
    writer = StampingMessageWriter()
    with writer.open({PipesDefaultMessageWriter.STDIO_KEY: PipesDefaultMessageWriter.STDOUT}) as channel:
        for i in range(3):
            channel.write_message(_message(i))
    lines = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert [m[STAMP_FIELD] for m in lines] == [[writer.writer_id, n] for n in (1, 2, 3)]
    assert [{k: v for k, v in m.items() if k != STAMP_FIELD} for m in lines] == \
        [_message(i) for i in range(3)]
    assert StampingMessageWriter().writer_id != writer.writer_id


def test_threads_get_distinct_counters_in_line_order(capsys) -> None:
    writer = StampingMessageWriter()
    with writer.open({PipesDefaultMessageWriter.STDIO_KEY: PipesDefaultMessageWriter.STDOUT}) as channel:
        threads = [threading.Thread(target=lambda: [channel.write_message(_message(i))
                                                    for i in range(50)]) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    counters = [json.loads(text)[STAMP_FIELD][1] for text in capsys.readouterr().out.splitlines()]
    assert counters == list(range(1, 201))
