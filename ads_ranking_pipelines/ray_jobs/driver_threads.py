"""How many threads a job driver's numeric libraries use: the CPUs of the container it runs in.

A Ray job's driver is a child of Ray's job supervisor actor and inherits its environment; the
supervisor reserves no CPU, so Ray sets ``OMP_NUM_THREADS=1`` there and every driver would
start with one thread for torch, OpenBLAS and OpenMP - while the evaluation job does its work
(scoring, logistic regression, the bootstrap) in the driver, on the head.

So OpenMP (torch, XGBoost) gets the CPUs the driver's container may use: the affinity mask,
capped by a cgroup CPU quota (a KubeRay head pod's CPU limit), with ``OMP_WAIT_POLICY=PASSIVE``
so idle threads sleep; OpenBLAS stays on one thread. The work Ray schedules (training workers,
Ray Data tasks) is untouched: those processes get their thread count from their raylet. The
measurements behind these choices: ``benchmarks/DESIGN_MEASUREMENTS.md`` (driver threads).
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
