"""A job driver's numeric libraries use the CPUs of its container, not the one thread Ray left it."""

from __future__ import annotations

import json
import sys
import textwrap
import time

import pytest

from ads_ranking_pipelines.backends.base import JobSpec, JobState
from ads_ranking_pipelines.backends.local import LocalRayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.ray_jobs.common import SPEC_ENV
from ads_ranking_pipelines.ray_jobs.driver_threads import cgroup_cpu_quota, container_cpus

# an entrypoint through run_entrypoint whose one "day" reports what torch and BLAS were given
DRIVER = textwrap.dedent("""
    import os
    from pydantic import BaseModel
    from ads_ranking_pipelines.ray_jobs.common import run_entrypoint

    class Spec(BaseModel):
        name: str

    def body(spec, reporter):
        import torch
        from threadpoolctl import threadpool_info
        import xgboost  # noqa: F401  (its OpenMP runtime too)
        pools = {(p["user_api"], p["num_threads"]) for p in threadpool_info()}
        yield {"torch": torch.get_num_threads(), "pools": sorted(pools), "wait": os.environ.get("OMP_WAIT_POLICY")}

    run_entrypoint(Spec, body)
""")


@pytest.mark.parametrize("files, quota", [
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "150000 100000\n"}, 1.5),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4.0),
    ({}, None),
])
def test_the_cgroup_quota_is_read_from_v2_or_v1_files(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_quota(tmp_path) == quota


def test_a_quota_caps_the_cpus_and_one_is_the_least(tmp_path):
    (tmp_path / "cpu.max").write_text("50000 100000\n")       # half a CPU
    assert container_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert container_cpus(tmp_path) >= 1


@pytest.mark.ray
def test_a_ray_job_driver_gets_the_container_cpus(ads_home, tmp_path):
    cpus = container_cpus()
    if cpus < 2:
        pytest.skip("one CPU here: the driver's single thread would be right")
    job = JobSpec(submission_id="driver-threads", entrypoint=f"{sys.executable} -c '{DRIVER}'",
                  env_vars={SPEC_ENV: json.dumps({"name": "x"})})
    with LocalRayBackend(tmp_path / "clusters").session(ClusterRequest(name="threads", workers=0)) as session:
        session.submit(job)
        while not (status := session.status(job.submission_id)).state.terminal:
            time.sleep(0.2)
        logs = list(session.logs(job.submission_id, follow=False))
    assert status.state == JobState.SUCCEEDED, "\n".join(logs)
    day = next(json.loads(line)["values"] for line in logs if '"kind": "day_result"' in line)
    # Ray's job supervisor leaves OMP_NUM_THREADS=1 in the driver's environment (measured);
    # without use_container_cpus torch and OpenMP ran on one thread
    assert day["torch"] == cpus and day["wait"] == "PASSIVE"
    assert sorted({tuple(p) for p in day["pools"]}) == [("blas", 1), ("openmp", cpus)], day["pools"]
