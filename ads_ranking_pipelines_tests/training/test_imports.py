import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # real processes (README: Tests)

MODULES = ["model", "batches", "sharding", "checkpoint", "train_loop", "trainer", "export"]


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


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    return set(__import__("json").loads(out.stdout.strip().splitlines()[-1]))


def _of(modules: set[str], packages: tuple[str, ...]) -> set[str]:
    """The modules of ``packages`` among ``modules``."""
    return {m for m in modules if m.split(".")[0] in packages}


def test_scoring_a_saved_version_imports_no_torchrec(tmp_path):
    """Batch inference and evaluation load versions in fresh Ray workers and job drivers:
    torchrec costs ~2 s of import per process here and scoring on CPU does not need it; nor
    does it need ``torch._dynamo``, which initializing the tables on ``meta`` imported (loading
    a tiny version in a fresh process: 3.8 -> 2.4 CPU-s)."""
    from ads_ranking_pipelines.training.export import save_model_version
    from ads_ranking_pipelines.training.model import build_model

    from .toy import tiny_params, tiny_spec

    params, spec = tiny_params(), tiny_spec()
    save_model_version(str(tmp_path / "v"), build_model(params, spec), params, spec)
    modules = _modules_after(
        "import numpy as np\n"
        "from ads_ranking_pipelines.training.export import load_predictor\n"
        f"p = load_predictor({str(tmp_path / 'v')!r})\n"
        "s = p.predict(np.zeros((5, 3), np.float32), np.ones((5, 4), np.int64))\n"
        "assert s.shape == (5,)\n")
    assert "torch" in modules and not _of(modules, ("torchrec", "fbgemm_gpu"))
    assert "torch._dynamo" not in modules


def test_exporting_a_checkpoint_and_checking_a_warm_start_import_no_torchrec(tmp_path):
    """A training job's driver writes each version from its best checkpoint and checks the
    version it warm starts from against the model: both use the model's plain-tables build (the
    same state dict), so the driver never imports TorchRec. Before, each job's first export did
    (~2.5 CPU-s in every training job's driver, seen in a daily run's driver profile)."""
    import torch.distributed.checkpoint as dcp

    from ads_ranking_pipelines.training.export import save_model_version
    from ads_ranking_pipelines.training.model import build_model

    from .toy import tiny_params, tiny_spec

    params, spec = tiny_params(), tiny_spec()
    model = build_model(params, spec, plain_tables=True)
    dcp.save({"model": model.state_dict()}, checkpoint_id=str(tmp_path / "ckpt"), no_dist=True)
    save_model_version(str(tmp_path / "v"), model, params, spec)
    modules = _modules_after(
        "from ads_ranking_pipelines.training.trainer import load_unsharded\n"
        "from ads_ranking_pipelines.training.warm_start import weights_for\n"
        "from ads_ranking_pipelines_tests.training.toy import tiny_params, tiny_spec\n"
        f"m = load_unsharded({str(tmp_path / 'ckpt')!r}, tiny_params(), tiny_spec())\n"
        f"assert weights_for({str(tmp_path / 'v')!r}, tiny_params(), tiny_spec(), print) is not None\n")
    assert "torch" in modules and not _of(modules, ("torchrec", "fbgemm_gpu"))
    assert "torch._dynamo" not in modules


def test_the_inference_job_driver_imports_no_torch():
    """The inference job's driver only plans the Ray Data pipeline; its map tasks load torch."""
    modules = _modules_after("import ads_ranking_pipelines.ray_jobs.infer\n"
                             "from ads_ranking_pipelines.training.inference import score_day, score_chunks\n")
    assert not _of(modules, ("torch", "torchrec"))


def test_the_range_s_day_feed_actor_is_defined_where_torch_is_not_imported():
    """The feed's handle travels in the workers' config, which Ray Train also unpickles in its
    controller: the process that unpickles a handle imports the module of its class. Defined
    beside the Ray Train entry point, the feed actor and the controller each imported torch and
    TorchRec (~2.7 CPU-s apiece per training job, seen in their workers' import logs)."""
    from ads_ranking_pipelines.training import range_trainer

    modules = _modules_after(f"import {range_trainer.DayFeed.__module__}\n")
    assert not _of(modules, ("torch", "torchrec", "fbgemm_gpu"))


def test_a_training_job_s_driver_imports_no_torchrec():
    """The driver of a run's Ray job starts Ray Train (handing it the workers' entry points),
    prints the plan rank 0 reports, exports the best checkpoint and evaluates versions: none of
    it shards a model, and TorchRec's import cost ~2 CPU-s in every driver (measured here)."""
    modules = _modules_after(
        "import ads_ranking_pipelines.ray_jobs.run_driver, ads_ranking_pipelines.ray_jobs.train\n"
        "import ads_ranking_pipelines.ray_jobs.evaluate, ads_ranking_pipelines.ray_jobs.infer\n"
        "from ads_ranking_pipelines.training.range_trainer import train_range\n"
        "from ads_ranking_pipelines.training.evaluate import evaluate_version\n")
    assert "torch" in modules and not _of(modules, ("torchrec", "fbgemm_gpu"))
