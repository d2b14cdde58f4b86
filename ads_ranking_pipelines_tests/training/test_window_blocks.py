"""The training window's blocks live on the driver's node, so losing a worker node loses none.

A lost block is rebuilt by re-running the task that made it, which needs a CPU the restarted
training workers hold: the resumed run then waits forever (seen: validation after a worker node
was killed, blocked on the one block ``split_at_indices`` had cut on that node).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys

import pytest

from ads_ranking_pipelines.backends.local import LocalRayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec

from .toy import write_days

pytestmark = pytest.mark.ray

# run as a Ray driver on the cluster's head node (Ray reads its auth settings at import, so the
# driver is its own process with the cluster's environment, as a Ray job's entrypoint is)
DRIVER = """
import json, os, sys
import ray
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.range_trainer import sliding_window

spec = TrainJobSpec.model_validate_json(sys.argv[1])
ray.init(log_to_driver=False)
window = sliding_window(spec.params, FeatureSpec.from_source(spec.source, spec.params.hash_buckets)).advance(spec)
print(json.dumps({"rows": window.rows, "valid_rows": window.rows - window.train_rows,
                  "preserve_order": ray.data.DataContext.get_current().execution_options.preserve_order}), flush=True)
sys.stdin.readline()                      # the worker node is gone now
out = {}
for name, sets in (("train", window.train), ("validation", window.valid)):
    refs = [ref for ds in sets for bundle in ds.iter_internal_ref_bundles() for ref in bundle.block_refs]
    try:
        out[name] = sum(b.num_rows for b in ray.get(refs, timeout=float(sys.argv[2])))
    except Exception as exc:
        out[name] = type(exc).__name__
print(json.dumps(out), flush=True)
os._exit(0)     # no interpreter shutdown: Ray Data's executors must not wake Ray again on the way out
"""


def test_a_lost_worker_node_loses_no_block_of_the_window(ads_home, tmp_path):
    """On the backend's local cluster the head, where the driver runs, has no CPU when there are
    worker nodes (as on KubeRay): every task runs on the worker node. Once that
    node is gone (and not replaced: no CPU anywhere, as when restarted training workers hold
    them all), every block of the window must still be readable at once."""
    days = [dt.date(2026, 11, 1), dt.date(2026, 11, 2)]
    write_days(str(tmp_path / "events"), days, rows_per_day=1500)
    params = TrainingParams(num_workers=1, hash_buckets=100, embedding_dim=8, validation_fraction=0.3)
    spec = TrainJobSpec(params=params, source=SourceConfig(uri=str(tmp_path / "events")), train_days=tuple(days),
                        model_version="v1", model_uri=str(tmp_path / "m"), ray_storage_uri=str(tmp_path / "r"),
                        run_name="w")
    backend = LocalRayBackend(ads_home / "clusters", replace_dead_workers=False, single_node=False)
    with backend.session(ClusterRequest(name="window", workers=1)) as session:
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, spec.model_dump_json(), "45"],
                                  env=session.cluster.env(), text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            sizes = json.loads(driver.stdout.readline() or "{}")
            (worker,) = session.cluster.live_worker_pids()
            os.killpg(worker, signal.SIGKILL)
            out, err = driver.communicate("go\n", timeout=240)
        finally:
            driver.kill()
    assert sizes == {"rows": 3000, "valid_rows": 900, "preserve_order": True}, err[-3000:] if driver.returncode else sizes
    assert json.loads(out.strip().splitlines()[-1]) == {"train": 2100, "validation": 900}, err[-3000:]
