"""Avazu CTR ``train.csv``: the ``avazu_csv`` source kind.

Comma separated, 24 columns ``id, click, hour, C1, banner_pos, site_id, ... C14..C21``; the
first file of a split opens with that header, continuation files may not (a header line is
recognised and skipped in any file). ``hour`` is ``YYMMDDHH``; the import adds ``hour_of_day``
(``HH``) as a categorical. Every other column but ``id`` is categorical.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ads_ranking_pipelines.config.source import AVAZU_COLUMNS, AVAZU_HOUR_OF_DAY, AVAZU_LABEL
from ads_ranking_pipelines.events.formats import FileFormat

_INTS = ("hour", "C1", "banner_pos", "device_type", "device_conn_type",
         "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21")


def _hour_of_day(table: pa.Table) -> pa.Table:
    return table.append_column(AVAZU_HOUR_OF_DAY, pc.cast(pc.remainder(table.column("hour"), 100), pa.int64()))


AVAZU = FileFormat(
    kind="avazu_csv",
    description="24 comma-separated fields: " + ", ".join(AVAZU_COLUMNS)
                + " (click 0/1; hour YYMMDDHH; integers where Avazu has them)",
    delimiter=",",
    columns=AVAZU_COLUMNS,
    label=AVAZU_LABEL,
    int_columns=_INTS,
    header=True,
    derive=_hour_of_day,
)
