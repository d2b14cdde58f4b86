"""How many actors Ray Data starts to read parquet footers.

Ray Data 2.60 reads the footers of a ``read_parquet`` call's files with a pool of
``RAY_DATA_PARQUET_FOOTER_NUM_ACTORS`` actors, 32 by default, started for every call and killed
after it: 32 new worker processes (about 200 MB each) to read the footers of the one to a few
files of a day. On a small cluster that costs seconds of process start-up per read and a
memory spike. :func:`footer_readers` sets the pool to one actor per ``read_footers`` batch of
files (Ray's ``RAY_DATA_PARQUET_FOOTER_BATCH_SIZE``, 10), at most Ray's 32, for the duration of
a read (Ray reads the variable when the read is planned and executed in this process); a value
the user set wins.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, MutableMapping

FOOTER_ACTORS_ENV = "RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"
FILES_PER_FOOTER_BATCH = 10
MAX_FOOTER_ACTORS = 32


def footer_actor_count(n_files: int) -> int:
    return max(1, min(MAX_FOOTER_ACTORS, math.ceil(n_files / FILES_PER_FOOTER_BATCH)))


@contextlib.contextmanager
def footer_readers(n_files: int, environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Within the block, Ray Data reads parquet footers of ``n_files`` files with
    :func:`footer_actor_count` actors (unless ``RAY_DATA_PARQUET_FOOTER_NUM_ACTORS`` is set)."""
    env = os.environ if environ is None else environ
    if FOOTER_ACTORS_ENV in env:
        yield
        return
    env[FOOTER_ACTORS_ENV] = str(footer_actor_count(n_files))
    try:
        yield
    finally:
        env.pop(FOOTER_ACTORS_ENV, None)
