"""A real Ray cluster on this machine, on 127.0.0.1, laid out one of two ways:

* single node (the default): one Ray node with every worker's CPUs and object store. The
  workers of a request are Ray's scheduling units there (Ray Train workers, Ray Data tasks),
  as on a KubeRay cluster, without a raylet and agents per worker: it starts in about half
  the time (6-8 s against 12-16 s for head + 2 worker nodes on 2 cores, measured with
  ``make bench --only P4``).
* node per worker: one head (0 CPUs, as KubeRay's) and N worker nodes, as KubeRay lays out pods;
  a worker node that dies is replaced (``start_monitor``), as KubeRay replaces a pod.

Each node is a ``ray start --block`` process in its own process session, so the cluster can be
stopped by PID (never a global ``ray stop``), found again from another process through a state
file, and a worker node that dies can be replaced the way KubeRay replaces a pod.

Token auth is on: the cluster gets its own random token in a 0600 file inside its temp dir and
its own HOME, so nothing is written to the user's ``~/.ray``.

This module is the cluster's lifecycle: its state file (the record is ``local_cluster_state.py``),
start (again from scratch when a node exits during it), healing, teardown and discovery. Its
nodes are started, and waited for, by ``local_nodes.py``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import requests

from ads_ranking_pipelines.backends import watchdog_spawn
from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.local_cluster_state import ClusterState
from ads_ranking_pipelines.backends.local_nodes import (
    HOST,
    NODE_IP,
    OBJECT_STORE_FRACTION,
    OBJECT_STORE_MIN_BYTES,
    START_WAVE,
    LocalNodes,
    NodeExited,
    bin_dir,
    head_cpus,
    object_store_bytes,
)
from ads_ranking_pipelines.backends.ports import free_ports
from ads_ranking_pipelines.backends.processes import kill_mentioning, pid_alive, pids_mentioning, process_start
from ads_ranking_pipelines.config.cluster import ClusterRequest

log = logging.getLogger(__name__)

# The wait, after SIGTERM, for a node whose `ray start` is still starting (its raylet and agents
# have the signal; that process itself exits only when its own start-up check gives up).
STARTING_GRACE_S = 2.0

# The node start-up's names (local_nodes.py) and the state record (local_cluster_state.py) among
# them, importable from here as before they moved.
__all__ = [
    "HOST", "NODE_IP", "OBJECT_STORE_FRACTION", "OBJECT_STORE_MIN_BYTES", "START_WAVE", "ClusterState",
    "LocalRayCluster", "NodeExited", "object_store_bytes",
]


class LocalRayCluster:
    """Start, find, grow, heal and stop one local Ray cluster."""

    def __init__(self, state: ClusterState, state_dir: Path):
        self.state = state
        self.state_dir = state_dir
        self._nodes = LocalNodes(self)      # the node processes this process started
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self.replaced_workers = 0

    # ---- paths and environment -------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.state.name

    @property
    def request(self) -> ClusterRequest:
        """The request the cluster was started from (kept in its state file)."""
        return ClusterRequest.model_validate(self.state.request)

    @property
    def token_file(self) -> Path:
        return Path(self.state.temp_dir) / "auth_token"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token_file.read_text().strip()}"}

    def env(self) -> dict[str, str]:
        """Environment for every process of this cluster (and for clients that need the token).

        ``RAY_ADDRESS`` is this cluster's GCS, as KubeRay sets it in every Ray container
        (ray-operator/controllers/ray/common/pod.go ``setContainerEnvVars``): a Ray worker that
        looks its cluster up without an address finds this one. Without it, with another Ray on
        the machine, Ray Train's ``PlacementGroupCleaner`` (it calls the state API with no
        address) either lost its monitor thread to "Found multiple active Ray instances" (a
        traceback in the run's log; the detached actor then outlives a controller that dies
        ungracefully) or asked the cluster of the machine's last plain ``ray start`` and, not
        finding the controller there, exited at once: no placement group was ever cleaned."""
        env = dict(os.environ)
        env.update({
            "RAY_ADDRESS": self.state.gcs_address,
            "HOME": str(Path(self.state.temp_dir) / "home"),
            # Scratch files of the cluster's processes (training's checkpoint staging dirs) go
            # under the cluster's temp dir, so a worker killed mid-epoch leaves none in /tmp:
            # ``stop`` removes the whole dir.
            "TMPDIR": str(Path(self.state.temp_dir) / "tmp"),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.token_file),
            "RAY_USAGE_STATS_ENABLED": "0",
            # Teardown is deliberate: no 30 s drain per node.
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
            # Ray Train starts a PreemptionWatcher actor with every worker group to notice node
            # drains (a cloud or autoscaler taking a node back). Nothing drains the nodes of this
            # cluster, all on one machine, so locally the actor only costs a process start
            # (~2.3 CPU-s of imports per training job, measured here). KubeRay clusters keep it.
            "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
            "PATH": bin_dir() + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONUNBUFFERED": "1",
        })
        env.pop("RAY_AUTH_TOKEN", None)
        return env

    @staticmethod
    def state_file(state_dir: Path, name: str) -> Path:
        return state_dir / f"{name}.json"

    @staticmethod
    def lease_dir(state_dir: Path, name: str) -> Path:
        """Where the runs using a warm cluster keep their leases (``local_warm_lease.py``)."""
        return state_dir / f"{name}.leases"

    def _save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_file(self.state_dir, self.name)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self.state), indent=2))
        tmp.replace(path)

    # ---- lifecycle -------------------------------------------------------------------------
    @classmethod
    def start(cls, request: ClusterRequest, state_dir: str | Path, start_timeout_s: float = 120,
              *, run_id: str | None = None,
              session: bool = False, attempts: int = 2, single_node: bool = False,
              on_orphan: list[str] | None = None, keep_warm_s: float = 0.0,
              warm_match: dict | None = None) -> "LocalRayCluster":
        """Start the head, then the worker nodes (START_WAVE at a time), and wait until all have
        joined; with ``single_node`` one node holds every worker's CPUs (no worker nodes).

        On a loaded machine a Ray node can give up during its own start (the raylet allows its
        dashboard agent 15 s; `ray start` allows the raylet 30 s). Each node is started up to
        ``attempts`` times: a start whose head exits is torn down completely and made again from
        scratch; a worker node that exits before it joins is started again on its own.
        """
        state_dir = Path(state_dir)
        existing = cls.find(request.name, state_dir)
        if existing is not None and existing.alive():
            raise BackendError(f"a local Ray cluster named {request.name!r} is already running "
                               f"(dashboard {existing.state.dashboard_url}); delete it or pick another name")
        for attempt in range(1, attempts + 1):
            cluster = cls._new(request, state_dir, run_id=run_id, session=session, single_node=single_node,
                               on_orphan=on_orphan)
            cluster.state.keep_warm_s, cluster.state.warm_match = keep_warm_s, dict(warm_match or {})
            try:
                cluster._bring_up(request, start_timeout_s, attempts)
                return cluster
            except NodeExited as exc:
                # the leases stay: the run that took one for this cluster before its start holds it
                cluster.stop(keep_logs=attempt == attempts, keep_leases=True)
                if attempt == attempts:
                    raise BackendError(f"{exc} (tried {attempts} times)") from None
                log.warning("%s; starting %s again from scratch", exc, request.name)
            except BaseException:
                cluster.stop(keep_logs=True, keep_leases=True)
                raise
        raise AssertionError("unreachable")

    @classmethod
    def _new(cls, request: ClusterRequest, state_dir: Path, *,
             run_id: str | None, session: bool, single_node: bool,
             on_orphan: list[str] | None = None) -> "LocalRayCluster":
        # Short path: Ray's unix socket paths must stay under ~107 characters.
        temp_dir = tempfile.mkdtemp(prefix="arp-", dir="/tmp")
        for sub in ("home", "tmp"):
            os.makedirs(Path(temp_dir) / sub, exist_ok=True)
        token_path = Path(temp_dir) / "auth_token"
        token_path.touch(mode=0o600)
        token_path.write_text(secrets.token_hex(32))
        gcs, dash = free_ports(2)
        state = ClusterState(
            name=request.name, owner=request.owner, request=request.model_dump(mode="json"),
            temp_dir=temp_dir, gcs_address=f"{NODE_IP}:{gcs}", dashboard_url=f"http://{HOST}:{dash}",
            head_pid=0, created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            controller_pid=os.getpid(), controller_start=process_start(os.getpid()),
            run_id=run_id or "", session=session, single_node=single_node,
            on_orphan=list(on_orphan or []),
        )
        cluster = cls(state, state_dir)
        return cluster

    def _bring_up(self, request: ClusterRequest, timeout_s: float, attempts: int) -> None:
        single = self.state.single_node
        if self.state.session:
            # Before the head: from here on a dead controller leaves no cluster behind (a head
            # it started but did not record yet is found by its temp dir, ``stop``).
            self._save()
            self.state.watchdog_pid = watchdog_spawn.spawn(self.state_file(self.state_dir, self.name))
        head = self._nodes.spawn_head(request, single)
        self.state.head_pid = head.pid
        self._save()
        self._nodes.wait_dashboard(timeout_s)
        if not single:
            self.start_worker_nodes(request.workers, timeout_s, attempts)
        self.wait_for_nodes(1 + len(self.state.worker_pids), timeout_s)
        self._nodes.wait_started([self.state.head_pid, *self.state.worker_pids], timeout_s)

    head_cpus = staticmethod(head_cpus)      # LocalRayCluster.head_cpus(request, single_node)

    def add_worker(self) -> int:
        """Start one more worker node and record it in the state file."""
        req = self.request
        with self._lock:
            proc = self._nodes.spawn_worker(req)
            self.state.worker_pids.append(proc.pid)
            self._save()
        return proc.pid

    def forget_watchdog(self) -> None:
        """Record that the watchdog has exited (a warm cluster's outlives it): nothing is to
        kill its PID, which another process may get, when the cluster stops later."""
        with self._lock:
            self.state.watchdog_pid = 0
            self._save()

    def forget_worker(self, pid: int) -> None:
        """Drop a worker node whose process exited from the state file."""
        with self._lock:
            self.state.worker_pids.remove(pid)
            self._save()

    def start_worker_nodes(self, count: int, timeout_s: float, attempts: int = 2) -> None:
        """Start ``count`` worker nodes, a wave at a time (:meth:`LocalNodes.start_worker_nodes`)."""
        self._nodes.start_worker_nodes(count, timeout_s, attempts)

    def alive_nodes(self) -> int:
        """Live nodes, as the GCS knows them (the state API asks the GCS on every call; the
        dashboard's ``/nodes?view=summary`` was measured to see a new node 1.3-1.9 s later)."""
        r = requests.get(f"{self.state.dashboard_url}/api/v0/nodes", params={"detail": "false", "limit": 10000},
                         headers=self.auth_headers(), timeout=5)
        r.raise_for_status()
        nodes = r.json()["data"]["result"]["result"]
        return sum(1 for n in nodes if n.get("state") == "ALIVE")

    def wait_for_nodes(self, n: int, timeout_s: float, watch_pids: Sequence[int] = ()) -> None:
        """Wait for ``n`` live nodes; raise :class:`NodeExited` as soon as the head or one of
        ``watch_pids`` exits."""
        self._nodes.wait_for_nodes(n, timeout_s, watch_pids)

    def log_tail(self, pid: int, lines: int = 15) -> str:
        """The last ``lines`` of the log of node ``pid`` (one this process started)."""
        return self._nodes.log_tail(pid, lines)

    def alive(self) -> bool:
        """The head node runs (not yet while a session cluster's watchdog starts first)."""
        return bool(self.state.head_pid) and pid_alive(self.state.head_pid)

    def live_worker_pids(self) -> list[int]:
        return [p for p in self.state.worker_pids if self._nodes.alive(p)]

    # ---- healing ---------------------------------------------------------------------------
    def start_monitor(self, interval_s: float = 1.0) -> None:
        """Replace worker nodes that die, as KubeRay replaces a failed worker pod."""

        def loop() -> None:
            while not self._stopping.wait(interval_s):
                for pid in list(self.state.worker_pids):
                    if self._stopping.is_set():
                        return
                    if not self._nodes.alive(pid):
                        self.forget_worker(pid)
                        log.warning("worker node (pid %s) of %s died; starting a replacement", pid, self.name)
                        with contextlib.suppress(Exception):
                            self._kill_group(pid, signal.SIGKILL)
                        if not self._stopping.is_set():
                            self.add_worker()
                            self.replaced_workers += 1

        self._monitor = threading.Thread(target=loop, name=f"ray-node-monitor-{self.name}", daemon=True)
        self._monitor.start()

    # ---- teardown --------------------------------------------------------------------------
    @staticmethod
    def _kill_group(pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)

    def _reap(self, pid: int, timeout_s: float) -> None:
        proc = self._nodes.procs.get(pid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return
            if proc is None and not pid_alive(pid):
                return
            time.sleep(0.2)

    def stop(self, timeout_s: float = 20, keep_logs: bool = False, force: bool = False,
             keep_leases: bool = False) -> None:
        """Stop this cluster's processes (by PID and process group), then remove its files.

        With ``keep_logs`` the node logs are kept under ``<state_dir>/<name>.logs/``. ``force``
        kills at once (SIGKILL, Ray's ``ray stop --force``) instead of SIGTERM and waiting up
        to ``timeout_s``: for a cluster whose work is over and whose files are removed next
        (Ray's own graceful exit of `ray start --block` took 2.3-3.6 s here). The runs' leases
        on a warm cluster go with it unless ``keep_leases`` (a start made again from scratch).
        """
        self._stopping.set()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(timeout=5)
        self._stop_watchdog()
        pids = [*self.state.worker_pids, *([self.state.head_pid] if self.state.head_pid else [])]
        for pid in pids:
            self._kill_group(pid, signal.SIGKILL if force and not keep_logs else signal.SIGTERM)
        for pid in pids:
            # a node whose `ray start` is still in its own start-up does not exit on SIGTERM
            # (``LocalNodes.wait_started``): its raylet and agents got the signal; no grace for it
            grace = timeout_s if self._nodes.started(pid) else STARTING_GRACE_S
            self._reap(pid, 0 if force and not keep_logs else grace)
            self._kill_group(pid, signal.SIGKILL)
            self._reap(pid, 2)
        # Anything that escaped its group but still names our temp dir is ours too.
        kill_mentioning(self.state.temp_dir)
        for proc in self._nodes.procs.values():
            with contextlib.suppress(Exception):
                proc.wait(timeout=1)
        if keep_logs:
            dest = self.state_dir / f"{self.name}.logs"
            shutil.rmtree(dest, ignore_errors=True)
            with contextlib.suppress(OSError):
                shutil.copytree(self.state.temp_dir, dest, symlinks=True, ignore_dangling_symlinks=True,
                                ignore=shutil.ignore_patterns("sockets", "home", "tmp", "auth_token", "*.sock",
                                                              "runtime_resources"))
            log.warning("Ray node logs of %s kept in %s", self.name, dest)
        shutil.rmtree(self.state.temp_dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.state_file(self.state_dir, self.name).unlink()
        if not keep_leases:
            shutil.rmtree(self.lease_dir(self.state_dir, self.name), ignore_errors=True)

    def _stop_watchdog(self) -> None:
        pid = self.state.watchdog_pid
        if pid and pid != os.getpid():
            self._kill_group(pid, signal.SIGKILL)
            self._reap(pid, 2)
            with contextlib.suppress(OSError):
                watchdog_spawn.log_path(self.state_file(self.state_dir, self.name)).unlink()

    # ---- discovery from another process ----------------------------------------------------
    @classmethod
    def find(cls, name: str, state_dir: str | Path) -> "LocalRayCluster | None":
        path = cls.state_file(Path(state_dir), name)
        if not path.exists():
            return None
        return cls(ClusterState(**json.loads(path.read_text())), Path(state_dir))

    @classmethod
    def list(cls, state_dir: str | Path) -> list["LocalRayCluster"]:
        d = Path(state_dir)
        if not d.is_dir():
            return []
        return [c for p in sorted(d.glob("*.json")) if (c := cls.find(p.stem, d)) is not None]

    def leftover_pids(self) -> list[int]:
        return pids_mentioning(self.state.temp_dir)
