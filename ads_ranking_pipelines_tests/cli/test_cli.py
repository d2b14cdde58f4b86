"""``ads-ranking`` by subprocess: render, validation errors (exit 2, field and valid values
named), the pool catalog, and settings read per invocation."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from ads_ranking_pipelines_tests.cli.helpers import cli_env, ok, ok_json, run_cli
from ads_ranking_pipelines_tests.kuberay import crd_schema


def test_done_when_h100_render_is_a_strictly_valid_raycluster(tmp_path) -> None:
    """The issue's done-when, exactly."""
    crd_schema.require_crds()
    gpu_image = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0-gpu"
    result = run_cli("cluster", "render", "--gpu-pool", "h100-80gb", "--workers", "4",
                     "--gpus-per-worker", "8", "-o", "json",
                     env=cli_env(tmp_path, ADS_RANKING_RAY_IMAGE=gpu_image))
    manifest = json.loads(ok(result).stdout)
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] == "RayCluster"
    crd_schema.assert_valid(manifest, strict=True)
    (group,) = manifest["spec"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 4
    (worker,) = group["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert worker["image"] == gpu_image
    assert group["template"]["spec"]["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert manifest["metadata"]["labels"]["ads-ranking.io/owner"] == "tester"
    assert not (tmp_path / "ads_home").exists()  # render touches nothing


def test_render_yaml_and_rayjob(tmp_path) -> None:
    crd_schema.require_crds()
    env = cli_env(tmp_path)
    cluster = yaml.safe_load(ok(run_cli("cluster", "render", "--name", "ranker-small",
                                        "--workers", "1", env=env)).stdout)
    crd_schema.assert_valid(cluster)
    assert cluster["metadata"]["name"] == "ranker-small"
    job = yaml.safe_load(ok(run_cli(
        "cluster", "render", "--kind", "rayjob", "--gpu-pool", "l4", "--workers", "2",
        "--gpus-per-worker", "1", "--cpus-per-worker", "8", "--memory", "32Gi",
        "--entrypoint", "python -m ads_ranking_pipelines.ray_jobs.train", "--label", "exp=a1",
        env=env)).stdout)
    crd_schema.assert_valid(job)
    assert job["kind"] == "RayJob" and job["spec"]["jobId"] == job["metadata"]["name"]
    assert job["metadata"]["labels"]["exp"] == "a1"


@pytest.mark.parametrize("args,field,valid", [
    (["--gpu-pool", "nope"], "gpu_pool", "a100-80gb, cpu-standard, h100-80gb, l4, local"),
    (["--gpu-pool", "h100-80gb", "--workers", "9", "--gpus-per-worker", "8"], "workers", "0..8"),
    (["--gpu-pool", "h100-80gb", "--workers", "1"], "gpus_per_worker", "1..8"),
    (["--gpus-per-worker", "1"], "gpus_per_worker", "valid: 0"),
    (["--gpu-pool", "cpu-standard", "--cpus-per-worker", "64"], "cpus_per_worker", "<= 28.8"),
    (["--memory", "lots"], "memory_per_worker", "512Mi"),
    (["--workers", "-1"], "workers", ">= 0"),
    (["--name", "Bad_Name"], "name", "RFC 1123"),
    (["--label", "novalue"], "--label", "KEY=VALUE"),
    (["--kind", "pod"], "--kind", "raycluster, rayjob"),
    (["--kind", "rayjob"], "entrypoint", "a shell command"),
])
def test_invalid_input_exits_2_naming_field_and_valid_values(tmp_path, args, field, valid) -> None:
    result = run_cli("cluster", "render", *args, env=cli_env(tmp_path))
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert field in result.stderr and valid in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_every_invalid_option_is_reported_in_one_go(tmp_path) -> None:
    result = run_cli("cluster", "render", "--gpu-pool", "h100-80gb", "--workers", "9",
                     "--cpus-per-worker", "250", "--head-memory", "64Mi", env=cli_env(tmp_path))
    assert result.returncode == 2, result
    assert "4 problems in the request" in result.stderr, result.stderr
    for option in ("--workers (workers) = 9", "--gpus-per-worker (gpus_per_worker) = 0",
                   "--cpus-per-worker (cpus_per_worker) = 250.0",
                   "--head-memory (head_memory) = '64Mi'"):
        assert option in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_pools_list_json(tmp_path) -> None:
    data = ok_json(run_cli("pools", "list", "-o", "json", env=cli_env(tmp_path)))
    assert data["default_pool"] == "local" and data["provider"] == "gke"
    pools = {p["name"]: p for p in data["pools"]}
    assert (pools["h100-80gb"]["default_cpus_per_gpu"], pools["h100-80gb"]["default_memory_per_gpu"]
            ) == (23.0, "210Gi")
    assert pools["h100-80gb"]["node_selector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert set(pools) == {"local", "cpu-standard", "l4", "a100-80gb", "h100-80gb"}
    assert pools["h100-80gb"]["gpus_per_node"] == 8 and pools["h100-80gb"]["max_workers"] == 8
    assert pools["local"]["default"] is True and pools["local"]["gpu_type"] is None
    table = ok(run_cli("pools", "list", env=cli_env(tmp_path))).stdout
    assert "h100-80gb" in table and "nvidia-h100-80gb" in table and "local (default)" in table


def test_a_broken_catalog_is_invalid_input(tmp_path) -> None:
    bad = tmp_path / "pools.yaml"
    bad.write_text("pools: [{name: x}]\n")
    result = run_cli("pools", "list", env=cli_env(tmp_path, ADS_RANKING_POOL_CATALOG=str(bad)))
    assert result.returncode == 2 and "pool catalog" in result.stderr


def test_delete_without_yes_on_a_pipe_refuses(tmp_path) -> None:
    result = run_cli("cluster", "delete", "anything", env=cli_env(tmp_path))
    assert result.returncode == 2 and "--yes" in result.stderr


def test_unknown_backend_is_invalid_input(tmp_path) -> None:
    result = run_cli("cluster", "list", "--backend", "slurm", env=cli_env(tmp_path))
    assert result.returncode == 2 and "local, kuberay" in result.stderr
    result = run_cli("cluster", "list", env=cli_env(tmp_path, ADS_RANKING_BACKEND="slurm"))
    assert result.returncode == 2 and "ADS_RANKING_BACKEND" in result.stderr


def test_settings_are_read_per_invocation_not_at_import(tmp_path) -> None:
    """The app is imported once; each invocation reads the environment it is given."""
    from ads_ranking_pipelines.cli.main import app

    homes = []
    for name in ("one", "two"):
        home = tmp_path / name
        state = home / "clusters"
        state.mkdir(parents=True)
        (state / f"c-{name}.json").write_text(json.dumps({
            "name": f"c-{name}", "owner": "x", "request": {"name": f"c-{name}"},
            "temp_dir": str(tmp_path / "nowhere"), "gcs_address": "127.0.0.2:1",
            "dashboard_url": "http://127.0.0.1:9", "head_pid": 2**22 + 1, "worker_pids": [],
            "created_at": "2026-11-29T00:00:00+00:00"}))
        homes.append(home)
    runner = CliRunner()
    for home, name in zip(homes, ("one", "two")):
        result = runner.invoke(app, ["cluster", "list", "--backend", "local", "-o", "json"],
                               env={"ADS_RANKING_HOME": str(home)})
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)
        assert row["name"] == f"c-{name}" and row["status"] == "dead"


@pytest.mark.parametrize("image,reason", [
    ("", "no image given"),
    ("rayproject/ray:2.60.0-py311-gpu", "does not contain ads_ranking_pipelines"),
    ("registry.example.com/ads-ranking-pipelines:latest", "pin the build"),
])
def test_kuberay_render_refuses_images_that_cannot_run_our_jobs(tmp_path, image: str,
                                                                reason: str) -> None:
    """Issue 6 item 1: the stock Ray image has no torch/TorchRec/this package."""
    result = run_cli("cluster", "render", "--gpu-pool", "cpu-standard",
                     env=cli_env(tmp_path, ADS_RANKING_RAY_IMAGE=image))
    assert result.returncode == 2, result
    assert "--image (image)" in result.stderr and reason in result.stderr
    assert "make image IMAGE=REGISTRY/ads-ranking-pipelines:TAG" in result.stderr or image


def test_pipeline_run_on_kuberay_lists_every_preflight_problem_and_exits_2(tmp_path) -> None:
    """Issue 6 item 2: a local storage root, the stock image and an oversized request are
    reported together, each naming its setting, before any cluster is asked for."""
    env = cli_env(tmp_path, ADS_RANKING_BACKEND="kuberay",
                  ADS_RANKING_RAY_IMAGE="rayproject/ray:2.60.0-py311-cpu")
    result = run_cli("pipeline", "run", "--date", "2026-11-20", "--gpu-pool", "cpu-standard",
                     "--workers", "40", env=env)
    assert result.returncode == 2, result
    err = result.stderr
    assert "3 problems" in err
    assert "ADS_RANKING_HOME=" in err and "cannot see" in err
    assert "image='rayproject/ray:2.60.0-py311-cpu'" in err
    assert "workers=40" in err
    assert not (tmp_path / "ads_home" / "models").exists()


def test_bad_setting_names_the_variable(tmp_path) -> None:
    result = run_cli("cluster", "list", env=cli_env(tmp_path, ADS_RANKING_RAYJOB_DELETION="never"))
    assert result.returncode == 2
    assert "invalid ADS_RANKING_RAYJOB_DELETION='never'; valid: rules, shutdown" in result.stderr


def test_render_with_notebook_support(tmp_path) -> None:
    """``--notebook``: the RayCluster X-Ray's create form sends with *Notebook support*; strictly
    valid, naming the token Secret; refused with a RayJob."""
    crd_schema.require_crds()
    env = cli_env(tmp_path)
    cluster = yaml.safe_load(ok(run_cli("cluster", "render", "--name", "nb", "--workers", "1",
                                        "--notebook", env=env)).stdout)
    crd_schema.assert_valid(cluster)
    assert cluster["metadata"]["labels"]["ads-ranking.io/notebook"] == "enabled"
    volumes = cluster["spec"]["headGroupSpec"]["template"]["spec"]["volumes"]
    assert {"nb-notebook-token"} == {v["secret"]["secretName"] for v in volumes if "secret" in v}
    bad = run_cli("cluster", "render", "--kind", "rayjob", "--entrypoint", "true", "--notebook",
                  env=env)
    assert bad.returncode == 2 and "invalid --notebook with --kind='rayjob'" in bad.stderr
