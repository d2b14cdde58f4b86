"""Run config and resource validation: errors name the field, the value and what is valid."""

from __future__ import annotations

import dagster as dg
import pytest

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.config import TrainingConfig
from ads_ranking_pipelines.defs.resources import EventSourceResource, RayClusterResource


def test_training_config_defaults_match_params():
    assert TrainingConfig().to_params() == TrainingParams()


@pytest.mark.parametrize("field, value, needle", [
    ("num_workers", 0, "num_workers=0"),
    ("dataset_window_days", 0, "(valid: [1, 90])"),
    ("embedding_dim", 10, "multiple of 4"),
    ("learning_rate", 0.0, "(valid: (0, 1.0])"),
    ("model_name", "Bad Name", "model_name='Bad Name'"),
])
def test_training_config_errors(field, value, needle):
    with pytest.raises(dg.Failure) as info:
        TrainingConfig(**{field: value}).to_params()
    assert needle in info.value.description


def test_source_errors_name_the_field():
    with pytest.raises(dg.Failure, match="source.*uri is required"):
        EventSourceResource(kind="parquet").source_config("/tmp/x")
    with pytest.raises(dg.Failure, match="fixed columns"):
        EventSourceResource(label_column="click").source_config("/tmp/x")


def test_synthetic_source_defaults_under_home(tmp_path):
    src = EventSourceResource().source_config(str(tmp_path))
    assert src.uri == f"{tmp_path}/events/synthetic"


def test_cluster_request_validated_against_catalog(tmp_path):
    res = RayClusterResource(state_dir=str(tmp_path))
    req = res.cluster_request(TrainingParams(num_workers=3), "abcdef0123456789")
    assert req.name == "arp-abcdef01" and req.workers == 3 and req.gpu_pool == "local"
    with pytest.raises(dg.Failure, match=r"gpu_pool='nope'.*valid: .*h100-80gb"):
        res.cluster_request(TrainingParams(gpu_pool="nope"), "abcdef01")
    kube = RayClusterResource(state_dir=str(tmp_path), backend="kuberay")
    with pytest.raises(dg.Failure, match="workers=20"):
        kube.cluster_request(TrainingParams(gpu_pool="l4", gpus_per_worker=1, num_workers=20), "abcdef01")
    with pytest.raises(dg.Failure, match="gpus_per_worker"):
        kube.cluster_request(TrainingParams(gpu_pool="cpu-standard", gpus_per_worker=1), "abcdef01")
    ok = kube.cluster_request(TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, num_workers=4), "abcdef01")
    assert ok.gpus_per_worker == 8 and ok.gpu_pool == "h100-80gb"


def test_gpu_training_workers_get_the_pools_share_by_default(tmp_path):
    # Issue 6 item 8: 8 GPUs and 1 CPU starve the input pipeline.
    kube = RayClusterResource(state_dir=str(tmp_path), backend="kuberay")
    params = TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, num_workers=4)
    assert params.cpus_per_worker is None
    req = kube.cluster_request(params, "abcdef01")
    assert (req.cpus_per_worker, req.memory_per_worker) == (184.0, "1680Gi")
    resolved = params.with_cluster_cpus(req.cpus_per_worker)
    assert resolved.cpus_per_worker == 184.0 and resolved.worker_cpus == 184.0
    # what the user sets wins, on the pod and in the Ray Train reservation
    pinned = TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, cpus_per_worker=32)
    assert kube.cluster_request(pinned, "abcdef01").cpus_per_worker == 32
    assert pinned.with_cluster_cpus(184.0).cpus_per_worker == 32
    local = RayClusterResource(state_dir=str(tmp_path)).cluster_request(TrainingParams(), "abcdef01")
    assert (local.cpus_per_worker, local.memory_per_worker) == (1.0, "4Gi")
