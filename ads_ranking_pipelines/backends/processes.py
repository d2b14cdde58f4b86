"""Processes on this machine, by PID (psutil, so not only where ``/proc`` exists): alive or not
(a zombie counts as dead), which ones belong to a local cluster (they name its temp dir), and
an identity that a reused PID does not share."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:     # someone else's process: it exists
        return True


def _mentions(proc: psutil.Process, marker: str) -> bool:
    """Whether ``marker`` is in the process's command line or environment."""
    try:
        if any(marker in arg for arg in proc.cmdline()):
            return True
        return any(marker in key or marker in value for key, value in proc.environ().items())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return False


def pids_mentioning(marker: str) -> list[int]:
    """PIDs whose command line or environment mentions ``marker`` (our cluster's temp dir)."""
    me = os.getpid()
    return sorted(p.pid for p in psutil.process_iter() if p.pid != me and _mentions(p, marker))


def wait_for_exit(marker: str, timeout_s: float, interval_s: float = 0.5) -> list[int]:
    """Wait until no process mentions ``marker``; returns those still there after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    left = pids_mentioning(marker)
    while left and time.monotonic() < deadline:
        time.sleep(interval_s)
        left = pids_mentioning(marker)
    return left


def kill_mentioning(marker: str, rounds: int = 3, pause_s: float = 0.5) -> None:
    """SIGKILL every process that names ``marker``, up to ``rounds`` times ``pause_s`` apart (one
    starting as the others die is caught by the next round)."""
    for _ in range(rounds):
        stray = pids_mentioning(marker)
        if not stray:
            return
        for pid in stray:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(pause_s)


def process_start(pid: int) -> str:
    """An identity for the process ``pid`` that a reused PID does not share: when it started,
    in seconds since the machine booted, to the hundredth of a second; "" when it does not exist.

    Counted from boot, not from the epoch: psutil's ``create_time()`` is the boot time that
    ``/proc/stat`` reports (whole seconds, derived from the wall clock) plus the ticks since
    boot, so when the wall clock is adjusted across a second boundary every process's
    ``create_time()`` moves by one second, and a live controller would look gone (its watchdog
    or the GC then stops its cluster under it: the likely, unproven cause of a run's cluster that
    vanished during its start once)."""
    return _starts(pid)[0]


def _starts(pid: int) -> tuple[str, str]:
    """(boot-relative start, the epoch start that earlier versions recorded); "" each if gone."""
    try:
        created = psutil.Process(pid).create_time()
        return f"{created - psutil.boot_time():.2f}", f"{created:.2f}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "", ""


def process_alive(pid: int, start: str) -> bool:
    """Whether the process that had ``start`` (:func:`process_start`, or the epoch form earlier
    versions wrote into state files, leases and run tags) as ``pid`` still runs."""
    if pid <= 0:
        return False
    if start:
        return start in _starts(pid) and pid_alive(pid)
    return pid_alive(pid)
