"""Fixtures of the event tests (their toy days and tables: ``helpers.py``)."""

import pytest

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec


@pytest.fixture
def small_source(tmp_path) -> SourceConfig:
    """A synthetic source with small days under a temporary root."""
    return SourceConfig(synthetic=SyntheticSpec(rows_per_day=2_000, num_users=5_000, num_ads=1_000)
                        ).with_root(str(tmp_path))
