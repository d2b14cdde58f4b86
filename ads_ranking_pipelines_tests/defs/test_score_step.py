"""The scoring step sizes its job from the cluster it asked for."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import complete_request
from ads_ranking_pipelines.defs.score_step import scoring_concurrency


@pytest.mark.parametrize(("fields", "want"), [
    ({"workers": 2}, 2),                                   # local: a CPU pool, 1 CPU a worker
    ({"workers": 3, "cpus_per_worker": 2.5}, 7),           # whole tasks only
    ({"workers": 0}, 1),                                   # a head-only cluster still runs one
])
def test_scoring_concurrency_is_one_task_per_worker_cpu_asked_for(fields, want):
    assert scoring_concurrency(ClusterRequest(name="r", **fields)) == want


def test_scoring_concurrency_of_a_gpu_pool_counts_the_cpus_the_pool_gives_each_worker():
    catalog = load_catalog()
    pool = next(p for p in catalog if p.has_gpus)
    request = complete_request(ClusterRequest(name="r", gpu_pool=pool.name, workers=4, gpus_per_worker=1), pool)
    assert request.cpus_per_worker and request.cpus_per_worker > 1
    # an autoscaling cluster starts with 0 workers: Ray would see no worker CPU when the job starts
    assert scoring_concurrency(request.model_copy(update={"autoscaling": True})) == 4 * int(request.cpus_per_worker)
