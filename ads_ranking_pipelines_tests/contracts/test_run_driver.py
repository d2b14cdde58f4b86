"""The run driver's step markers: what the driver prints is what the orchestrator parses."""

from ads_ranking_pipelines.contracts.run_driver import begin_marker, end_marker, parse_marker


def test_markers_round_trip():
    assert parse_marker(begin_marker("train-1a2b3c4d")) == ("begin", "train-1a2b3c4d")
    assert parse_marker(end_marker("infer-00ff00ff")) == ("end", "infer-00ff00ff")


def test_other_lines_are_not_markers():
    for line in ("[run-driver] step train-1 begins now", "[run-driver] step  ends", "day 1/1: 2026-03-10",
                 '{"__dagster_pipes_version": "0.1"}', "[run-driver] told to exit after 2 step(s)"):
        assert parse_marker(line) is None, line
