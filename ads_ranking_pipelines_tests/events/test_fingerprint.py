"""The data window's fingerprint changes when a day's files change, and only then."""

from __future__ import annotations

import datetime as dt
import os
import time

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.events.fingerprint import window_fingerprint
from ads_ranking_pipelines.events.layout import ensure_synthetic_days, part_uris

DAYS = [dt.date(2026, 3, 8), dt.date(2026, 3, 9)]


def test_a_rewritten_day_changes_the_fingerprint(tmp_path):
    source = SourceConfig(uri=str(tmp_path / "events"), synthetic=SyntheticSpec(rows_per_day=200, num_users=50,
                                                                                  num_ads=20))
    ensure_synthetic_days(source, DAYS)
    before = window_fingerprint(source, DAYS)
    assert window_fingerprint(source, list(reversed(DAYS))) == before          # order does not matter
    assert window_fingerprint(source, DAYS[:1]) != before
    part = part_uris(source.uri, DAYS[1], source.completeness)[0]
    later = time.time() + 5
    os.utime(part, (later, later))                                            # the day written again
    assert window_fingerprint(source, DAYS) != before
