"""Criteo Display Advertising Challenge ``train.txt``: the ``criteo_tsv`` source kind.

Tab separated, no header, 40 fields per line: ``label`` (0/1), ``I1..I13`` (integer counts,
may be empty, some may be negative), ``C1..C26`` (8-hex-digit hashed categories, may be empty).
Rows are in time order; there is no timestamp.
"""

from __future__ import annotations

from ads_ranking_pipelines.config.source import CRITEO_DENSE, CRITEO_LABEL, CRITEO_SPARSE
from ads_ranking_pipelines.events.formats import FileFormat

CRITEO = FileFormat(
    kind="criteo_tsv",
    description="40 tab-separated fields: label (0/1), I1..I13 (integers or empty), C1..C26 "
                "(categories or empty)",
    delimiter="\t",
    columns=(CRITEO_LABEL, *CRITEO_DENSE, *CRITEO_SPARSE),
    label=CRITEO_LABEL,
    int_columns=CRITEO_DENSE,
    header=False,
)
