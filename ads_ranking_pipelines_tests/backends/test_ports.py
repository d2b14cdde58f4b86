"""Ports for a local cluster's nodes never repeat within the cluster.

Found in a daily run (S1 probe, 800k rows/day): the head's `ray start` refused to start because
its node manager had been given the port already given to its GCS ("Ray component gcs_server is
trying to use a port number 46351 that is used by other components"); the whole cluster start
began again from scratch (~20 s). The GCS and dashboard ports were drawn first and released, and
the kernel handed one of them out again for the node's own ports (55 of 2,000 simulated starts).
"""

from __future__ import annotations

import shutil

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.ports import free_ports
from ads_ranking_pipelines.config.cluster import ClusterRequest


def test_free_ports_are_distinct_and_skip_the_ports_to_avoid() -> None:
    for _ in range(300):
        earlier = free_ports(2)
        ports = free_ports(7, avoid=earlier)
        assert len(set(ports)) == 7
        assert not set(ports) & set(earlier)


def test_every_node_of_a_cluster_gets_ports_no_other_node_of_it_has(tmp_path) -> None:
    request = ClusterRequest(name="ports", workers=2)
    for _ in range(300):     # without the bookkeeping about 3 % of these collide
        cluster = LocalRayCluster._new(request, tmp_path, run_id=None, session=False, single_node=False)
        try:
            given = [int(cluster.state.gcs_address.rsplit(":", 1)[1]),
                     int(cluster.state.dashboard_url.rsplit(":", 1)[1])]
            for _node in range(3):       # the head and two worker nodes
                given += cluster._nodes.node_ports()
            assert len(given) == len(set(given)) == 23, sorted(given)
        finally:
            shutil.rmtree(cluster.state.temp_dir, ignore_errors=True)

