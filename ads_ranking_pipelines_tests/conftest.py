"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os

import pytest

from ads_ranking_pipelines.backends.processes import wait_for_exit
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.fixtures import fake_apiserver  # noqa: F401 - for every test


def wait_no_processes(marker: str, timeout_s: float = 15.0) -> list[int]:
    """Processes still naming ``marker`` after up to ``timeout_s`` (empty: all gone)."""
    return wait_for_exit(marker, timeout_s)


@pytest.fixture
def ads_home(tmp_path, monkeypatch):
    """A private ADS_RANKING_HOME and DAGSTER_HOME; every Ray process we start inherits them."""
    home = tmp_path / "ads_home"
    dagster_home = tmp_path / "dagster_home"
    home.mkdir()
    dagster_home.mkdir()
    monkeypatch.setenv("ADS_RANKING_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("ADS_RANKING_BACKEND", raising=False)
    return home


@pytest.fixture
def environ(ads_home):
    return dict(os.environ)


def stop_process_group(proc, grace_s: float = 30.0) -> None:
    """SIGTERM a child started with ``start_new_session=True`` and its group; SIGKILL if it stays."""
    import os
    import signal
    import subprocess

    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
