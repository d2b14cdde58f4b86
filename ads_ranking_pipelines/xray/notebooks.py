"""Jupyter servers attached to local Ray clusters.

A notebook is a real ``jupyter lab`` process of this environment, in its own process session,
bound to 127.0.0.1 on a free port with a random token (passed in ``JUPYTER_TOKEN``, never on
the command line), started with the cluster's environment (its Ray token *file*, its HOME,
``RAY_ADDRESS`` = the cluster's GCS address), so ``ray.init()`` in a notebook attaches to
that cluster. Notebook files live in ``<ADS_RANKING_HOME>/notebooks/<cluster>/`` and outlive it.

A 0600 state file per cluster records owner, PID, port and token, so another X-Ray process
finds it again. Stopping is by PID (process group), after checking that the PID still is our
notebook (its environment carries ``ADS_RANKING_NOTEBOOK=<cluster>:<id>``). A notebook also
mentions its cluster's temp dir, so deleting the cluster sweeps it up too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import requests

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.ports import free_ports

HOST = "127.0.0.1"
MARKER_ENV = "ADS_RANKING_NOTEBOOK"


class NotebookError(RuntimeError):
    pass


@dataclass
class NotebookState:
    cluster: str
    owner: str
    pid: int
    port: int
    token: str
    marker: str
    root_dir: str
    log_file: str
    started_at: str

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    @property
    def url(self) -> str:
        return f"{self.base_url}lab?token={self.token}"


def _environ_of(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Notebooks:
    def __init__(self, directory: str | Path, start_timeout_s: float = 90.0) -> None:
        self.directory = Path(directory)
        self.start_timeout_s = start_timeout_s
        self._procs: dict[int, subprocess.Popen] = {}

    def _state_file(self, cluster: str) -> Path:
        return self.directory / f"{cluster}.json"

    def get(self, cluster: str) -> NotebookState | None:
        """The cluster's notebook if its process is alive (a dead one's state is removed)."""
        path = self._state_file(cluster)
        try:
            state = NotebookState(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        if self.is_ours(state):
            return state
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None

    @staticmethod
    def is_ours(state: NotebookState) -> bool:
        return _alive(state.pid) and f"{MARKER_ENV}={state.marker}".encode() in _environ_of(state.pid)

    def all(self) -> dict[str, NotebookState]:
        if not self.directory.is_dir():
            return {}
        found = {p.stem: self.get(p.stem) for p in sorted(self.directory.glob("*.json"))}
        return {k: v for k, v in found.items() if v is not None}

    def start(self, cluster: LocalRayCluster, owner: str) -> NotebookState:
        if not cluster.alive():
            raise NotebookError(f"local Ray cluster {cluster.name!r} is not running")
        if (existing := self.get(cluster.name)) is not None:
            return existing
        (port,) = free_ports(1)
        root = self.directory / cluster.name
        root.mkdir(parents=True, exist_ok=True)
        state = NotebookState(
            cluster=cluster.name, owner=owner, pid=0, port=port, token=secrets.token_urlsafe(32),
            marker=f"{cluster.name}:{secrets.token_hex(8)}", root_dir=str(root),
            log_file=str(self.directory / f"{cluster.name}.log"),
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        env = cluster.env()
        env.update({"JUPYTER_TOKEN": state.token, MARKER_ENV: state.marker})
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.ip={HOST}",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--ServerApp.root_dir={root}"]
        if os.geteuid() == 0:  # containers and CI run as root; Jupyter refuses without this
            cmd.append("--allow-root")
        with open(state.log_file, "ab") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=root)
        self._procs[proc.pid] = proc
        state.pid = proc.pid
        self._save(state)
        try:
            self._wait_ready(state, proc)
        except BaseException:
            self.stop(cluster.name)
            raise
        return state

    def _save(self, state: NotebookState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._state_file(state.cluster)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(state), f)
        tmp.replace(path)

    def _wait_ready(self, state: NotebookState, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise NotebookError(f"Jupyter exited with code {proc.returncode}; see {state.log_file}")
            with contextlib.suppress(requests.RequestException):
                r = requests.get(f"{state.base_url}api/status",
                                 headers={"Authorization": f"token {state.token}"}, timeout=2)
                if r.status_code == 200:
                    return
            time.sleep(0.5)
        raise NotebookError(f"Jupyter did not answer within {self.start_timeout_s:.0f}s; "
                            f"see {state.log_file}")

    def stop(self, cluster: str, timeout_s: float = 10.0) -> bool:
        """Stop the cluster's notebook by PID (process group); False when none was running."""
        path = self._state_file(cluster)
        try:
            state = NotebookState(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return False
        stopped = False
        if self.is_ours(state):
            stopped = True
            for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 2.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(state.pid, sig)
                if self._reaped(state.pid, wait):
                    break
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return stopped

    def _reaped(self, pid: int, timeout_s: float) -> bool:
        proc = self._procs.get(pid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                self._procs.pop(pid, None)
                return True
            if proc is None and not _alive(pid):
                return True
            time.sleep(0.1)
        return False
