"""The create form uses the CLI's validation and words; cost so far; filters."""

from __future__ import annotations

import datetime as dt

import pytest

from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.xray import forms
from ads_ranking_pipelines.xray.rows import ClusterRow, Filters

CATALOG = load_catalog()
BACKENDS = ("local", "kuberay")
NAMESPACES = ("ads-ranking", "research")
IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0"
SETTINGS = Settings.from_environ({"ADS_RANKING_HOME": "/tmp/xray-forms", "ADS_RANKING_RAY_IMAGE": IMAGE})


def parse(**values: str) -> forms.FormResult:
    merged = forms.form_values(values, "alice", CATALOG)
    return forms.parse_request(merged, CATALOG, BACKENDS, NAMESPACES, SETTINGS)


@pytest.mark.parametrize("values,field,text", [
    ({"gpus_per_worker": "99"}, "gpus_per_worker",
     "invalid --gpus-per-worker (gpus_per_worker) = 99: Input should be less than or equal to 16"),
    ({"backend": "kuberay", "gpu_pool": "l4", "gpus_per_worker": "9"}, "gpus_per_worker",
     "invalid --gpus-per-worker (gpus_per_worker) = 9"),
    ({"gpu_pool": "l4", "gpus_per_worker": "1"}, "gpu_pool",
     "invalid --gpu-pool (gpu_pool) = 'l4': the local backend has no GPUs"),
    ({"gpu_pool": "tpu"}, "gpu_pool", "invalid --gpu-pool (gpu_pool) = 'tpu': unknown pool"),
    ({"workers": "many"}, "workers", "invalid --workers (workers) = 'many'"),
    ({"memory_per_worker": "lots"}, "memory_per_worker", "invalid --memory (memory_per_worker)"),
    ({"name": "Bad_Name"}, "name", "invalid --name (name) = 'Bad_Name'"),
    ({"backend": "kuberay", "namespace": "kube-system"}, "namespace",
     "invalid --namespace (namespace) = 'kube-system'"),
    ({"backend": "slurm"}, "backend", "invalid --backend = 'slurm'"),
])
def test_errors_name_the_field_like_the_cli(values, field, text) -> None:
    result = parse(**values)
    assert not result.ok
    assert field in result.fields
    assert any(text in e for e in result.errors), result.errors


def test_a_good_request_gets_the_cli_defaults() -> None:
    result = parse(backend="kuberay", gpu_pool="l4", workers="2", gpus_per_worker="1",
                   cpus_per_worker="8", memory_per_worker="32Gi")
    assert result.ok, result.errors
    r = result.request
    assert (r.name, r.owner, r.namespace, r.image) == ("alice-l4", "alice", "ads-ranking", IMAGE)
    assert parse().request.gpu_pool == CATALOG.default_pool


def test_cost_so_far_is_age_times_workers_times_gpus() -> None:
    created = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    row = ClusterRow(name="c", backend="kuberay", owner="a", team="t", pool="h100-80gb",
                     gpu_type="nvidia-h100-80gb", workers_ready=3, workers_desired=4,
                     gpus_per_worker=8, status="ready", created_at=created)
    now = created + dt.timedelta(hours=2, minutes=30)
    assert row.worker_hours(now) == pytest.approx(10.0)
    assert row.gpu_hours(now) == pytest.approx(80.0)
    assert row.gpus == 32 and row.workers == "3/4" and row.age(now) == "2h"
    data = row.to_json(now)
    assert (data["worker_hours"], data["gpu_hours"], data["age"]) == (10.0, 80.0, "2h")


def test_filters() -> None:
    row = ClusterRow(name="c", backend="local", owner="Alice", team="t", pool="local",
                     gpu_type="none", workers_ready=1, workers_desired=1, gpus_per_worker=0,
                     status="running", created_at=None)
    assert Filters(owner="ali").keep(row) and not Filters(owner="bob").keep(row)
    assert Filters(pool="local", status="running").keep(row)
    assert not Filters(pool="l4").keep(row) and not Filters(status="dead").keep(row)
