"""Fixtures shared by the whole suite."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

import pytest

from ads_ranking_pipelines.events.importers import SHARED_DATASETS_ENV, shared_datasets_dir
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.fixtures import fake_apiserver  # noqa: F401 - for every test
from ads_ranking_pipelines_tests.ray_script import init_local_ray


def _weight(item) -> int:
    """0: a whole pipeline run, 1: other real processes, 2: the rest (``make test-fast``'s)."""
    if item.get_closest_marker("integration"):
        return 0
    return 1 if item.get_closest_marker("ray") or item.get_closest_marker("slow") else 2


def pytest_collection_modifyitems(config, items):
    """Modules with a whole pipeline run first, then those with other real processes: the long
    tests start early and the short ones fill the gaps, so under pytest-xdist (``make test``)
    no worker is left with a long test at the end. A module's tests stay together, in order.

    Tests marked ``needs_datasets`` read the public CTR samples (../shared/datasets, see its
    README). ``make test`` stops before pytest where they are absent (scripts/test_prereqs.sh);
    a direct pytest run skips those tests, each saying where the samples go."""
    rank: dict[str, int] = {}
    for item in items:
        rank[item.module.__name__] = min(rank.get(item.module.__name__, 2), _weight(item))
    items.sort(key=lambda item: rank[item.module.__name__])       # stable: the order within a rank
    if shared_datasets_dir() is not None:
        return
    skip = pytest.mark.skip(reason=f"public CTR samples not found: set {SHARED_DATASETS_ENV} or put the "
                                   "shared datasets folder at ../shared/datasets (see its README.md)")
    for item in items:
        if item.get_closest_marker("needs_datasets"):
            item.add_marker(skip)


@pytest.fixture
def ads_home(tmp_path, monkeypatch):
    """A private ADS_RANKING_HOME and DAGSTER_HOME; every Ray process we start inherits them."""
    home = tmp_path / "ads_home"
    dagster_home = tmp_path / "dagster_home"
    home.mkdir()
    dagster_home.mkdir()
    monkeypatch.setenv("ADS_RANKING_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("ADS_RANKING_BACKEND", raising=False)
    return home


@pytest.fixture
def environ(ads_home):
    return dict(os.environ)


# In-process Ray for the tests that drive Ray Train or a Ray job body directly (training, ray_jobs).
@functools.cache
def _process_ray_home() -> str:
    """One HOME for every in-process Ray of this test process. Ray 2.60's first local ``ray.init``
    writes its auth token to ``~/.ray/auth_token`` and keeps the token in the process: a later
    ``ray.init`` under another HOME does not write it again, and its GCS, finding no token file,
    dies at start (``ray.init`` then times out waiting for the GCS port file)."""
    home = tempfile.mkdtemp(prefix="ray-home-")
    atexit.register(shutil.rmtree, home, True)
    return home


@pytest.fixture
def ray_home():
    return _process_ray_home()


@pytest.fixture
def local_ray(ray_home):
    ray = pytest.importorskip("ray")
    # Ray's socket paths must stay short (AF_UNIX limit), so its temp dir is a short /tmp dir
    # owned by this test; HOME moves too so Ray's token file does not land in the real HOME.
    made: list[str] = []

    def ray_tmp() -> str:
        made.append(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
        # Ray's processes inherit this: scratch files of a worker killed mid-epoch (training's
        # checkpoint staging) are removed with the dir, as a local cluster's are
        os.makedirs(f"{made[-1]}/tmp")
        tempfile.gettempdir()        # this process keeps the tempdir it has (cached on first use)
        mp.setenv("TMPDIR", f"{made[-1]}/tmp")
        return made[-1]

    mp = pytest.MonkeyPatch()
    try:
        # undone even when ray.init fails: the variable makes later multi-node clusters refuse
        # their worker nodes (CI: a timed-out ray.init here failed every later local cluster)
        mp.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        mp.setenv("HOME", str(ray_home))
        mp.delenv("RAY_ADDRESS", raising=False)
        init_local_ray(ray, ray_tmp, num_cpus=3, include_dashboard=False, log_to_driver=True)
        yield ray
    finally:
        ray.shutdown()
        mp.undo()
        for d in made:
            shutil.rmtree(d, ignore_errors=True)
