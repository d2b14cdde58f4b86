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
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.ports import free_ports
from ads_ranking_pipelines.backends.processes import pid_alive, pids_mentioning, process_start
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


def object_store_bytes(request: ClusterRequest, role: str) -> int:
    """Object store of the head (``head_memory``), of a worker node (``memory_per_worker``,
    else the CPU-pool default) or of a single node (``single``: the head's and every worker's)."""
    worker = parse_memory(request.memory_per_worker or CPU_POOL_WORKER_MEMORY)
    memory = {"head": parse_memory(request.head_memory), "worker": worker,
              "single": parse_memory(request.head_memory) + request.workers * worker}[role]
    return max(OBJECT_STORE_MIN_BYTES, int(memory * OBJECT_STORE_FRACTION))


def _bin_dir() -> str:
    return str(Path(sys.executable).parent)


class NodeExited(BackendError):
    """A node process (``pid``) exited before it joined the cluster."""

    def __init__(self, message: str, pid: int = 0):
        super().__init__(message)
        self.pid = pid


# Worker nodes started together. Measured on 2 cores: the start of one worker node keeps about
# one core busy for ~6 s (its `ray start`, raylet and agents); started one at a time, 2 worker
# nodes took 12 s of a 24 s cluster start.
START_WAVE = 2


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


