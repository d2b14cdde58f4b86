"""Does an existing cluster fit a run? Its nodes' CPUs and GPUs against the run's workers.

A run on a cluster it did not create (``existing_cluster``) is checked before any job: every
worker of the request (``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs each) must fit on
one node (a Ray node, or a KubeRay worker pod), as Ray Train places them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.validation import RequestError


@dataclass(frozen=True)
class NodeSize:
    """What one node (or a group of ``count`` identical ones) offers."""

    cpus: float
    gpus: float = 0.0
    count: int = 1


def worker_slots(nodes: Iterable[NodeSize], cpus_per_worker: float, gpus_per_worker: int) -> int:
    """How many workers of that size the nodes can hold at once."""
    total = 0
    for node in nodes:
        fits = math.floor(node.cpus / cpus_per_worker + 1e-9) if cpus_per_worker > 0 else math.inf
        if gpus_per_worker:
            fits = min(fits, math.floor(node.gpus / gpus_per_worker + 1e-9))
        if fits == math.inf:
            return math.inf  # type: ignore[return-value]
        total += int(fits) * node.count
    return total


def describe(nodes: Iterable[NodeSize]) -> str:
    parts = [f"{n.count} x ({n.cpus:g} CPU" + (f", {n.gpus:g} GPU)" if n.gpus else ")")
             for n in nodes if n.count]
    return ", ".join(parts) or "no worker nodes"


def capacity_problem(where: str, nodes: list[NodeSize], request: ClusterRequest) -> RequestError | None:
    """A problem naming the run's workers and what ``where`` can hold, or None when they fit."""
    cpus = float(request.cpus_per_worker or 0.0)
    slots = worker_slots(nodes, cpus, request.gpus_per_worker)
    if slots >= request.workers:
        return None
    each = f"{cpus:g} CPU" + (f" + {request.gpus_per_worker} GPU" if request.gpus_per_worker else "")
    return RequestError(
        "num_workers", request.workers, f"at most {slots} worker(s) of {each} on {where}",
        f"{where} has {describe(nodes)}")
