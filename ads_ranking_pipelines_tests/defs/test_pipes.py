from __future__ import annotations

import json

from ads_ranking_pipelines.defs.pipes import parse_pipes_message

MSG = {"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": "hi", "level": "INFO"}}


def test_parses_plain_prefixed_and_colored_lines():
    line = json.dumps(MSG)
    assert parse_pipes_message(line) == MSG
    assert parse_pipes_message(f"(RayTrainWorker pid=123, ip=127.0.0.2) {line}") == MSG
    assert parse_pipes_message(f"\x1b[36m(RayTrainWorker pid=123)\x1b[0m {line}") == MSG


def test_other_lines_are_not_messages():
    assert parse_pipes_message("epoch 1 loss 0.3") is None
    assert parse_pipes_message('{"kind": "result", "values": {}}') is None
    assert parse_pipes_message('{"__dagster_pipes_version": broken') is None
