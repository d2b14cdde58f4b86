"""The ports a local cluster chooses ahead never repeat within the cluster.

Found in a daily run (S1 probe, 800k rows/day): the head's `ray start` refused to start because
its node manager had been given the port already given to its GCS ("Ray component gcs_server is
trying to use a port number 46351 that is used by other components"); the whole cluster start
began again from scratch (~20 s). The GCS and dashboard ports were drawn first and released, and
the kernel handed one of them out again for the node's own ports (55 of 2,000 simulated starts).
Since then a node binds its own ports (0 to `ray start`, ``local_nodes.SELF_BOUND_PORTS``); those
chosen ahead are the GCS's, the dashboard's and the head's Ray Client server's.
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


def test_the_ports_chosen_ahead_for_a_cluster_never_repeat_within_it(tmp_path) -> None:
    request = ClusterRequest(name="ports", workers=2)
    for _ in range(300):     # without the bookkeeping about 3 % of 7-port draws collided
        cluster = LocalRayCluster._new(request, tmp_path, run_id=None, session=False, single_node=False)
        try:
            given = [int(cluster.state.gcs_address.rsplit(":", 1)[1]),
                     int(cluster.state.dashboard_url.rsplit(":", 1)[1])]
            given += [cluster._nodes.client_server_port() for _ in range(5)]
            assert len(given) == len(set(given)) == 7, sorted(given)
        finally:
            shutil.rmtree(cluster.state.temp_dir, ignore_errors=True)


def test_a_port_chosen_ahead_is_never_what_the_kernel_gives_a_bind_to_port_0() -> None:
    """A Ray node's processes bind their own ports as 0, as every outgoing connection gets its
    local port: the ports chosen ahead for a head (GCS, dashboard, Ray Client server) must not be
    among those, or a node of the cluster can take its own head's port before the head binds it
    (drawn by binding port 0, they collided in about 1 of 300 rounds)."""
    import socket

    for round_ in range(3000):
        chosen = set(free_ports(3))
        socks = []
        for i in range(10):
            s = socket.socket()
            s.bind((f"127.0.0.{1 + i % 2}", 0))
            socks.append(s)
        given = {s.getsockname()[1] for s in socks}
        for s in socks:
            s.close()
        assert not chosen & given, (round_, chosen & given)
