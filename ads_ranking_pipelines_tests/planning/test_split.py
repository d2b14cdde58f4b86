"""A range is one run, or as many consecutive runs as the pool holds at once."""

from __future__ import annotations

import datetime as dt

from ads_ranking_pipelines.planning.split import Capacity, propose

D = [dt.date(2026, 3, 1) + dt.timedelta(days=i) for i in range(7)]


def test_a_pool_holding_one_run_gets_one_run():
    split = propose(D, [10.0] * 7, Capacity(run_limit=1))
    assert split.runs == ((D[0], D[-1]),) and split.wall_seconds == 70.0


def test_a_pool_holding_three_runs_gets_three_consecutive_ranges_covering_every_day_once():
    split = propose(D, [10.0] * 7, Capacity(run_limit=3))
    assert len(split.runs) == 3 and split.runs[0][0] == D[0] and split.runs[-1][1] == D[-1]
    covered = [d for a, b in split.runs for d in D if a <= d <= b]
    assert covered == D
    assert split.wall_seconds == 30.0


def test_the_tighter_of_run_limit_and_kueue_quota_wins_and_no_more_runs_than_days():
    assert Capacity(run_limit=4, quota_runs=2).parallel == 2
    assert Capacity(run_limit=None, quota_runs=None).parallel == 1
    assert len(propose(D[:2], None, Capacity(run_limit=5)).runs) == 2


def test_the_split_balances_estimated_time_not_day_counts():
    split = propose(D[:4], [30.0, 10.0, 10.0, 10.0], Capacity(run_limit=2))
    assert split.runs == ((D[0], D[0]), (D[1], D[3])) and split.wall_seconds == 30.0
