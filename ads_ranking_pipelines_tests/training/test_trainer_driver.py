"""The training driver around trainer.fit(): its progress pump and the Ray Train settings it applies."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.training.progress_box import ProgressBox
from ads_ranking_pipelines.training.progress_pump import ProgressPump

from ads_ranking_pipelines_tests.ray_script import ray_script_env, run_ray_script


class Records:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []
        self.logs: list[str] = []

    def log(self, message: str) -> None:
        self.logs.append(message)

    def metrics(self, kind: str, values: dict) -> None:
        self.seen.append((kind, values))


def test_leaving_the_pump_does_not_sleep_out_its_poll_and_takes_what_is_left():
    box = ProgressBox()
    reporter = Records()
    # an hour between polls: a pump that slept it out would still be running below
    pump = ProgressPump(box.take_progress, reporter, poll_s=3600.0)
    with pump:
        box.put_progress({"kind": "epoch", "epoch": 1, "loss": 0.5})
        box.put_progress({"kind": "progress", "step": 3})
    assert not pump.thread.is_alive()
    assert [k for k, _ in reporter.seen] == ["epoch", "progress"]
    assert pump.epochs == [{"epoch": 1, "loss": 0.5}]
    assert box.take_progress() == []


def test_a_pump_whose_box_died_ends_when_left():
    def dead() -> list:
        raise RuntimeError("the actor died")

    pump = ProgressPump(dead, Records(), poll_s=3600.0)
    with pump:
        pass
    assert not pump.thread.is_alive()


def test_the_box_keeps_records_in_order_hands_each_out_once_and_drops_past_its_limit():
    box = ProgressBox(max_records=3)
    assert [box.put_progress({"i": i}) for i in range(5)] == [True, True, True, False, False]
    assert box.dropped == 2
    assert box.take_progress(at_most=2) == [{"i": 0}, {"i": 1}]
    assert box.put_progress({"i": 5})
    assert box.take_progress() == [{"i": 2}, {"i": 5}] and box.take_progress() == []



def test_ray_train_checks_its_workers_often_during_fit_unless_the_user_said_otherwise():
    from ads_ranking_pipelines.training.trainer import RAY_TRAIN_ENV_DEFAULTS, ray_train_env

    key = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
    env: dict[str, str] = {}
    with ray_train_env(env):
        assert env == {key: RAY_TRAIN_ENV_DEFAULTS[key]} and float(env[key]) < 2.0   # Ray's default: 2 s
    assert env == {}
    mine = {key: "5"}
    with ray_train_env(mine):
        assert mine == {key: "5"}
    assert mine == {key: "5"}


def test_a_cpu_collective_that_waits_past_the_timeout_fails_the_attempt_instead_of_hanging():
    """CI: after a worker node was killed, the restarted gloo group hung for the 30 min default."""
    from ads_ranking_pipelines.training.trainer import GLOO_COLLECTIVE_TIMEOUT_S, torch_config

    cpu, gpu = torch_config(False), torch_config(True)
    assert (cpu.backend, cpu.timeout_s) == ("gloo", GLOO_COLLECTIVE_TIMEOUT_S) and GLOO_COLLECTIVE_TIMEOUT_S <= 300
    assert gpu.backend == "nccl"


# One in-process ``ray.init`` per pytest process (see test_inference): Ray runs in a child.
COORDINATOR = """
import tempfile
import ray
from ads_ranking_pipelines.training.trainer import start_train_coordinator
from ray.train.v2._internal.execution.scaling_policy.autoscaling_coordinator_client import (
    TrainAutoscalingCoordinatorClient,
)

ray.init(num_cpus=1, include_dashboard=False, _temp_dir=tempfile.mkdtemp(prefix="rc", dir="/tmp"))
start_train_coordinator()
mine = ray.get_actor("AutoscalingCoordinator", namespace="AutoscalingCoordinator")
ray.get(mine.__ray_ready__.remote(), timeout=120)
theirs = TrainAutoscalingCoordinatorClient("train-test")._autoscaling_coordinator
print("same actor" if theirs._actor_id == mine._actor_id else "another actor")
"""


@pytest.mark.slow
def test_the_driver_starts_the_coordinator_ray_train_s_controller_will_ask_for(tmp_path):
    """Ray Train's controller waits at most 5 s for this actor on its way to starting the worker
    group; started by the driver before the window read, it is up by then (see the function)."""
    out = run_ray_script(COORDINATOR, env=ray_script_env(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "same actor"