class LocalRayCluster:
    """Start, find, grow, heal and stop one local Ray cluster."""

    def __init__(self, state: ClusterState, state_dir: Path):
        self.state = state
        self.state_dir = state_dir
        self._procs: dict[int, subprocess.Popen] = {}
        self._logs: dict[int, Path] = {}
        # Every port given to this cluster's nodes (the head's GCS and dashboard ports are not
        # bound until its node is up, and a freed port is readily handed out again).
        self._ports: set[int] = {int(state.gcs_address.rsplit(":", 1)[1]),
                                 int(state.dashboard_url.rsplit(":", 1)[1])}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._pending_socket: tuple[int, int] | None = None     # (pid, raylet sockets before it)
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
        """Environment for every process of this cluster (and for clients that need the token)."""
        env = dict(os.environ)
        env.update({
            "HOME": str(Path(self.state.temp_dir) / "home"),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.token_file),
            "RAY_USAGE_STATS_ENABLED": "0",
            # Teardown is deliberate: no 30 s drain per node.
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
            "PATH": _bin_dir() + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONUNBUFFERED": "1",
        })
        env.pop("RAY_ADDRESS", None)
        env.pop("RAY_AUTH_TOKEN", None)
        return env

    @staticmethod
    def state_file(state_dir: Path, name: str) -> Path:
        return state_dir / f"{name}.json"

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
              session: bool = False, attempts: int = 2, single_node: bool = False) -> "LocalRayCluster":
        """Start the head, then the worker nodes (START_WAVE at a time), and wait until all have
        joined; with ``single_node`` one node holds every worker's CPUs (no worker nodes).

        On a loaded machine a Ray node can give up during its own start (the raylet allows its
        dashboard agent 15 s; `ray start` allows the raylet 30 s). A start whose node process
        exits is torn down completely and made again from scratch, up to ``attempts`` times.
        """
        state_dir = Path(state_dir)
        existing = cls.find(request.name, state_dir)
        if existing is not None and existing.alive():
            raise BackendError(f"a local Ray cluster named {request.name!r} is already running "
                               f"(dashboard {existing.state.dashboard_url}); delete it or pick another name")
        for attempt in range(1, attempts + 1):
            cluster = cls._new(request, state_dir, run_id=run_id, session=session, single_node=single_node)
            try:
                cluster._bring_up(request, start_timeout_s)
                return cluster
            except NodeExited as exc:
                cluster.stop(keep_logs=attempt == attempts)
                if attempt == attempts:
                    raise BackendError(f"{exc} (tried {attempts} times)") from None
                log.warning("%s; starting %s again from scratch", exc, request.name)
            except BaseException:
                cluster.stop(keep_logs=True)
                raise
        raise AssertionError("unreachable")

    @classmethod
    def _new(cls, request: ClusterRequest, state_dir: Path, *,
             run_id: str | None, session: bool, single_node: bool) -> "LocalRayCluster":
        # Short path: Ray's unix socket paths must stay under ~107 characters.
        temp_dir = tempfile.mkdtemp(prefix="arp-", dir="/tmp")
        os.makedirs(Path(temp_dir) / "home", exist_ok=True)
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
        )
        cluster = cls(state, state_dir)
        return cluster

    def _bring_up(self, request: ClusterRequest, timeout_s: float) -> None:
        gcs, dash = self.state.gcs_address.rsplit(":", 1)[1], self.state.dashboard_url.rsplit(":", 1)[1]
        single = self.state.single_node
        head = self._spawn([
            "--head", f"--port={gcs}", f"--dashboard-port={dash}", f"--dashboard-host={HOST}",
            "--include-dashboard=true", f"--num-cpus={self.head_cpus(request, single):g}",
            f"--temp-dir={self.state.temp_dir}",
        ], role="head", object_store=object_store_bytes(request, "single" if single else "head"))
        self.state.head_pid = head.pid
        self._save()
        self._wait_dashboard(timeout_s)
        if single:
            self.wait_for_nodes(1, timeout_s)
            return
        # The worker nodes start while the head's raylet registers, once it has its socket.
        self._pending_socket = (head.pid, 0)
        self.start_worker_nodes(request.workers, timeout_s)
        self.wait_for_nodes(1 + request.workers, timeout_s)

    @staticmethod
    def head_cpus(request: ClusterRequest, single_node: bool = False) -> float:
        """The head schedules no work when there are worker nodes (as on KubeRay: num-cpus 0);
        a single node has every worker's CPUs. A request for no workers: the head's own."""
        if request.workers == 0:
            return request.head_cpus
        return request.workers * request.worker_cpus() if single_node else 0.0

    def _spawn(self, node_args: list[str], role: str, object_store: int) -> subprocess.Popen:
        p1, p2, p3, p4, p5, p6, p7 = self._node_ports()
        cmd = [
            str(Path(_bin_dir()) / "ray"), "start", "--block", f"--node-ip-address={NODE_IP}",
            f"--node-manager-port={p1}", f"--object-manager-port={p2}",
            f"--dashboard-agent-listen-port={p3}", f"--dashboard-agent-grpc-port={p4}",
            f"--runtime-env-agent-port={p5}", f"--metrics-export-port={p6}",
            f"--object-store-memory={object_store}",
            "--num-gpus=0", "--disable-usage-stats",
            *node_args,
        ]
        if role == "head":
            cmd.append(f"--ray-client-server-port={p7}")
        logs = Path(self.state.temp_dir) / f"{role}-{len(self._procs)}.log"
        out = open(logs, "ab")
        proc = subprocess.Popen(cmd, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.state.temp_dir)
        out.close()
        self._procs[proc.pid] = proc
        self._logs[proc.pid] = logs
        return proc

    def _node_ports(self) -> list[int]:
        """Seven ports for one more node, none given to this cluster before."""
        ports = free_ports(7, avoid=self._ports)
        self._ports.update(ports)
        return ports

    def add_worker(self) -> int:
        req = self.request
        with self._lock:
            # All nodes share one session log dir here: only the head's log monitor may forward
            # worker output to drivers, or every line arrives once per node.
            proc = self._spawn([f"--address={self.state.gcs_address}", f"--num-cpus={req.worker_cpus():g}",
                                "--include-log-monitor=false"], role="worker",
                               object_store=object_store_bytes(req, "worker"))
            self.state.worker_pids.append(proc.pid)
            self._save()
        return proc.pid

    def _wait_dashboard(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self._proc_alive(self.state.head_pid):
                raise NodeExited(f"the Ray head node (pid {self.state.head_pid}) of {self.name!r} exited "
                                 f"during start; last lines of its log:\n{self.log_tail(self.state.head_pid)}",
                                 self.state.head_pid)
            with contextlib.suppress(requests.RequestException):
                r = requests.get(f"{self.state.dashboard_url}/api/version", headers=self.auth_headers(), timeout=2)
                if r.status_code == 200:
                    return
            time.sleep(0.5)
        raise BackendError(f"the Ray dashboard of {self.name!r} did not answer within {timeout_s:.0f}s")

    def alive_nodes(self) -> int:
        """Live nodes, as the GCS knows them (the state API asks the GCS on every call; the
        dashboard's ``/nodes?view=summary`` was measured to see a new node 1.3-1.9 s later)."""
        r = requests.get(f"{self.state.dashboard_url}/api/v0/nodes", params={"detail": "false", "limit": 10000},
                         headers=self.auth_headers(), timeout=5)
        r.raise_for_status()
        nodes = r.json()["data"]["result"]["result"]
        return sum(1 for n in nodes if n.get("state") == "ALIVE")

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
        pid = self.add_worker()
        self._pending_socket = (pid, before)
        return pid

    def _raylet_sockets(self) -> int:
        with contextlib.suppress(OSError):
            return sum(1 for p in (Path(self.state.temp_dir) / "session_latest" / "sockets").iterdir()
                       if p.name.startswith("raylet"))
        return 0

    def _await_raylet_socket(self, pid: int, before: int, timeout_s: float) -> None:
        """Wait until the node ``pid`` has bound its raylet socket (there are more than
        ``before``) or has exited. All nodes share the head's session directory, where Ray
        names a new node's sockets "the first name not taken" without creating the file: two
        nodes starting at once took the same socket and one never registered ("The current
        node timed out during startup")."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._proc_alive(pid):
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
                if exc.pid not in tries or not self._proc_alive(self.state.head_pid):
                    raise                                   # the whole start is retried
                n = tries.pop(exc.pid)
                with self._lock:
                    self.state.worker_pids.remove(exc.pid)
                    self._save()
                if n == attempts:
                    raise BackendError(f"{exc} (tried {attempts} times)") from None
                log.warning("%s; starting it again on fresh ports", exc)
                tries[self._spawn_worker(timeout_s)] = n + 1

    def log_tail(self, pid: int, lines: int = 15) -> str:
        path = self._logs.get(pid)
        try:
            text = path.read_text(errors="replace") if path else ""
        except OSError:
            text = ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_for_nodes(self, n: int, timeout_s: float, watch_pids: Sequence[int] = ()) -> None:
        """Wait for ``n`` live nodes; raise :class:`NodeExited` as soon as the head or one of
        ``watch_pids`` exits."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException, KeyError, ValueError):
                seen = self.alive_nodes()
                if seen >= n:
                    return
            for pid in (self.state.head_pid, *watch_pids):
                if pid and not self._proc_alive(pid):
                    role = "head" if pid == self.state.head_pid else "worker"
                    raise NodeExited(f"the Ray {role} node (pid {pid}) of {self.name!r} exited before the "
                                     f"cluster was up; last lines of its log:\n{self.log_tail(pid)}", pid)
            time.sleep(0.25)
        tails = "".join(f"; last lines of node {pid}'s log:\n{self.log_tail(pid)}" for pid in watch_pids)
        raise BackendError(f"only {seen} of {n} Ray nodes of {self.name!r} came up within {timeout_s:.0f}s{tails}")

    def alive(self) -> bool:
        return pid_alive(self.state.head_pid)

    def live_worker_pids(self) -> list[int]:
        return [p for p in self.state.worker_pids if self._proc_alive(p)]

    def _proc_alive(self, pid: int) -> bool:
        proc = self._procs.get(pid)
        if proc is not None:
            return proc.poll() is None
        return pid_alive(pid)

    # ---- healing ---------------------------------------------------------------------------
    def start_monitor(self, interval_s: float = 1.0) -> None:
        """Replace worker nodes that die, as KubeRay replaces a failed worker pod."""

        def loop() -> None:
            while not self._stopping.wait(interval_s):
                for pid in list(self.state.worker_pids):
                    if self._stopping.is_set():
                        return
                    if not self._proc_alive(pid):
                        with self._lock:
                            self.state.worker_pids.remove(pid)
                            self._save()
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
        proc = self._procs.get(pid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return
            if proc is None and not pid_alive(pid):
                return
            time.sleep(0.2)

    def stop(self, timeout_s: float = 20, keep_logs: bool = False, force: bool = False) -> None:
        """Stop this cluster's processes (by PID and process group), then remove its files.

        With ``keep_logs`` the node logs are kept under ``<state_dir>/<name>.logs/``. ``force``
        kills at once (SIGKILL, Ray's ``ray stop --force``) instead of SIGTERM and waiting up
        to ``timeout_s``: for a cluster whose work is over and whose files are removed next
        (Ray's own graceful exit of `ray start --block` took 2.3-3.6 s here).
        """
        self._stopping.set()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(timeout=5)
        pids = [*self.state.worker_pids, *([self.state.head_pid] if self.state.head_pid else [])]
        for pid in pids:
            self._kill_group(pid, signal.SIGKILL if force and not keep_logs else signal.SIGTERM)
        for pid in pids:
            self._reap(pid, 0 if force and not keep_logs else timeout_s)
            self._kill_group(pid, signal.SIGKILL)
            self._reap(pid, 2)
        # Anything that escaped its group but still names our temp dir is ours too.
        for _ in range(3):
            stray = pids_mentioning(self.state.temp_dir)
            if not stray:
                break
            for pid in stray:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
        for proc in self._procs.values():
            with contextlib.suppress(Exception):
                proc.wait(timeout=1)
        if keep_logs:
            dest = self.state_dir / f"{self.name}.logs"
            shutil.rmtree(dest, ignore_errors=True)
            with contextlib.suppress(OSError):
                shutil.copytree(self.state.temp_dir, dest, symlinks=True, ignore_dangling_symlinks=True,
                                ignore=shutil.ignore_patterns("sockets", "home", "auth_token", "*.sock",
                                                              "runtime_resources"))
            log.warning("Ray node logs of %s kept in %s", self.name, dest)
        shutil.rmtree(self.state.temp_dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.state_file(self.state_dir, self.name).unlink()

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
