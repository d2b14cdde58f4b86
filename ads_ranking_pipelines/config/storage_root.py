"""Whether the Ray pods of a KubeRay cluster can see the storage root.

Every Ray job reads the event window and writes model versions and scores under the storage
root (``ADS_RANKING_HOME``). On the local backend that is this machine's disk. On KubeRay the
jobs run in pods: a path on the machine that launched the run means nothing there. Valid
roots on KubeRay are object storage (``s3://``, ``gs://``), or an absolute path on a shared
volume (a ReadWriteMany PersistentVolumeClaim named by ``ADS_RANKING_SHARED_VOLUME_CLAIM``)
that the cluster template mounts at that same path in every Ray pod and that the Dagster run
pod mounts too.
"""

from __future__ import annotations

from ads_ranking_pipelines.config.validation import RequestError

OBJECT_STORES = ("s3://", "gs://")
HOME_SETTING = "ADS_RANKING_HOME"
CLAIM_SETTING = "ADS_RANKING_SHARED_VOLUME_CLAIM"
VALID = (f"s3://bucket/prefix, gs://bucket/prefix, or an absolute path on a shared volume "
         f"({CLAIM_SETTING}=<ReadWriteMany PVC> mounted at that path)")


def storage_problems(home: str, shared_volume_claim: str | None) -> list[RequestError]:
    """Why Ray pods on KubeRay could not use ``home`` (empty when they can)."""
    if home.startswith(OBJECT_STORES):
        return []
    path = home[len("file://"):] if home.startswith("file://") else home
    if "://" in path:
        return [RequestError(HOME_SETTING, home, VALID, "Ray pods cannot read or write that "
                             "scheme through the storage layer")]
    if not shared_volume_claim:
        return [RequestError(HOME_SETTING, home, VALID, "a local path is on this machine's "
                             "disk, which the Ray pods of a KubeRay cluster cannot see")]
    if not path.startswith("/"):
        return [RequestError(HOME_SETTING, home, VALID, "a shared volume is mounted at an "
                             "absolute path; a relative path depends on the working directory")]
    return []


def shared_volume_path(home: str) -> str:
    """The mount path of the shared volume for a path-like storage root."""
    path = home[len("file://"):] if home.startswith("file://") else home
    return path.rstrip("/") or "/"
