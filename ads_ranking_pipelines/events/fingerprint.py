"""A fingerprint of the event files a training window reads: each day's part files with their
size and modification time. Written again or changed, a day changes the fingerprint (and so the
resume key, ``planning/resume.py``): an attempt never resumes over different data."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.layout import part_uris
from ads_ranking_pipelines.storage import fs


def window_fingerprint(source: SourceConfig, days: Iterable[dt.date]) -> str:
    """The fingerprint of ``days`` of ``source`` (a source not resolved to a location yet has none to read)."""
    h = hashlib.sha256((source.uri or "").encode())
    if not source.uri:
        return h.hexdigest()[:16]
    for day in sorted(set(days)):
        h.update(day.isoformat().encode())
        for uri in part_uris(source.uri, day, source.completeness):
            size, mtime_ns = fs.stamp(uri)
            h.update(f"{uri.rsplit('/', 1)[-1]}:{size}:{mtime_ns}".encode())
    return h.hexdigest()[:16]
