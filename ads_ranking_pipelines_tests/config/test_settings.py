"""Settings read from a mapping: the local backend's cluster layout."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.backends.factory import local_backend
from ads_ranking_pipelines.config.settings import Settings, SettingsError


def test_the_local_layout_is_one_node_unless_a_node_per_worker_is_asked_for(tmp_path) -> None:
    home = {"ADS_RANKING_HOME": str(tmp_path)}
    default = Settings.from_environ(home)
    assert default.local_layout == "single-node" and local_backend(default).single_node
    per_worker = Settings.from_environ({**home, "ADS_RANKING_LOCAL_LAYOUT": "node-per-worker"})
    assert not local_backend(per_worker).single_node


def test_a_bad_local_layout_names_the_variable_and_the_valid_layouts(tmp_path) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_environ({"ADS_RANKING_HOME": str(tmp_path), "ADS_RANKING_LOCAL_LAYOUT": "pods"})
    assert str(err.value) == "invalid ADS_RANKING_LOCAL_LAYOUT='pods'; valid: single-node, node-per-worker"
