"""Development mode: run the working tree's ``ads_ranking_pipelines`` on a project image.

An image built from the ``Dockerfile`` holds the dependencies (torch, TorchRec, Ray) and one
released copy of this package. To try a change without rebuilding it, ship the working tree's
package with the job as a Ray ``runtime_env`` ``py_modules`` entry: Ray puts it first on the
``PYTHONPATH`` of the driver and of every worker, so it shadows the copy in the image.
Dependencies still come from the image: a change to ``pyproject.toml`` needs a new image.

Two ways to ship it, depending on who submits the job:

* the submitting process sees the working tree (the local backend, a ``JobSubmissionClient``
  on the developer's machine): :func:`dev_runtime_env` names the package directory and Ray
  zips and uploads it to the cluster;
* KubeRay's submitter pod runs ``ray job submit`` inside the cluster and cannot see the
  developer's disk: :func:`package_zip` makes a content-addressed zip, the caller stores it
  where the cluster can read it (the ``s3://``/``gs://`` storage root), and
  :func:`dev_runtime_env_for_uri` names that URI.

Nothing here reads the environment or talks to a cluster.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path
from typing import Any

PACKAGE = "ads_ranking_pipelines"
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".pyo")
# Ray's runtime_env "excludes" (gitignore syntax) for the directory it uploads itself.
EXCLUDES = ["__pycache__/", "*.pyc", "*.pyo"]
# Fixed timestamp so that the same sources give the same bytes (and the same URI).
_ZIP_TIME = (2025, 1, 1, 0, 0, 0)


def package_dir(working_tree: str | os.PathLike[str]) -> Path:
    """The ``ads_ranking_pipelines`` package directory of ``working_tree`` (a checkout root);
    ValueError naming the path when it is not one."""
    root = Path(working_tree).resolve()
    pkg = root / PACKAGE
    if not (pkg / "__init__.py").is_file():
        raise ValueError(f"invalid working tree {str(root)!r}: no {PACKAGE}/__init__.py there; "
                         "valid: the root of an ads-ranking-pipelines checkout")
    return pkg


def _files(pkg: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        found.extend(Path(dirpath) / f for f in sorted(filenames) if not f.endswith(_SKIP_SUFFIXES))
    return found


def dev_runtime_env(working_tree: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``runtime_env`` fragment that runs ``working_tree``'s package, for a submitter
    that can read the working tree (Ray zips and uploads the directory itself)."""
    return {"py_modules": [str(package_dir(working_tree))], "excludes": list(EXCLUDES)}


def package_zip(working_tree: str | os.PathLike[str]) -> tuple[str, bytes]:
    """``(file name, zip bytes)`` of ``working_tree``'s package, laid out as Ray expects a
    remote ``py_modules`` zip (one top-level directory holding ``ads_ranking_pipelines/``).
    The same sources give the same bytes; the name carries their sha256 prefix."""
    pkg = package_dir(working_tree)
    digest = hashlib.sha256()
    entries = []
    for path in _files(pkg):
        rel = path.relative_to(pkg.parent).as_posix()
        data = path.read_bytes()
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        entries.append((rel, data))
    name = f"{PACKAGE}-dev-{digest.hexdigest()[:16]}"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in entries:
            info = zipfile.ZipInfo(f"{name}/{rel}", date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return f"{name}.zip", buf.getvalue()


def dev_runtime_env_for_uri(uri: str) -> dict[str, Any]:
    """The ``runtime_env`` fragment for a :func:`package_zip` stored at ``uri`` (``s3://``,
    ``gs://``, ``https://``), which every node downloads itself."""
    if "://" not in uri or uri.startswith("file://") or not uri.endswith(".zip"):
        raise ValueError(f"invalid py_modules uri {uri!r}: the cluster must download it; valid: "
                         "an s3://, gs:// or https:// URI of the zip from package_zip()")
    return {"py_modules": [uri]}
