"""The gates: verdicts from numbers, one check result per gate over the days of a run."""

from __future__ import annotations

from ads_ranking_pipelines.defs.checks import check_results, gate_verdicts
from ads_ranking_pipelines.defs.config import EvaluationConfig

GOOD = {"auc": 0.75, "baseline_auc": 0.74, "calibration": 1.02, "champion_auc": 0.748, "champion_version": "v1"}


def test_passing_day_and_tolerances():
    verdicts = gate_verdicts("2026-03-10", GOOD, EvaluationConfig())
    assert all(v.passed for v in verdicts)
    strict = EvaluationConfig(max_auc_drop_vs_champion=-0.01)        # must beat the champion by 0.01
    assert not next(v for v in gate_verdicts("2026-03-10", GOOD, strict) if v.check == "not_worse_than_champion").passed


def test_failed_gate_shows_its_numbers_in_the_description():
    worse = {**GOOD, "auc": 0.70}
    results = {r.check_name: r for r in check_results(
        gate_verdicts("2026-03-10", GOOD, EvaluationConfig()) + gate_verdicts("2026-03-11", worse, EvaluationConfig()))}
    champ = results["not_worse_than_champion"]
    assert not champ.passed
    assert "FAILED 2026-03-11: auc 0.7000 vs champion v1 0.7480 (lift -0.0480, allowed -0.005)" in champ.description
    assert champ.metadata["failed_days"].value == "2026-03-11"
    assert results["calibrated"].passed


def test_no_champion_passes_and_says_so():
    (champ,) = [v for v in gate_verdicts("d", {k: GOOD[k] for k in ("auc", "baseline_auc", "calibration")},
                                         EvaluationConfig()) if v.check == "not_worse_than_champion"]
    assert champ.passed and "no comparable champion" in champ.text


def test_a_version_records_its_cluster_request_and_on_kuberay_the_rendered_manifest(tmp_path):
    from ads_ranking_pipelines.config.training import TrainingParams
    from ads_ranking_pipelines.defs.assets import cluster_record
    from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
    from ads_ranking_pipelines.defs.local_ray_resource import LocalRayResource

    params = TrainingParams(gpu_pool="h100-80gb", gpus_per_worker=8, num_workers=2)
    kuberay = KubeRayResource(storage_home="gs://b/ads",
                              image="registry.example.com/ads-ranking-pipelines:0.1.0-gpu")
    record = cluster_record(kuberay, kuberay.cluster_request(params, "0123456789abcdef"))
    assert record["request"]["gpu_pool"] == "h100-80gb" and record["backend"] == "kuberay"
    assert record["manifest"]["kind"] == "RayCluster"
    local = LocalRayResource(state_dir=str(tmp_path))
    assert "manifest" not in cluster_record(local, local.cluster_request(TrainingParams(),
                                                                         "0123456789abcdef"))
