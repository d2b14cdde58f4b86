"""Start-up of a local Ray cluster's nodes: each node a ``ray start --block`` process in its own
process session, binding its own ports (``SELF_BOUND_PORTS``); worker nodes START_WAVE at a
time, each spawned once the node before it has bound its raylet socket; and the waits until the
dashboard answers and the nodes have joined, which give up at once (:class:`NodeExited`, quoting
the node's log) when a node process exits first.

:class:`LocalNodes` is the part of a ``LocalRayCluster`` (``local_cluster.py``: its state file,
healing, teardown and discovery) that starts its nodes and keeps the processes it started.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import requests

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.ports import free_ports
from ads_ranking_pipelines.backends.processes import pid_alive
from ads_ranking_pipelines.config.cluster import CPU_POOL_WORKER_MEMORY, ClusterRequest
from ads_ranking_pipelines.config.quantity import parse_memory

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
# Ray rewrites 127.0.0.1 / localhost given as a node address into the machine's routable
# address; another loopback address is taken as given, so every node stays on loopback.
NODE_IP = "127.0.0.2"
# A node's object store: Ray's own default share of the node's memory, which is what a KubeRay
# pod of the same request gets (Ray reads the container's memory limit). It was a fixed 256 MiB
# per node here: a training window larger than that (3.2M rows a day: ~0.5 GiB) was spilled to
# disk and read back every epoch. Shared memory is taken as objects arrive, not at start.
OBJECT_STORE_FRACTION = 0.3
OBJECT_STORE_MIN_BYTES = 256 * 1024**2
# Worker nodes started together. Measured on 2 cores: the start of one worker node keeps about
# one core busy for ~6 s (its `ray start`, raylet and agents); started one at a time, 2 worker
# nodes took 12 s of a 24 s cluster start.
START_WAVE = 2
# What `ray start` prints once its own start-up checks are over (ray/scripts/scripts.py, start).
STARTED_LINE = "Ray runtime started."
# A node's own ports, given to `ray start` as 0: each process binds a port the kernel picks at
# that moment (Ray 2.60 then records it in the GCS). They were chosen ahead (free_ports) and bound
# seconds later, open to any other process in between. Most of them taken make the node exit (a
# start attempt lost), but a dashboard agent whose HTTP port is taken stays up without its HTTP
# server (ray/dashboard/agent.py), and the job head submits only through the head's agent: every
# submission then answers "No available agent to submit job" (as the Kueue readmission test
# did once on 2026-12-07; its logs were not kept). The ports still chosen ahead (GCS, dashboard,
# Ray Client server) come from outside the range these binds draw from (``ports.free_ports``).
SELF_BOUND_PORTS = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
                    "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port")


def object_store_bytes(request: ClusterRequest, role: str) -> int:
    """Object store of the head (``head_memory``), of a worker node (``memory_per_worker``,
    else the CPU-pool default) or of a single node (``single``: the head's and every worker's)."""
    worker = parse_memory(request.memory_per_worker or CPU_POOL_WORKER_MEMORY)
    memory = {"head": parse_memory(request.head_memory), "worker": worker,
              "single": parse_memory(request.head_memory) + request.workers * worker}[role]
    return max(OBJECT_STORE_MIN_BYTES, int(memory * OBJECT_STORE_FRACTION))


def head_cpus(request: ClusterRequest, single_node: bool = False) -> float:
    """The head schedules no work when there are worker nodes (as on KubeRay: num-cpus 0);
    a single node has every worker's CPUs. A request for no workers: the head's own."""
    if request.workers == 0:
        return request.head_cpus
    return request.workers * request.worker_cpus() if single_node else 0.0


def bin_dir() -> str:
    """The directory of this Python's executables (``ray`` among them)."""
    return str(Path(sys.executable).parent)


class NodeExited(BackendError):
    """A node process (``pid``) exited before it joined the cluster."""

    def __init__(self, message: str, pid: int = 0):
        super().__init__(message)
        self.pid = pid


class Cluster(Protocol):
    """What the start-up uses of its cluster (a ``LocalRayCluster``)."""

    state: Any      # its ClusterState: temp_dir, gcs_address, dashboard_url, head_pid

    @property
    def name(self) -> str: ...
    def env(self) -> dict[str, str]: ...
    def auth_headers(self) -> dict[str, str]: ...
    def alive_nodes(self) -> int: ...
    def add_worker(self) -> int: ...
    def forget_worker(self, pid: int) -> None: ...


