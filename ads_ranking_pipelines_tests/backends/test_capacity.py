"""Whether an existing cluster holds a run's workers: each worker must fit on one node."""

from __future__ import annotations

from ads_ranking_pipelines.backends.capacity import NodeSize, capacity_problem, worker_slots
from ads_ranking_pipelines.backends.kuberay.borrowed import worker_nodes
from ads_ranking_pipelines.config.cluster import ClusterRequest


def test_a_worker_fits_on_one_node_only() -> None:
    # 3 CPUs in total, but a 2-CPU worker fits on no 1.5-CPU node
    assert worker_slots([NodeSize(1.5), NodeSize(1.5)], 2.0, 0) == 0
    assert worker_slots([NodeSize(4.0, count=2)], 2.0, 0) == 4
    # GPUs bound it too
    assert worker_slots([NodeSize(96.0, 8.0)], 11.0, 4) == 2
    assert worker_slots([NodeSize(96.0, 0.0)], 11.0, 1) == 0


def test_the_problem_names_the_workers_and_what_fits() -> None:
    request = ClusterRequest(name="r", owner="o", workers=3, cpus_per_worker=2)
    problem = capacity_problem("cluster x", [NodeSize(4.0)], request)
    assert problem is not None and problem.field == "num_workers" and problem.value == 3
    assert "at most 2 worker(s) of 2 CPU on cluster x" in str(problem) and "1 x (4 CPU)" in str(problem)
    assert capacity_problem("cluster x", [NodeSize(4.0), NodeSize(2.0)], request) is None


def _group(cpu: str, replicas: int, max_replicas: int, gpus: str | None = None) -> dict:
    limits = {"cpu": cpu, **({"nvidia.com/gpu": gpus} if gpus else {})}
    return {"replicas": replicas, "maxReplicas": max_replicas,
            "template": {"spec": {"containers": [{"resources": {"limits": limits}}]}}}


def test_a_rayclusters_worker_pods() -> None:
    spec = {"workerGroupSpecs": [_group("1500m", 2, 4), _group("8", 1, 1, gpus="2")]}
    assert worker_nodes({"spec": spec}) == [NodeSize(1.5, 0.0, 2), NodeSize(8.0, 2.0, 1)]
    # with the autoscaler, what the groups may grow to
    assert worker_nodes({"spec": {**spec, "enableInTreeAutoscaling": True}})[0].count == 4
