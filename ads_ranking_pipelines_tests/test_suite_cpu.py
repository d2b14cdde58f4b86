"""benchmarks/suite_cpu.py charges each process's CPU to the test under which it started."""

from __future__ import annotations

from benchmarks.suite_cpu import kind_of, tables


def _proc(pid: int, ppid: int, start: float, cpu: float, line: str) -> tuple[str, dict]:
    return f"{pid}-{start}", {"pid": pid, "ppid": ppid, "start": start, "cpu": cpu, "lines": [line]}


def test_a_process_is_charged_to_the_test_its_pytest_ancestor_ran_when_it_started():
    procs = dict([
        _proc(100, 1, 0.0, 5.0, "python -c import sys;exec(eval(sys.stdin.readline()))"),
        _proc(200, 100, 12.0, 2.0, "python .venv/bin/ray start --block --head"),     # test a's cluster
        _proc(300, 200, 13.0, 1.0, "ray/core/src/ray/raylet/raylet --node-ip-address=127.0.0.2"),
        _proc(400, 300, 25.0, 3.0, "ray::RayTrainWorker.train_fn"),                   # started in test b
        _proc(300, 100, 40.0, 7.0, "python -m ads_ranking_pipelines.cli.main pipeline run"),  # pid 300 again
        _proc(500, 1, 14.0, 4.0, "ray::IDLE"),                                        # parent unknown
    ])
    tests = [[100, "t/test_x.py::a", 10.0, 20.0], [100, "t/test_x.py::b", 20.0, 30.0],
             [100, "u/test_y.py::c", 30.0, 50.0]]
    by_test = tables(procs, tests)["by test"]
    assert by_test == {"(the pytest processes themselves)": 5.0, "t/test_x.py::a": 3.0, "t/test_x.py::b": 3.0,
                       "u/test_y.py::c": 7.0, "(unattributed)": 4.0}
    assert tables(procs, tests)["by test directory"]["t/"] == 6.0


def test_kinds_name_ray_workers_by_actor_and_the_node_s_processes():
    assert kind_of(["default_worker.py --raylet-name=x", "ray::TrainController.__init__()"]) == "ray worker: TrainController"
    assert kind_of(["ray::IDLE"]) == "ray worker: IDLE"
    assert kind_of(["ray:: (starting)"]) == "ray worker: IDLE"       # a title with no name yet
    assert kind_of(["/x/ray/core/src/ray/raylet/raylet --a"]) == "ray node: raylet"
    assert kind_of(["python /v/bin/ray start --block"]) == "ray node: ray start"
    assert kind_of(["python -m ads_ranking_pipelines.ray_jobs.run_driver"]) == "job driver (ray_jobs)"
    assert kind_of(["python -c import sys;exec(eval(sys.stdin.readline()))"]) == "pytest processes"
    assert kind_of(["python -c import ray; ray.init()"]) == "python -c (a test's script)"
