"""The run driver's loop over a real mailbox folder: steps in order, a failing step reported as
that step's result (naming what was wrong) while the driver goes on, ``exit`` ends it; a driver
started again skips the steps its earlier attempt served."""

from __future__ import annotations

import json

from ads_ranking_pipelines.contracts.run_driver import begin_marker, end_marker, request_name, result_name
from ads_ranking_pipelines.ray_jobs.run_driver import serve


def _write(box, n, doc):
    (box / request_name(n)).write_text(json.dumps(doc))


def test_each_step_gets_its_result_a_failing_one_too_and_exit_ends_the_loop(tmp_path, capsys):
    _write(tmp_path, 1, {"kind": "nope", "step_id": "nope-1"})
    _write(tmp_path, 2, {"kind": "train", "step_id": "train-2", "spec": "{}", "pipes": {}})
    _write(tmp_path, 3, {"kind": "exit"})
    assert serve(str(tmp_path), poll_s=0.01) == 2
    first = json.loads((tmp_path / result_name(1)).read_text())
    assert first["ok"] is False and "'nope'" in first["error"] and "train, evaluate, infer" in first["error"]
    second = json.loads((tmp_path / result_name(2)).read_text())
    assert second["ok"] is False and second["error"].startswith("ValidationError"), second
    lines = capsys.readouterr().out.splitlines()
    marks = [ln for ln in lines if ln.startswith("[run-driver]")]
    assert marks == [begin_marker("nope-1"), end_marker("nope-1"), begin_marker("train-2"), end_marker("train-2"),
                     "[run-driver] told to exit after 2 step(s)"]


def test_a_driver_started_again_skips_the_steps_with_a_result(tmp_path, capsys):
    _write(tmp_path, 1, {"kind": "train", "step_id": "train-1", "spec": "{}", "pipes": {}})
    (tmp_path / result_name(1)).write_text(json.dumps({"ok": True}))       # the earlier attempt's
    _write(tmp_path, 2, {"kind": "nope", "step_id": "nope-2"})
    _write(tmp_path, 3, {"kind": "exit"})
    assert serve(str(tmp_path), poll_s=0.01) == 2
    assert json.loads((tmp_path / result_name(1)).read_text()) == {"ok": True}   # not run again
    assert json.loads((tmp_path / result_name(2)).read_text())["ok"] is False
    marks = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[run-driver]")]
    assert marks[0] == "[run-driver] step train-1 was served by this job's earlier attempt: skipped", marks
    assert marks[1:3] == [begin_marker("nope-2"), end_marker("nope-2")], marks
