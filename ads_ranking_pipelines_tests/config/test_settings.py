"""Settings read from a mapping: the local backend's cluster layout."""

from __future__ import annotations

import os

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


def test_the_replica_failure_grace_is_read_in_seconds(tmp_path) -> None:
    home = {"ADS_RANKING_HOME": str(tmp_path)}
    assert Settings.from_environ(home).replica_failure_grace_s == 120.0
    assert Settings.from_environ({**home, "ADS_RANKING_REPLICA_FAILURE_GRACE_S": "30"}) \
        .replica_failure_grace_s == 30.0
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(SettingsError) as err:
            Settings.from_environ({**home, "ADS_RANKING_REPLICA_FAILURE_GRACE_S": bad})
        assert str(err.value) == (f"invalid ADS_RANKING_REPLICA_FAILURE_GRACE_S={bad!r}; "
                                  "valid: a number of seconds >= 0")


def test_the_owner_is_never_unknown_where_no_variable_names_the_user(tmp_path) -> None:
    """A container's shell often sets neither USER nor LOGNAME: the owner is then the account
    of this process's user id (what X-Ray and ``cluster create`` record), not "unknown"."""
    import pwd

    home = {"ADS_RANKING_HOME": str(tmp_path)}
    assert Settings.from_environ(home).owner == pwd.getpwuid(os.getuid()).pw_name
    assert Settings.from_environ({**home, "LOGNAME": "lee"}).owner == "lee"
    assert Settings.from_environ({**home, "LOGNAME": "lee", "USER": "una"}).owner == "una"
    assert Settings.from_environ({**home, "USER": "una", "ADS_RANKING_OWNER": "ops"}).owner == "ops"


@pytest.mark.parametrize("name, value, valid", [
    ("ADS_RANKING_KUBE_IN_CLUSTER", "maybe", "true or false"),
    ("ADS_RANKING_BACKEND", "k8s", "local, kuberay"),
    ("ADS_RANKING_RAYJOB_DELETION", "never", "rules, shutdown"),
    ("ADS_RANKING_CONTROLLER_TIMEOUT_S", "1", "a number of seconds >= 5"),
    ("ADS_RANKING_REPLICA_FAILURE_GRACE_S", "inf", "a number of seconds >= 0"),
])
def test_each_bad_variable_is_named_with_what_is_valid(tmp_path, name, value, valid) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_environ({"ADS_RANKING_HOME": str(tmp_path), name: value})
    assert str(err.value) == f"invalid {name}={value!r}; valid: {valid}"


def test_a_blank_variable_is_an_unset_one_and_values_are_typed(tmp_path) -> None:
    settings = Settings.from_environ({"ADS_RANKING_HOME": str(tmp_path), "ADS_RANKING_BACKEND": "  ",
                                      "ADS_RANKING_KUBE_IN_CLUSTER": "Yes", "ADS_RANKING_NAMESPACE": " ml ",
                                      "ADS_RANKING_CONTROLLER_TIMEOUT_S": "7.5", "UNRELATED": "x"})
    assert (settings.backend, settings.kube_in_cluster, settings.namespace, settings.controller_timeout_s) == \
        ("local", True, "ml", 7.5)
    assert settings.state_dir == os.path.join(str(tmp_path), "clusters")
