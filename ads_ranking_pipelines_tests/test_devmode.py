"""Development mode: the working tree's package, shipped with py_modules, is what Ray imports.

Checked with Ray's own packaging code (the functions its runtime_env agent uses to zip an
uploaded directory and to unpack a remote zip), then by importing from the unpacked copy, and
once for real: a job on a local Ray cluster imports the working tree's copy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from ray._private.runtime_env.packaging import create_package, unzip_package

from ads_ranking_pipelines.devmode import (
    PACKAGE,
    dev_runtime_env,
    dev_runtime_env_for_uri,
    package_zip,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A working tree whose package differs from the installed one."""
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / PACKAGE, copy / PACKAGE,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (copy / PACKAGE / "dev_marker.py").write_text("EDITED = 'from the working tree'\n")
    (copy / PACKAGE / "__pycache__").mkdir(exist_ok=True)
    (copy / PACKAGE / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    return copy


def _imports_from(path: Path) -> str:
    code = f"import {PACKAGE}.dev_marker as m, {PACKAGE}.config.pools as p; " \
           f"p.load_catalog(); print(m.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(path)}, cwd=path,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_remote_zip_unpacks_to_an_importable_package(tree: Path, tmp_path: Path) -> None:
    name, data = package_zip(tree)
    assert name.startswith(f"{PACKAGE}-dev-") and name.endswith(".zip")
    assert package_zip(tree) == (name, data)  # same sources, same bytes, same URI
    zip_path = tmp_path / name
    zip_path.write_bytes(data)
    names = zipfile.ZipFile(zip_path).namelist()
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert f"{name[:-4]}/{PACKAGE}/config/pools.yaml" in names  # package data travels too
    # what Ray's agent does with an s3:// / gs:// / https:// py_modules zip
    unpacked = tmp_path / "unpacked"
    unzip_package(str(zip_path), str(unpacked), remove_top_level_directory=True, unlink_zip=False)
    assert _imports_from(unpacked).startswith(str(unpacked / PACKAGE))


def test_a_change_in_the_tree_changes_the_uri(tree: Path) -> None:
    before, _ = package_zip(tree)
    (tree / PACKAGE / "dev_marker.py").write_text("EDITED = 'again'\n")
    assert package_zip(tree)[0] != before


def test_uploaded_directory_is_importable(tree: Path, tmp_path: Path) -> None:
    env = dev_runtime_env(tree)
    (module_dir,) = env["py_modules"]
    assert module_dir == str(tree / PACKAGE)
    # what Ray's client does with a local py_modules directory before uploading it
    pkg = tmp_path / "pkg.zip"
    create_package(module_dir, pkg, include_gitignore=False, include_parent_dir=True,
                   excludes=env["excludes"])
    assert not any("__pycache__" in n for n in zipfile.ZipFile(pkg).namelist())
    unpacked = tmp_path / "gcs"
    unzip_package(str(pkg), str(unpacked), remove_top_level_directory=False, unlink_zip=False)
    assert _imports_from(unpacked).startswith(str(unpacked / PACKAGE))


def test_bad_inputs_name_the_value(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no ads_ranking_pipelines/__init__.py"):
        dev_runtime_env(tmp_path)
    with pytest.raises(ValueError, match="s3://, gs:// or https://"):
        dev_runtime_env_for_uri("/home/me/pkg.zip")
    assert dev_runtime_env_for_uri("gs://b/x.zip") == {"py_modules": ["gs://b/x.zip"]}


@pytest.mark.ray
def test_a_ray_job_runs_the_working_tree_not_the_installed_package(tree: Path, ads_home: Path) -> None:
    """On a real local Ray cluster: Ray uploads the directory named by dev_runtime_env and the
    job's driver imports the working tree's copy (which has a module the installed one lacks)."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
    from ads_ranking_pipelines.config.cluster import ClusterRequest

    cluster = LocalRayCluster.start(ClusterRequest(name="devmode", workers=0), ads_home / "clusters")
    try:
        client = JobSubmissionClient(cluster.state.dashboard_url, headers=cluster.auth_headers())
        code = (f"import {PACKAGE}.dev_marker as m, {PACKAGE}.config.pools as p; "
                "p.load_catalog(); print('MARKER', m.EDITED, m.__file__)")
        job_id = client.submit_job(entrypoint=f"{sys.executable} -c \"{code}\"",
                                   runtime_env=dev_runtime_env(tree))
        deadline = time.monotonic() + 120
        while (status := client.get_job_status(job_id)) not in (
                JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
            assert time.monotonic() < deadline, client.get_job_logs(job_id)
            time.sleep(0.5)
        logs = client.get_job_logs(job_id)
        assert status == JobStatus.SUCCEEDED, logs
        (line,) = [l for l in logs.splitlines() if l.startswith("MARKER")]
        assert "from the working tree" in line
        assert str(ROOT) not in line and str(tree) not in line  # Ray's unpacked upload
    finally:
        cluster.stop()
