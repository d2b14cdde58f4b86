import subprocess
import sys

MODULES = ["model", "batches", "sharding", "train_loop", "trainer", "export"]


def test_training_code_imports_no_dagster_and_no_orchestration_layers():
    code = (
        "import sys\n"
        + "".join(f"import ads_ranking_pipelines.training.{m}\n" for m in MODULES)
        + "bad = [m for m in sys.modules if m.split('.')[0] in ('dagster', 'dagster_pipes')"
          " or m.startswith(('ads_ranking_pipelines.backends', 'ads_ranking_pipelines.defs',"
          " 'ads_ranking_pipelines.cli'))]\n"
        + "print(bad)\nsys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
