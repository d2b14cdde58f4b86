"""``ads-ranking cluster render`` for a pool shared through Kueue: both Kueue labels and
``suspend: true``, strict-valid against the vendored KubeRay v1.7 CRDs."""

from __future__ import annotations

import json

import pytest

from ads_ranking_pipelines_tests.cli.helpers import cli_env, ok, run_cli
from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.cases import KUEUE_CATALOG

GPU_IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0-gpu"


@pytest.mark.parametrize("kind,priority", [("raycluster", "ads-ranking-interactive"),
                                           ("rayjob", "ads-ranking-manual")])
def test_render_for_a_kueue_pool_is_suspended_and_labelled(tmp_path, kind: str,
                                                           priority: str) -> None:
    crd_schema.require_crds()
    env = cli_env(tmp_path, ADS_RANKING_POOL_CATALOG=str(KUEUE_CATALOG),
                  ADS_RANKING_RAY_IMAGE=GPU_IMAGE)
    result = run_cli("cluster", "render", "--kind", kind, "--gpu-pool", "h100-80gb",
                     "--workers", "2", "--gpus-per-worker", "8", "--entrypoint", "python -V",
                     "-o", "json", env=env)
    manifest = json.loads(ok(result).stdout)
    crd_schema.assert_valid(manifest, strict=True)
    labels = manifest["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "ads-ranking-h100"
    assert labels["kueue.x-k8s.io/priority-class"] == priority
    assert manifest["spec"]["suspend"] is True
    if kind == "rayjob":
        assert manifest["spec"]["shutdownAfterJobFinishes"] is True
        assert "deletionStrategy" not in manifest["spec"]
        assert "preRunningDeadlineSeconds" not in manifest["spec"]


def test_priority_class_override_and_its_refusal_on_a_pool_without_kueue(tmp_path) -> None:
    env = cli_env(tmp_path, ADS_RANKING_POOL_CATALOG=str(KUEUE_CATALOG),
                  ADS_RANKING_RAY_IMAGE=GPU_IMAGE)
    args = ("cluster", "render", "--workers", "1", "--gpus-per-worker", "8", "-o", "json",
            "--priority-class", "urgent")
    manifest = json.loads(ok(run_cli(*args, "--gpu-pool", "h100-80gb", env=env)).stdout)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "urgent"
    refused = run_cli(*args, "--gpu-pool", "l4", env=env)
    assert refused.returncode == 2
    assert "priority_class" in refused.stderr and "'urgent'" in refused.stderr
    assert "kueue" in refused.stderr
