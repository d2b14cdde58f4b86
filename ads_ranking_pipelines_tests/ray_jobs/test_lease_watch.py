"""A Ray job's driver stops itself when the run's controller lease is no longer renewed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ads_ranking_pipelines.ray_jobs.lease_watch import EXIT_CONTROLLER_GONE
from ads_ranking_pipelines.storage.lease import LeaseSpec, LeaseWriter

pytestmark = pytest.mark.slow  # real processes (README: Tests)

# A job entrypoint whose body would run for ten minutes.
ENTRYPOINT = """
import time
from pydantic import BaseModel
from ads_ranking_pipelines.ray_jobs.common import run_entrypoint

class Spec(BaseModel):
    n: int

def body(spec, reporter):
    print("BODY STARTED", flush=True)
    time.sleep(600)
    yield {"day": "2026-01-01"}

run_entrypoint(Spec, body)
"""


def _start(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", ENTRYPOINT], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _env(spec: LeaseSpec) -> dict[str, str]:
    return {**os.environ, "ADS_RANKING_JOB_SPEC": json.dumps({"n": 1}), **spec.to_env()}


def test_a_driver_whose_controller_stopped_renewing_exits_within_the_timeout(tmp_path) -> None:
    spec = LeaseSpec(str(tmp_path / "lease.json"), timeout_s=2)
    writer = LeaseWriter(spec).__enter__()
    proc = _start(_env(spec))
    try:
        assert proc.stdout.readline().strip() == "BODY STARTED"
        time.sleep(4)                               # renewed meanwhile: still running
        assert proc.poll() is None
        writer._stop.set()                          # the controller dies: no more renewals, no release
        t0 = time.monotonic()
        out, _ = proc.communicate(timeout=30)
        waited = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        writer.release()
    assert proc.returncode == EXIT_CONTROLLER_GONE
    assert "the run's controller is gone" in out and str(spec.uri) in out
    assert waited < spec.timeout_s + 5


def test_a_driver_without_a_lease_is_not_watched(tmp_path) -> None:
    env = {**os.environ, "ADS_RANKING_JOB_SPEC": json.dumps({"n": 1})}
    proc = _start(env)
    try:
        assert proc.stdout.readline().strip() == "BODY STARTED"
        time.sleep(3)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
