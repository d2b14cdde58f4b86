"""The public CTR file formats an import accepts, by kind (``--format``)."""

from __future__ import annotations

from ads_ranking_pipelines.events.avazu_csv import AVAZU
from ads_ranking_pipelines.events.criteo_tsv import CRITEO
from ads_ranking_pipelines.events.formats import FileFormat


def formats() -> dict[str, FileFormat]:
    return {CRITEO.kind: CRITEO, AVAZU.kind: AVAZU}
