"""A job driver's output stays whole lines when several threads write at once."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading

from ads_ranking_pipelines.ray_jobs.whole_lines import WholeLineStream

# one thread prints like Ray's worker-log thread (text, then "\n"), the main thread writes Pipes
# messages with dagster_pipes' own stdout channel (JSON, then "\n"), unbuffered as in a Ray job
DRIVER = textwrap.dedent("""
    import sys, threading
    from dagster_pipes import PipesStreamMessageWriterChannel
    from ads_ranking_pipelines.ray_jobs.whole_lines import whole_lines

    with whole_lines():
        channel = PipesStreamMessageWriterChannel(sys.stdout)
        def noise():
            for i in range(20000):
                print(f"(RayTrainWorker pid=1) [train] line {i}")
        t = threading.Thread(target=noise)
        t.start()
        for i in range(2000):
            channel.write_message({"__dagster_pipes_version": "0.1", "method": "report_custom_message",
                                   "params": {"payload": {"i": i}}})
            if i % 3 == 0:
                print("driver", i, file=sys.stderr)
        t.join()
        sys.stdout.write("unfinished")
""")


def test_threads_writing_at_once_leave_every_message_a_line_of_its_own():
    # without whole_lines: 243 of 2000 messages were glued to a printed line here
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = subprocess.run([sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    messages = [json.loads(line)["params"]["payload"]["i"] for line in lines if line.startswith("{")]
    printed = [line for line in lines if line.startswith("(RayTrainWorker")]
    driver = [line for line in lines if line.startswith("driver ")]
    assert messages == list(range(2000))
    assert printed == [f"(RayTrainWorker pid=1) [train] line {i}" for i in range(20000)]
    assert driver == [f"driver {i}" for i in range(0, 2000, 3)]
    assert lines[-1] == "unfinished" and len(lines) == 2000 + 20000 + len(driver) + 1


def test_each_threads_unfinished_line_waits_for_its_own_newline():
    inner = io.StringIO()
    stream = WholeLineStream(inner)
    stream.write("main: a")
    other = threading.Thread(target=lambda: stream.writelines(["other: b", "\n"]))
    other.start()
    other.join()
    stream.write("b\n")
    assert inner.getvalue() == "other: b\nmain: ab\n"
    stream.write("tail")
    stream.flush()                          # a flush shows this thread's unfinished line
    assert inner.getvalue().endswith("tail")
