"""Teardown of a run's session cluster on the local backend: killed at once (its jobs are over
and its files are removed next), nothing left behind."""

from __future__ import annotations

import signal

import psutil
import pytest

from ads_ranking_pipelines.backends.local import LocalRayBackend
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.processes import pids_mentioning
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines_tests.processes import wait_no_processes

pytestmark = pytest.mark.ray


def _node_exit_codes(cluster: LocalRayCluster) -> list[int | None]:
    return [p.returncode for p in cluster._nodes.procs.values()]


@pytest.mark.parametrize("single_node", [True, False], ids=["single-node", "node-per-worker"])
def test_a_session_cluster_is_killed_at_once_and_leaves_nothing(tmp_path, single_node) -> None:
    state_dir = tmp_path / "clusters"
    nodes = 1 if single_node else 2
    with LocalRayBackend(state_dir, single_node=single_node).session(ClusterRequest(name="td", workers=1)) as session:
        cluster = session.cluster
        assert cluster.alive_nodes() == nodes
        scratch = f"{cluster.state.temp_dir}/tmp"
        assert {psutil.Process(pid).environ().get("TMPDIR") for pid in pids_mentioning(cluster.state.temp_dir)} \
            == {scratch}
    # `ray start --block` exits 1 after its own graceful shutdown on SIGTERM; killed: -9
    assert _node_exit_codes(cluster) == [-signal.SIGKILL] * nodes
    assert wait_no_processes(cluster.state.temp_dir) == []
    assert LocalRayCluster.find("td", state_dir) is None
