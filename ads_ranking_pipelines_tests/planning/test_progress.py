"""Percent done and ETA of a step from its job's records (``planning/progress.py``)."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.planning.progress import ProgressTracker, duration

DAYS = ["2026-03-10", "2026-03-11", "2026-03-12"]


def _epoch(day, epoch, epochs=10):
    return {"kind": "epoch", "values": {"day": day, "epoch": epoch, "epochs": epochs, "loss": 0.1}}


def _in_epoch(day, epoch, step, steps, epochs=10):
    return {"kind": "progress", "values": {"day": day, "epoch": epoch, "epochs": epochs, "epoch_step": step,
                                           "epoch_steps": steps}}


def _day_done(day):
    return {"kind": "day_result", "values": {"day": day, "final_loss": 0.1}}


def test_a_backfill_counts_finished_days_whole_and_the_current_day_by_its_epochs():
    t = ProgressTracker("trained_model", DAYS, started=1000.0, tell_every_s=0.0)
    p = t.observe(_epoch(DAYS[0], 5), now=1010.0)
    assert (p.days_done, p.fraction, p.epoch, p.day) == (0, pytest.approx(0.5 / 3), 5, DAYS[0])
    assert p.eta_s == pytest.approx(10.0 * (1 - 0.5 / 3) / (0.5 / 3), abs=0.1)      # 50 s
    p = t.observe(_day_done(DAYS[0]), now=1020.0)            # early stopping: day 1 ended at epoch 5 of 10
    assert (p.days_done, p.fraction, p.epoch) == (1, pytest.approx(1 / 3), None)
    p = t.observe(_in_epoch(DAYS[1], 3, step=25, steps=100), now=1025.0)       # 2.25 of 10 epochs of day 2
    assert p.fraction == pytest.approx((1 + 0.225) / 3) and p.epoch == 3
    assert p.text() == f"day 2/3 ({DAYS[1]}), epoch 3/10: 40.8% done, 25s so far, ETA 36s (1/3 day(s) done)"
    t.observe(_day_done(DAYS[1]), now=1040.0)
    p = t.observe(_day_done(DAYS[2]), now=1060.0)
    assert (p.days_done, p.fraction, p.eta_s) == (3, 1.0, 0.0)


def test_a_late_record_never_moves_progress_back_and_unknown_records_are_ignored():
    t = ProgressTracker("trained_model", DAYS, started=0.0, tell_every_s=0.0)
    t.observe(_epoch(DAYS[0], 6), now=6.0)
    p = t.observe(_in_epoch(DAYS[0], 4, 10, 100), now=7.0)          # an in-epoch record from before
    assert p.fraction == pytest.approx(0.6 / 3)
    for junk in (None, "x", {"kind": "epoch"}, {"kind": "epoch", "values": {"day": "1999-01-01", "epoch": 1,
                                                                              "epochs": 2}},
                 {"kind": "dataset", "values": {"day": DAYS[0], "rows": 10}}, _epoch(DAYS[0], 0)):
        assert t.observe(junk, now=8.0) is None
    assert t.now(8.0).fraction == pytest.approx(0.6 / 3)


def test_lines_are_told_at_most_every_few_seconds_but_every_finished_day():
    t = ProgressTracker("model_evaluation", DAYS, started=0.0, tell_every_s=5.0)
    assert t.observe(_epoch(DAYS[0], 1), now=1.0) is not None          # the first one
    assert t.observe(_epoch(DAYS[0], 2), now=2.0) is None
    assert t.observe(_day_done(DAYS[0]), now=3.0) is not None          # a day finished: always
    assert t.observe(_day_done(DAYS[0]), now=3.5) is None              # the same day again: nothing new
    assert t.observe(_epoch(DAYS[1], 1), now=9.0) is not None


def test_a_one_day_step_takes_records_that_name_no_day_and_says_eta_unknown_before_any():
    t = ProgressTracker("batch_scores", ["2026-03-10"], started=0.0, tell_every_s=0.0)
    assert t.now(3.0).eta_s is None and "ETA unknown" in t.now(3.0).text()
    p = t.observe({"kind": "epoch", "values": {"epoch": 1, "epochs": 4}}, now=4.0)
    assert p.fraction == pytest.approx(0.25) and p.text().startswith("day 1/1 (2026-03-10), epoch 1/4: 25.0% done")
    with pytest.raises(ValueError, match="no days to track; valid: one day or more"):
        ProgressTracker("x", [], started=0.0)


@pytest.mark.parametrize("seconds,text", [(0, "0s"), (42.4, "42s"), (185, "3m05s"), (7620, "2h07m"), (-3, "0s")])
def test_durations_read_plainly(seconds, text):
    assert duration(seconds) == text


def test_a_later_day_s_epoch_before_the_earlier_day_s_result_does_not_move_progress_back():
    t = ProgressTracker("trained_model", DAYS, started=0.0, tell_every_s=0.0)
    t.observe(_epoch(DAYS[0], 10), now=10.0)                # day 1's last epoch; its version is being written
    p = t.observe(_epoch(DAYS[1], 1), now=11.0)             # day 2 trains before day 1's result arrives
    assert p.fraction == pytest.approx((1 + 0.1) / 3) and p.days_done == 0
    assert p.text().startswith(f"day 2/3 ({DAYS[1]}), epoch 1/10: 36.7% done")
    assert t.observe(_day_done(DAYS[0]), now=12.0).fraction == pytest.approx((1 + 0.1) / 3)
