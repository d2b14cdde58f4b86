"""What a local Ray cluster's state file records: its nodes' addresses and PIDs, who started it
and for which run, and whether it stays warm for later runs. ``local_cluster.py`` writes it at
start and reads it back from any process (the CLI, X-Ray, the garbage collector)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClusterState:
    name: str
    owner: str
    request: dict
    temp_dir: str
    gcs_address: str
    dashboard_url: str
    head_pid: int
    worker_pids: list[int] = field(default_factory=list)
    created_at: str = ""
    controller_pid: int = 0
    # The process that started the cluster and, for a run's session cluster, the Dagster run:
    # the garbage collector (backends/gc.py) stops a session cluster whose controller died or
    # whose run has finished. A cluster from `cluster create` (session False) is long-lived.
    controller_start: str = ""
    run_id: str = ""
    session: bool = False
    single_node: bool = False       # one node with every worker's CPUs (no worker nodes)
    # A session cluster's watchdog (local_watchdog.py) and what it runs when the controller dies.
    watchdog_pid: int = 0
    on_orphan: list[str] = field(default_factory=list)
    # A warm cluster (``keep_warm_s`` > 0, ``local_warm.py``) outlives the run that made it: runs
    # with the same ``warm_match`` reuse it under a lease each; the GC stops it once no live
    # lease holds it and it has been idle for ``keep_warm_s``.
    keep_warm_s: float = 0.0
    warm_match: dict = field(default_factory=dict)
