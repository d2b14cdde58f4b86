"""The Dagster instance settings: run retries for infrastructure failures only, and the repo's
dagster.yaml is what ``ads-ranking instance dagster-yaml`` writes."""

from __future__ import annotations

import dagster as dg

from ads_ranking_pipelines.config.dagster_instance import MAX_RUN_RETRIES, instance_settings, render_yaml
from ads_ranking_pipelines.config.pools import load_catalog


def test_a_run_that_died_outside_its_steps_is_retried_a_failed_step_is_not(tmp_path):
    settings = instance_settings(load_catalog(None))
    assert settings["run_retries"] == {"enabled": True, "max_retries": MAX_RUN_RETRIES,
                                       "retry_on_asset_or_op_failure": False}
    (tmp_path / "dagster.yaml").write_text(render_yaml(settings))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:     # Dagster reads them as meant
        assert instance.run_retries_enabled and instance.run_retries_max_retries == MAX_RUN_RETRIES == 2
        assert instance.run_retries_retry_on_asset_or_op_failure is False