class LocalNodes:
    """Starts the nodes of one local cluster and keeps what it started: each node's process
    and log file, and every port chosen ahead for the cluster."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.procs: dict[int, subprocess.Popen] = {}
        self._logs: dict[int, Path] = {}
        # Every port chosen ahead for this cluster (the head's GCS and dashboard ports are not
        # bound until its node is up, so a later draw could pick one of them again).
        self._ports: set[int] = {int(cluster.state.gcs_address.rsplit(":", 1)[1]),
                                 int(cluster.state.dashboard_url.rsplit(":", 1)[1])}
        self._pending_socket: tuple[int, int] | None = None     # (pid, raylet sockets before it)

    # ---- node processes --------------------------------------------------------------------
    def spawn_head(self, request: ClusterRequest, single_node: bool) -> subprocess.Popen:
        """The head node: with ``single_node`` every worker's CPUs and object store are its."""
        state = self.cluster.state
        gcs, dash = state.gcs_address.rsplit(":", 1)[1], state.dashboard_url.rsplit(":", 1)[1]
        # No autoscaler monitor (`--no-monitor`, as KubeRay starts a head whose autoscaler runs
        # elsewhere): a local cluster has a fixed set of nodes and nothing to scale, and the
        # monitor process cost ~0.8 CPU-s a head (36 CPU-s over the 44 heads of a test-suite run).
        head = self._spawn([
            "--head", f"--port={gcs}", f"--dashboard-port={dash}", f"--dashboard-host={HOST}",
            "--include-dashboard=true", f"--num-cpus={head_cpus(request, single_node):g}",
            f"--temp-dir={state.temp_dir}", "--no-monitor",
        ], role="head", object_store=object_store_bytes(request, "single" if single_node else "head"))
        # The worker nodes start while the head's raylet registers, once it has its socket.
        self._pending_socket = (head.pid, 0)
        return head

    def spawn_worker(self, request: ClusterRequest) -> subprocess.Popen:
        """A worker node joining the head (the caller records it in the cluster's state)."""
        # All nodes share one session log dir here: only the head's log monitor may forward
        # worker output to drivers, or every line arrives once per node.
        return self._spawn([f"--address={self.cluster.state.gcs_address}", f"--num-cpus={request.worker_cpus():g}",
                            "--include-log-monitor=false"], role="worker",
                           object_store=object_store_bytes(request, "worker"))

    def _spawn(self, node_args: list[str], role: str, object_store: int) -> subprocess.Popen:
        cmd = [
            str(Path(bin_dir()) / "ray"), "start", "--block", f"--node-ip-address={NODE_IP}",
            *(f"--{name}=0" for name in SELF_BOUND_PORTS),
            f"--object-store-memory={object_store}",
            "--num-gpus=0", "--disable-usage-stats",
            *node_args,
        ]
        if role == "head":
            cmd.append(f"--ray-client-server-port={self.client_server_port()}")
        temp_dir = self.cluster.state.temp_dir
        logs = Path(temp_dir) / f"{role}-{len(self.procs)}.log"
        out = open(logs, "ab")
        proc = subprocess.Popen(cmd, env=self.cluster.env(), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=temp_dir)
        out.close()
        self.procs[proc.pid] = proc
        self._logs[proc.pid] = logs
        return proc

    def client_server_port(self) -> int:
        """A port for the head's Ray Client server, none given to this cluster before: ``ray
        start`` takes no 0 for it (1024-65535), so it is chosen here, as the GCS's and the
        dashboard's are (``LocalRayCluster._new``)."""
        (port,) = free_ports(1, avoid=self._ports)
        self._ports.add(port)
        return port

    def alive(self, pid: int) -> bool:
        proc = self.procs.get(pid)
        if proc is not None:
            return proc.poll() is None
        return pid_alive(pid)

    def started(self, pid: int) -> bool:
        """Whether the `ray start` of node ``pid`` has finished its own start-up (it printed
        STARTED_LINE). A node this process did not start counts as started."""
        return pid not in self._logs or STARTED_LINE in self._log_text(pid)

    def log_tail(self, pid: int, lines: int = 15) -> str:
        return "\n".join(self._log_text(pid).splitlines()[-lines:])

    def _log_text(self, pid: int) -> str:
        """What node ``pid``'s `ray start` has written so far ("" when unknown or unreadable)."""
        path = self._logs.get(pid)
        with contextlib.suppress(OSError):
            return path.read_text(errors="replace") if path else ""
        return ""

    # ---- worker nodes, a wave at a time ----------------------------------------------------
    def start_worker_nodes(self, count: int, timeout_s: float, attempts: int = 2) -> None:
        """Start ``count`` worker nodes, START_WAVE at a time, each wave waited for until the
        head counts it (head + every node started so far).

        A node whose process exits before it registers (on a busy machine another process can
        take one of its ports between our probe and Ray's bind) is started again on fresh ports,
        up to ``attempts`` times per node; the error quotes the last lines of its log.
        """
        started = 0
        while started < count:
            wave = [self._spawn_worker(timeout_s) for _ in range(min(START_WAVE, count - started))]
            started += len(wave)
            self._await_wave(1 + started, wave, timeout_s, attempts)

    def _spawn_worker(self, timeout_s: float) -> int:
        """A worker node, spawned once the node spawned before it has bound its raylet socket."""
        if self._pending_socket is not None:
            self._await_raylet_socket(*self._pending_socket, timeout_s)
        before = self._raylet_sockets()
        pid = self.cluster.add_worker()
        self._pending_socket = (pid, before)
        return pid

    def _raylet_sockets(self) -> int:
        with contextlib.suppress(OSError):
            return sum(1 for p in (Path(self.cluster.state.temp_dir) / "session_latest" / "sockets").iterdir()
                       if p.name.startswith("raylet"))
        return 0

    def _await_raylet_socket(self, pid: int, before: int, timeout_s: float) -> None:
        """Wait until the node ``pid`` has bound its raylet socket (there are more than
        ``before``) or has exited. All nodes share the head's session directory, where Ray
        names a new node's sockets "the first name not taken" without creating the file: two
        nodes starting at once took the same socket and one never registered ("The current
        node timed out during startup")."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.alive(pid):
            if self._raylet_sockets() > before:
                return
            time.sleep(0.1)

    def _await_wave(self, expected: int, pids: list[int], timeout_s: float, attempts: int) -> None:
        tries = dict.fromkeys(pids, 1)
        while True:
            try:
                self.wait_for_nodes(expected, timeout_s, watch_pids=list(tries))
                return
            except NodeExited as exc:
                if exc.pid not in tries or not self.alive(self.cluster.state.head_pid):
                    raise                                   # the whole start is retried
                n = tries.pop(exc.pid)
                self.cluster.forget_worker(exc.pid)
                if n == attempts:
                    raise BackendError(f"{exc} (tried {attempts} times)") from None
                log.warning("%s; starting it again on fresh ports", exc)
                tries[self._spawn_worker(timeout_s)] = n + 1

    # ---- waits -----------------------------------------------------------------------------
    def wait_dashboard(self, timeout_s: float) -> None:
        """Wait until the head's dashboard answers; raise :class:`NodeExited` if the head exits."""
        state, name = self.cluster.state, self.cluster.name
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive(state.head_pid):
                raise NodeExited(f"the Ray head node (pid {state.head_pid}) of {name!r} exited "
                                 f"during start; last lines of its log:\n{self.log_tail(state.head_pid)}",
                                 state.head_pid)
            with contextlib.suppress(requests.RequestException):
                r = requests.get(f"{state.dashboard_url}/api/version", headers=self.cluster.auth_headers(),
                                 timeout=2)
                if r.status_code == 200:
                    return
            time.sleep(0.5)
        raise BackendError(f"the Ray dashboard of {name!r} did not answer within {timeout_s:.0f}s")

    def wait_for_nodes(self, n: int, timeout_s: float, watch_pids: Sequence[int] = ()) -> None:
        """Wait for ``n`` live nodes; raise :class:`NodeExited` as soon as the head or one of
        ``watch_pids`` exits."""
        state, name = self.cluster.state, self.cluster.name
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException, KeyError, ValueError):
                seen = self.cluster.alive_nodes()
                if seen >= n:
                    return
            for pid in (state.head_pid, *watch_pids):
                if pid and not self.alive(pid):
                    raise self._exited(pid)
            time.sleep(0.25)
        tails = "".join(f"; last lines of node {pid}'s log:\n{self.log_tail(pid)}" for pid in watch_pids)
        raise BackendError(f"only {seen} of {n} Ray nodes of {name!r} came up within {timeout_s:.0f}s{tails}")

    def wait_started(self, pids: Sequence[int], timeout_s: float) -> None:
        """Wait until the `ray start` of each node in ``pids`` has finished its own start-up.

        The GCS lists a node as alive before its `ray start` has seen it there (that process
        asks the GCS for its node again and again, for up to 30 s), and until then it does not
        exit on SIGTERM: a cluster stopped right after its start waited out the whole grace of
        its last worker node (a 3-worker cluster's stop measured 21.9 s, 20 s of it that wait).
        """
        deadline = time.monotonic() + timeout_s
        pending = [pid for pid in pids if pid]
        while True:
            for pid in list(pending):
                if not self.alive(pid):
                    raise self._exited(pid)
                if self.started(pid):
                    pending.remove(pid)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise BackendError(f"the `ray start` of Ray node(s) {pending} of {self.cluster.name!r} did not "
                                   f"finish within {timeout_s:.0f}s; last lines of its log:\n"
                                   f"{self.log_tail(pending[0])}")
            time.sleep(0.1)

    def _exited(self, pid: int) -> NodeExited:
        role = "head" if pid == self.cluster.state.head_pid else "worker"
        return NodeExited(f"the Ray {role} node (pid {pid}) of {self.cluster.name!r} exited before the "
                          f"cluster was up; last lines of its log:\n{self.log_tail(pid)}", pid)
