"""A process's identity (``process_start``): what the watchdog, the GC, warm leases and dead-run
detection compare to tell a live controller from a gone one."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

from ads_ranking_pipelines.backends.processes import process_alive, process_start


def test_a_wall_clock_step_across_a_second_does_not_make_a_live_process_look_gone(monkeypatch):
    """/proc/stat's boot time is derived from the wall clock in whole seconds: an adjustment
    across a second boundary moves every process's create_time() by one second. Before, the
    identity was that create_time(), so every live controller looked gone at once."""
    start = process_start(os.getpid())
    booted = psutil.boot_time()
    monkeypatch.setattr(psutil._psplatform, "boot_time", lambda: booted + 1.0)   # the step
    assert psutil.Process(os.getpid()).create_time() != float(start)             # what moved
    assert process_start(os.getpid()) == start
    assert process_alive(os.getpid(), start)


def test_an_identity_recorded_by_an_earlier_version_still_names_its_process():
    epoch_form = f"{psutil.Process(os.getpid()).create_time():.2f}"     # what state files held before
    assert process_alive(os.getpid(), epoch_form)


def test_a_gone_process_or_another_start_is_not_alive():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(proc.pid)
    proc.wait()
    assert not process_alive(proc.pid, start)
    assert not process_alive(os.getpid(), f"{float(process_start(os.getpid())) + 0.01:.2f}")
