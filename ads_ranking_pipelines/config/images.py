"""Which Ray image a KubeRay cluster runs, and refusing ones that cannot run our jobs.

The pods run ``python -m ads_ranking_pipelines.ray_jobs.*``: the image must contain this
package, torch, TorchRec and fbgemm (the repository's ``Dockerfile``). A stock
``rayproject/ray`` image has none of them, so the driver would die with
``ModuleNotFoundError`` after the cluster started; :func:`image_problems` says so before
anything is created. Pure: the caller passes the image it chose (resource config ``image``,
the run's ``dagster/image`` tag, or ``ADS_RANKING_RAY_IMAGE``).
"""

from __future__ import annotations

import re

from ads_ranking_pipelines.config.validation import RequestError, RequestErrors

IMAGE_ENV = "ADS_RANKING_RAY_IMAGE"
DAGSTER_IMAGE_TAG = "dagster/image"
PROJECT_IMAGE_NAME = "ads-ranking-pipelines"

BUILD_HINT = (
    "build and push this project's image (README, 'Building the image'): "
    f"`make image IMAGE=REGISTRY/{PROJECT_IMAGE_NAME}:TAG` (docker build with the code version; "
    "VARIANT=gpu for CUDA), then `make push IMAGE=...`, and set it as the resource's `image`, "
    f"the run's `{DAGSTER_IMAGE_TAG}` tag or {IMAGE_ENV}"
)

# Images that are known not to contain this package: Ray's own, and common bases.
FOREIGN_REPOSITORIES = (
    "rayproject/ray", "rayproject/ray-ml", "rayproject/ray-llm", "anyscale/ray",
    "anyscale/ray-ml", "python", "ubuntu", "debian", "busybox", "alpine", "nvidia/cuda",
    "pytorch/pytorch", "nvcr.io/nvidia/pytorch",
)
_DOCKER_HUB = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")

# Docker image reference: [registry[:port]/]path[:tag][@sha256:digest].
_REFERENCE = re.compile(
    r"^(?P<repo>[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)


def repository(image: str) -> str:
    """``image`` without tag or digest, Docker Hub prefixes (``docker.io/``, ``library/``)
    removed: ``docker.io/rayproject/ray:2.60.0`` -> ``rayproject/ray``."""
    match = _REFERENCE.match(image)
    repo = match["repo"] if match else image.split("@")[0].rsplit(":", 1)[0]
    for prefix in _DOCKER_HUB:
        if repo.startswith(prefix):
            repo = repo[len(prefix):]
    return repo[len("library/"):] if repo.startswith("library/") else repo


def image_problems(image: str | None, *, field: str = "image") -> list[RequestError]:
    """Why ``image`` cannot run this project's Ray jobs on KubeRay (empty when it can).

    Refused: no image; not a valid image reference; a known foreign image (stock
    ``rayproject/ray``, a bare Python/CUDA/PyTorch base); an image without a tag or digest, or
    tagged ``latest`` (a daily retraining must run one known build: pin the tag ``make image``
    pushed, or a digest). Each problem names the field, the value and what is valid.
    """
    valid = f"an image built from this repository's Dockerfile, e.g. REGISTRY/{PROJECT_IMAGE_NAME}:TAG"
    if not image or not image.strip():
        return [RequestError(field, image, valid, f"no image given; {BUILD_HINT}")]
    match = _REFERENCE.match(image)
    if match is None:
        return [RequestError(field, image, valid, "not a container image reference "
                             "([registry/]path[:tag][@sha256:digest], lowercase path)")]
    repo = repository(image)
    if repo in FOREIGN_REPOSITORIES:
        return [RequestError(
            field, image, valid,
            f"{repo} does not contain ads_ranking_pipelines, torch or TorchRec, so the job's "
            f"driver would fail with ModuleNotFoundError; {BUILD_HINT}")]
    if match["digest"] is None and match["tag"] in (None, "latest"):
        return [RequestError(
            field, image, f"{repo}:<tag printed by make image> or {repo}@sha256:<digest>",
            "an untagged or :latest image changes under a running schedule; pin the build")]
    return []


def check_project_image(image: str | None, *, field: str = "image") -> str:
    """``image`` if :func:`image_problems` finds nothing, else :class:`RequestErrors`."""
    problems = image_problems(image, field=field)
    if problems or image is None:
        raise RequestErrors(problems)
    return image
