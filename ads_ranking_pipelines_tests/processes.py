"""Helpers for tests that start real processes: wait until a run's processes are gone, what the
ones left are, stop a process group."""

from __future__ import annotations

import os
import signal
import subprocess

import psutil

from ads_ranking_pipelines.backends.processes import wait_for_exit


def wait_no_processes(marker: str, timeout_s: float = 15.0) -> list[int]:
    """Processes still naming ``marker`` after up to ``timeout_s`` (empty: all gone)."""
    return wait_for_exit(marker, timeout_s)


def titles(pids: list[int]) -> list[str]:
    """Each process's command line as one string (a Ray worker's is its title, ``ray::Class`` or
    ``ray::Class.method`` while in one); processes gone meanwhile are left out."""
    found = []
    for pid in pids:
        try:
            found.append(" ".join(psutil.Process(pid).cmdline()))
        except psutil.Error:
            pass
    return found


def stop_process_group(proc, grace_s: float = 30.0) -> None:
    """SIGTERM a child started with ``start_new_session=True`` and its group; SIGKILL if it stays."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
