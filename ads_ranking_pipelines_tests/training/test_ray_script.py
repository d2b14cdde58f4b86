"""The helper that runs a test's own-Ray script tries again only when Ray's start timed out."""

from .ray_script import RAY_START_TIMED_OUT, ray_script_env, run_ray_script

# Fails the first time it runs in a folder (with the given message), succeeds after.
ONCE = """
import pathlib, sys
mark = pathlib.Path(sys.argv[1]) / "ran"
if not mark.exists():
    mark.touch()
    sys.exit(sys.argv[2])
print("ok")
"""


def test_a_ray_start_that_timed_out_runs_again_in_a_new_process(tmp_path):
    out = run_ray_script(ONCE, str(tmp_path), f"Exception: {RAY_START_TIMED_OUT}.", env=ray_script_env(tmp_path))
    assert (out.returncode, out.stdout.strip()) == (0, "ok")


def test_any_other_failure_is_the_result(tmp_path):
    out = run_ray_script(ONCE, str(tmp_path), "ValueError: bad spec", env=ray_script_env(tmp_path))
    assert out.returncode == 1 and "bad spec" in out.stderr
