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


def test_library_chatter_is_recognised_and_our_lines_are_not():
    from ads_ranking_pipelines.defs.chatter import is_chatter

    seen = [  # lines from a real run's event log
        "(RayTrainWorker pid=21814) [TBE=a22447bc-fd8b-4890-a49a-c219520059ca] SplitTableBatchedEmbeddingBagsCodegen Arguments: {'self': ...",
        "(RayTrainWorker pid=21814) [TBE=a22447bc-fd8b-4890-a49a-c219520059ca] Feature Gates: [('TBE_V2', False)]",
        "2026-12-01 06:33:08,010\tWARNING __init__.py:28 -- Progress bars disabled. To enable, set ...",
        "2026-12-01 06:33:08,007\tINFO streaming_executor.py:216 -- Execution plan of Dataset dataset_0: InputDataBuffer",
        "(RayTrainWorker pid=18788) Reporting training result 1: TrainingReport(checkpoint=Checkpoint(filesystem=local",
        "(RayTrainWorker pid=18788) [rank1]:W1201 06:34:32 torch/fx/_symbolic_trace.py:56] is_fx_tracing will return true",
    ]
    assert all(is_chatter(line) for line in seen)
    ours = ["(RayTrainWorker pid=1) [train] epoch 2/2 loss 0.14", "model version 20260310-ab written to x",
            "(PlacementGroupCleaner pid=18783) Traceback (most recent call last):", "reading 2 day(s) of events"]
    assert not any(is_chatter(line) for line in ours)
