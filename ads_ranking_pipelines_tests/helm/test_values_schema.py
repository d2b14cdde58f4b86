"""Bad values are refused when the chart renders, and the message names the value: by
``values.schema.json`` (JSON pointer of the value) or, for rules across values, by the
templates (the value's dotted path)."""

from __future__ import annotations

import pytest
from helm_python import HelmRenderError, HelmValuesError

from ads_ranking_pipelines.config.pools import GpuPool
from ads_ranking_pipelines_tests.helm.chart import chart, merge, render, value_set

BAD_VALUES = [
    # (id, override on the default set, text the error must contain)
    ("empty-tag", {"image": {"tag": ""}}, "at '/image/tag'"),
    ("latest-tag", {"image": {"tag": "latest"}}, "at '/image/tag'"),
    ("image-with-tag-in-repository", {"image": {"repository": "r.example.com/arp:1"}}, "at '/image/repository'"),
    ("pull-policy", {"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
    ("local-storage", {"storage": {"home": "./.ads_ranking"}}, "at '/storage/home'"),
    ("file-storage", {"storage": {"home": "file:///data"}}, "at '/storage/home'"),
    ("path-without-volume", {"storage": {"home": "/mnt/shared"}}, "at '/storage/sharedVolume"),
    ("ray-namespace", {"kuberay": {"namespace": "Ray_Jobs"}}, "at '/kuberay/namespace'"),
    ("auth-secret-name", {"kuberay": {"authSecretName": "not a name"}}, "at '/kuberay/authSecretName'"),
    ("pool-gpus", {"poolCatalog": {"default_pool": "x", "pools": [
        {"name": "x", "gpu_type": "nvidia-l4", "gpus_per_node": 99, "cpus_per_node": 8,
         "memory_per_node": "32Gi", "max_workers": 1}]}}, "at '/poolCatalog/pools/0/gpus_per_node'"),
    ("pool-memory", {"poolCatalog": {"default_pool": "x", "pools": [
        {"name": "x", "cpus_per_node": 8, "memory_per_node": "lots", "max_workers": 1}]}},
     "at '/poolCatalog/pools/0/memory_per_node'"),
    ("pool-gpu-without-type", {"poolCatalog": {"default_pool": "x", "pools": [
        {"name": "x", "gpus_per_node": 8, "cpus_per_node": 8, "memory_per_node": "32Gi",
         "max_workers": 1}]}}, "at '/poolCatalog/pools/0'"),
    ("pool-unknown-field", {"poolCatalog": {"default_pool": "x", "pools": [
        {"name": "x", "cpus_per_node": 8, "memory_per_node": "32Gi", "max_workers": 1,
         "gpus": 2}]}}, "'gpus'"),
    ("no-pools", {"poolCatalog": {"default_pool": "x", "pools": []}}, "at '/poolCatalog/pools'"),
    ("existing-sa-without-name", {"serviceAccount": {"create": False}}, "at '/serviceAccount/name'"),
    ("xray-without-token", {"xray": {"enabled": True}}, "at '/xray/tokenSecret/name'"),
    ("xray-privileged-port", {"xray": {"port": 80}}, "at '/xray/port'"),
    ("port", {"codeLocation": {"port": 0}}, "at '/codeLocation/port'"),
    ("privilege-escalation", {"codeLocation": {"securityContext": {"allowPrivilegeEscalation": True}}},
     "at '/codeLocation/securityContext/allowPrivilegeEscalation'"),
    ("root", {"runPods": {"podSecurityContext": {"runAsNonRoot": False}}},
     "at '/runPods/podSecurityContext/runAsNonRoot'"),
    ("host-path", {"codeLocation": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}},
     "at '/codeLocation/volumes/0'"),
    ("env-without-name", {"codeLocation": {"env": [{"value": "x"}]}}, "at '/codeLocation/env/0'"),
    ("resources-typo", {"runPods": {"resources": {"request": {"cpu": "1"}}}}, "'request'"),
    ("unknown-top-level", {"codeLocaton": {"port": 3030}}, "'codeLocaton'"),
]


@pytest.mark.parametrize("override,expected", [b[1:] for b in BAD_VALUES], ids=[b[0] for b in BAD_VALUES])
def test_schema_refuses_and_names_the_value(override: dict, expected: str) -> None:
    values = merge(value_set("default"), override)
    with pytest.raises(HelmValuesError) as info:
        render(values)
    assert expected in str(info.value), str(info.value)


TEMPLATE_REFUSALS = [
    ("default-pool-not-in-catalog", {"defaultPool": "h200"},
     'defaultPool "h200" is not a pool of poolCatalog.pools; valid: a100-80gb, cpu-standard, h100-80gb, l4, local'),
    ("catalog-default-not-in-catalog", {"poolCatalog": {"default_pool": "gone"}},
     'poolCatalog.default_pool "gone" is not a pool'),
    ("env-overrides-a-setting", {"codeLocation": {"env": [{"name": "AWS_REGION", "value": "x"},
                                                          {"name": "ADS_RANKING_HOME", "value": "/x"}]}},
     'codeLocation.env[1].name "ADS_RANKING_HOME" is set by the chart'),
    ("xray-env-overrides-the-token", {"xray": {"enabled": True, "tokenSecret": {"name": "t"},
                                               "env": [{"name": "ADS_RANKING_XRAY_TOKEN", "value": "x"}]}},
     'xray.env[0].name "ADS_RANKING_XRAY_TOKEN" is set by the chart'),
]


@pytest.mark.parametrize("override,expected", [t[1:] for t in TEMPLATE_REFUSALS],
                         ids=[t[0] for t in TEMPLATE_REFUSALS])
def test_templates_refuse_and_name_the_value(override: dict, expected: str) -> None:
    with pytest.raises(HelmRenderError) as info:
        render(merge(value_set("default"), override))
    assert expected in str(info.value), str(info.value)


def test_schema_pool_fields_match_the_catalog_model() -> None:
    """The chart's schema accepts exactly the fields config/pools.py GpuPool has (a new catalog
    field is neither refused by the chart nor silently dropped)."""
    pool_schema = chart().schema["$defs"]["pool"]
    assert set(pool_schema["properties"]) == set(GpuPool.model_fields)
    assert set(pool_schema["required"]) == {n for n, f in GpuPool.model_fields.items() if f.is_required()}
