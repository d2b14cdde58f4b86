"""The KubeRay path refuses images that cannot run our jobs, saying how to build ours."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.images import (
    check_project_image,
    image_problems,
    repository,
)
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import RequestErrors, resolve_request

HOW_TO_BUILD = "make image IMAGE=REGISTRY/ads-ranking-pipelines:TAG"


@pytest.mark.parametrize("image", [
    "gcr.io/acme-ml/ads-ranking-pipelines:0.1.0-g250697e65656",
    "us-docker.pkg.dev/acme/ml/ads-ranking-pipelines:0.1.0-gpu",
    "localhost:5000/ads-ranking-pipelines:dev",
    "registry.example.com/team/ranker@sha256:" + "a" * 64,
])
def test_project_images_pass(image: str) -> None:
    assert image_problems(image) == []
    assert check_project_image(image) == image


@pytest.mark.parametrize("image,why", [
    (None, "no image given"),
    ("", "no image given"),
    # the ClusterRequest default today: no torch, no torchrec, not this package
    ("rayproject/ray:2.60.0-py311-cpu", "ModuleNotFoundError"),
    ("docker.io/rayproject/ray:2.60.0-py311-gpu", "ModuleNotFoundError"),
    ("rayproject/ray-ml:2.9.0-gpu", "ModuleNotFoundError"),
    ("python:3.11-slim", "ModuleNotFoundError"),
    ("nvcr.io/nvidia/pytorch:25.01-py3", "ModuleNotFoundError"),
])
def test_stock_or_missing_images_are_refused_with_how_to_build(image: str | None, why: str) -> None:
    (problem,) = image_problems(image)
    message = str(problem)
    assert problem.field == "image" and problem.value == image
    assert why in message and HOW_TO_BUILD in message and "docker build" in message
    assert "dagster/image" in message and "ADS_RANKING_RAY_IMAGE" in message
    with pytest.raises(RequestErrors):
        check_project_image(image)


@pytest.mark.parametrize("image,why", [
    ("gcr.io/acme/ads-ranking-pipelines", "untagged or :latest"),
    ("gcr.io/acme/ads-ranking-pipelines:latest", "untagged or :latest"),
    ("GCR.io/Acme/Ranker:1", "not a container image reference"),
    ("acme ranker:1", "not a container image reference"),
])
def test_unpinned_or_malformed_images_are_refused(image: str, why: str) -> None:
    (problem,) = image_problems(image, field="ray_cluster.image")
    assert problem.field == "ray_cluster.image" and why in str(problem)


def test_repository_strips_registry_defaults_tag_and_digest() -> None:
    assert repository("docker.io/library/python:3.11") == "python"
    assert repository("index.docker.io/rayproject/ray:2.60.0") == "rayproject/ray"
    assert repository("gcr.io/a/b@sha256:" + "0" * 64) == "gcr.io/a/b"


def test_image_problems_join_the_other_preflight_problems_in_one_error() -> None:
    request = ClusterRequest(name="r", gpu_pool="l4", gpus_per_worker=12,
                             image="rayproject/ray:2.60.0-py311-gpu")
    with pytest.raises(RequestErrors) as info:
        resolve_request(request, load_catalog(), extra_problems=image_problems(request.image))
    assert info.value.fields == ["gpus_per_worker", "image"]
    assert "2 problems" in str(info.value) and HOW_TO_BUILD in str(info.value)
