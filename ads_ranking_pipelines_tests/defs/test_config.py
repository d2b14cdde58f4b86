"""Run config and resource validation: errors name the field, the value and what is valid."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.config import TrainingConfig, TrainingRunConfig
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.local_ray_resource import LocalRayResource
from ads_ranking_pipelines.defs.resources import EventSourceResource


def test_training_config_defaults_match_params():
    assert TrainingConfig().to_params() == TrainingParams()


@pytest.mark.parametrize("field, value, needle", [
    ("num_workers", 0, "num_workers=0"),
    ("dataset_window_days", 0, "; valid: [1, 90]"),
    ("embedding_dim", 10, "multiple of 4"),
    ("learning_rate", 0.0, "; valid: (0, 1.0]"),
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


IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0-gpu"


def kuberay(tmp_path, **fields) -> KubeRayResource:
    fields.setdefault("storage_home", "gs://bucket/ads")
    fields.setdefault("image", IMAGE)
    return KubeRayResource(**fields)


def test_cluster_request_validated_against_catalog(tmp_path):
    res = LocalRayResource(state_dir=str(tmp_path))
    req = res.cluster_request(TrainingParams(num_workers=3), "abcdef0123456789").request
    assert req.name == "arp-abcdef01" and req.workers == 3 and req.gpu_pool == "local"
    with pytest.raises(dg.Failure, match=r"gpu_pool='nope'.*valid: .*h100-80gb"):
        res.cluster_request(TrainingParams(gpu_pool="nope"), "abcdef01")
    kube = kuberay(tmp_path)
    with pytest.raises(dg.Failure, match="workers=20"):
        kube.cluster_request(TrainingParams(gpu_pool="l4", gpus_per_worker=1, num_workers=20), "abcdef01")
    with pytest.raises(dg.Failure, match="gpus_per_worker"):
        kube.cluster_request(TrainingParams(gpu_pool="cpu-standard", gpus_per_worker=1), "abcdef01")
    ok = kube.cluster_request(TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, num_workers=4), "abcdef01").request
    assert ok.gpus_per_worker == 8 and ok.gpu_pool == "h100-80gb"


def test_gpu_training_workers_get_the_pools_share_by_default(tmp_path):
    # Issue 6 item 8: 8 GPUs and 1 CPU starve the input pipeline.
    kube = kuberay(tmp_path)
    params = TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, num_workers=4)
    assert params.cpus_per_worker is None
    req = kube.cluster_request(params, "abcdef01").request
    assert (req.cpus_per_worker, req.memory_per_worker) == (184.0, "1680Gi")
    resolved = params.with_cluster_cpus(req.cpus_per_worker)
    assert resolved.cpus_per_worker == 184.0 and resolved.worker_cpus == 184.0
    # what the user sets wins, on the pod and in the Ray Train reservation
    pinned = TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, cpus_per_worker=32)
    assert kube.cluster_request(pinned, "abcdef01").request.cpus_per_worker == 32
    assert pinned.with_cluster_cpus(184.0).cpus_per_worker == 32
    local = LocalRayResource(state_dir=str(tmp_path)).cluster_request(TrainingParams(), "abcdef01").request
    assert (local.cpus_per_worker, local.memory_per_worker) == (1.0, "4Gi")


def test_local_backend_refuses_gpu_pools_naming_the_cpu_ones(tmp_path):
    with pytest.raises(dg.Failure) as info:
        LocalRayResource(state_dir=str(tmp_path)).cluster_request(
            TrainingParams(gpu_pool="l4", gpus_per_worker=1), "abcdef01")
    # one problem: the pool (the local backend runs no image, so no image rule applies)
    assert info.value.description == (
        "invalid gpu_pool='l4': the local backend has no GPUs; valid: a CPU pool (local, "
        "cpu-standard) with gpus_per_worker=0, or the kuberay backend")


def test_kuberay_preflight_reports_every_problem_at_once(tmp_path):
    """Issue 6 items 1 and 2: the stock Ray image, a storage root the pods cannot see and a
    bad size are refused together, each naming its setting, before anything is created."""
    kube = kuberay(tmp_path, image="rayproject/ray:2.60.0-py311-gpu", storage_home=str(tmp_path))
    with pytest.raises(dg.Failure) as info:
        kube.cluster_request(TrainingParams(gpu_pool="l4", gpus_per_worker=1, num_workers=20),
                             "abcdef01")
    text = info.value.description
    assert text.startswith("3 problems in the request:")
    assert "image='rayproject/ray:2.60.0-py311-gpu'" in text and "ModuleNotFoundError" in text
    assert "make image" in text  # says how to build ours
    assert f"ADS_RANKING_HOME='{tmp_path}'" in text and "s3://" in text and "gs://" in text
    assert "workers=20" in text


def test_kuberay_preflight_refuses_no_image(tmp_path):
    with pytest.raises(dg.Failure, match=r"image=None: no image given"):
        kuberay(tmp_path, image=None).cluster_request(TrainingParams(gpu_pool="cpu-standard"),
                                                      "abcdef01")


def test_kuberay_image_from_the_run_tag_then_the_setting(tmp_path):
    kube = kuberay(tmp_path, image=None, ray_image="reg.example.com/ads-ranking-pipelines:env")
    assert kube.request_fields()["image"] == "reg.example.com/ads-ranking-pipelines:env"
    kube._run_tags = {"dagster/image": "reg.example.com/ads-ranking-pipelines:run"}
    assert kube.request_fields()["image"] == "reg.example.com/ads-ranking-pipelines:run"
    pinned = kuberay(tmp_path, image="reg.example.com/ads-ranking-pipelines:cfg")
    pinned._run_tags = {"dagster/image": "reg.example.com/ads-ranking-pipelines:run"}
    assert pinned.request_fields()["image"] == "reg.example.com/ads-ranking-pipelines:cfg"


def test_kuberay_shared_volume_storage_is_mounted_in_the_ray_pods(tmp_path):
    kube = kuberay(tmp_path, storage_home="/mnt/ads-ranking", shared_volume_claim="ads-ranking-data")
    req = kube.cluster_request(TrainingParams(gpu_pool="cpu-standard"), "abcdef01").request
    assert (req.shared_volume_claim, req.shared_volume_path) == ("ads-ranking-data", "/mnt/ads-ranking")
    with pytest.raises(dg.Failure, match="relative path"):
        kuberay(tmp_path, storage_home="data/ads", shared_volume_claim="ads-ranking-data"
                ).cluster_request(TrainingParams(gpu_pool="cpu-standard"), "abcdef01")


def test_definitions_pick_the_resource_class_from_the_settings(tmp_path):
    from ads_ranking_pipelines.definitions import build_definitions

    local = build_definitions({"ADS_RANKING_HOME": str(tmp_path)})
    assert isinstance(local.resources["ray_cluster"], LocalRayResource)
    kube = build_definitions({"ADS_RANKING_HOME": "gs://b/p", "ADS_RANKING_BACKEND": "kuberay",
                              "ADS_RANKING_NAMESPACE": "ray-jobs",
                              "ADS_RANKING_RAY_IMAGE": IMAGE, "ADS_RANKING_KUBE_IN_CLUSTER": "true"})
    res = kube.resources["ray_cluster"]
    assert isinstance(res, KubeRayResource)
    assert (res.namespace, res.ray_image, res.in_cluster, res.storage_home) == (
        "ray-jobs", IMAGE, True, "gs://b/p")
    with pytest.raises(ValueError, match=r"ADS_RANKING_BACKEND='k8s'; valid: local, kuberay"):
        build_definitions({"ADS_RANKING_BACKEND": "k8s"})


def test_dev_mode_needs_object_storage(tmp_path):
    kube = kuberay(tmp_path, storage_home="/mnt/x", shared_volume_claim="data",
                   dev_working_tree=str(tmp_path))
    with pytest.raises(dg.Failure, match=r"ADS_RANKING_DEV_WORKING_TREE=.*s3:// or gs://"):
        kube.cluster_request(TrainingParams(gpu_pool="cpu-standard"), "abcdef01")


def test_the_launchpad_form_has_every_training_parameter_with_its_default_and_description():
    """The run config is generated from ``TrainingParams``: a parameter added there is in the form."""
    schema = TrainingConfig.to_fields_dict()
    assert set(TrainingParams.model_fields) | set(TrainingRunConfig.model_fields) == set(schema)
    for name, info in TrainingParams.model_fields.items():
        assert schema[name].description == info.description, name
    assert TrainingConfig(dense_arch=[8, 4]).to_params().dense_arch == (8, 4)
    assert TrainingConfig(early_stopping_metric="auc").to_params().early_stopping_metric == "auc"


@pytest.mark.parametrize("source", [
    SourceConfig(),
    SourceConfig(kind="criteo_tsv", uri="/data/train.txt", start_date=dt.date(2026, 11, 1), rows_per_day=2000,
                 features={"C1": {"hash_buckets": 100}}),
    SourceConfig(kind="parquet", uri="/events", label_column="y", dense_columns=("a",), sparse_columns=("b",),
                 completeness="none", synthetic={"rows_per_day": 500}),
])
def test_the_event_source_resource_is_the_source_config_in_its_own_shape(source):
    config = EventSourceResource.from_source(source)
    assert config == source.model_dump(mode="json", exclude_none=True)       # no field renamed or flattened
    assert EventSourceResource(**config).source_config("/home") == source.with_root("/home")


def test_a_file_kind_configured_in_the_launchpad_gets_its_fixed_columns():
    src = EventSourceResource(kind="avazu_csv", uri="/a.csv", start_date="2026-11-01",
                              rows_per_day=100).source_config("/home")
    assert src.label_column == "click" and "site_id" in src.sparse_columns
