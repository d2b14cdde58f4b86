"""How many threads a job driver's numeric libraries use: the CPUs of the container it runs in.

A Ray job's driver is a child of Ray's job supervisor actor, and inherits that actor's
environment. The supervisor reserves no CPU, so Ray set ``OMP_NUM_THREADS=1`` in it (an actor
"without num_cpus" gets one thread) and every driver started with one thread for torch,
OpenBLAS and OpenMP - measured here: ``OMP_NUM_THREADS`` is ``1`` in a job driver on a local
cluster whose machine has 2 cores. The evaluation job does its work in the driver (scoring,
logistic regression, the bootstrap), so it ran on one core of an otherwise idle head.

The driver's node is the head (Ray schedules the supervisor there), so OpenMP (torch, XGBoost)
gets the CPUs its container may use: the affinity mask, capped by a cgroup CPU quota (a KubeRay
head pod's CPU limit). Measured on 2 cores, XGBoost on 400k rows: 7.6-8.2 s on one thread,
5.6-5.8 s on two; with one other busy process, two spinning OpenMP threads were slower than one
(10.3-11.4 s vs 7.9-8.4 s), two with ``OMP_WAIT_POLICY=PASSIVE`` as fast as one (7.7-8.4 s)
and still 5.6-6.5 s when quiet: so idle OpenMP threads sleep. OpenBLAS stays on one thread:
more gave the driver's linear models nothing (3.0 s either way) and, spinning while the cores
were busy, made them 4-7x slower. The work Ray schedules (training workers, Ray Data tasks) is
untouched: those processes are started by their raylet with their own thread count.
"""

from __future__ import annotations

import math
import os
from collections.abc import MutableMapping
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_cpu_quota(root: Path = CGROUP_ROOT) -> float | None:
    """CPUs allowed by the cgroup's quota (v2 ``cpu.max`` or v1 ``cfs_quota_us``), None if unlimited."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us


def container_cpus(root: Path = CGROUP_ROOT) -> int:
    """CPUs this process may run on: its affinity mask, capped by the cgroup quota (at least 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpu_quota(root)
    if quota is not None:
        cpus = min(cpus, math.floor(quota))
    return max(1, cpus)


def use_container_cpus(environ: MutableMapping[str, str] | None = None) -> int:
    """OpenMP on :func:`container_cpus` threads that sleep when idle, OpenBLAS on one (see the
    module docstring), in ``environ`` (``os.environ``); a wait policy set by the user is kept.

    Must run before torch, numpy or XGBoost is imported (they read these once, when loaded).
    """
    env = os.environ if environ is None else environ
    n = container_cpus()
    env["OMP_NUM_THREADS"] = str(n)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env["OPENBLAS_NUM_THREADS"] = "1"
    return n
