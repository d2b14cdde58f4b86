"""TorchRec sharding on a real 2-process gloo group (CPU)."""

import json
import os

import numpy as np
import pytest
import torch

from ads_ranking_pipelines.training.plan_summary import format_plan, tables_per_rank
from ads_ranking_pipelines.training.trainer import load_unsharded
from ads_ranking_pipelines.training.checkpoint import TRAIN_STATE_FILE, read_train_state

from . import dist_workers
from .dist import run_on_gloo_group
from .toy import tiny_params, tiny_spec, toy_arrays

pytestmark = pytest.mark.slow  # real processes (README: Tests)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sharded"))
    run_on_gloo_group(dist_workers.train_save_and_reload, out)
    res = [json.load(open(os.path.join(out, f"result_r{r}.json"))) for r in range(2)]
    tensors = [torch.load(os.path.join(out, f"result_r{r}.pt")) for r in range(2)]
    return out, res, tensors


def test_training_steps_change_weights_and_reduce_loss(trained):
    _, res, _ = trained
    for r in res:
        losses = r["losses"]
        assert all(np.isfinite(losses))
        assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.05, losses
        # every parameter this rank holds moved (dense replicas and its own table shards)
        # (the id counts are buffers filled from the window, never learned)
        learned = {k: v for k, v in r["changed"].items() if ".id_counts." not in f".{k}"}
        assert learned and all(v > 0 for v in learned.values()), r["changed"]


def test_every_table_is_placed_and_both_ranks_agree(trained):
    _, res, _ = trained
    plan = res[0]["plan"]
    assert res[1]["plan"] == plan
    assert sorted(plan) == [f"t_s{i}" for i in range(4)]
    for info in plan.values():
        assert info["sharding_type"] in {"table_wise", "column_wise", "table_column_wise",
                                         "row_wise", "data_parallel"}
        assert set(info["ranks"]) <= {0, 1} and info["ranks"]
    assert "t_s0" in format_plan(plan)
    assert set(tables_per_rank(plan)) <= {0, 1}


def test_checkpoint_reloads_into_a_fresh_sharded_model(trained):
    _, _, tensors = trained
    for t in tensors:
        assert not torch.allclose(t["fresh"], t["logits"])
        torch.testing.assert_close(t["reloaded"], t["logits"])
        a, b = t["after_step"]
        torch.testing.assert_close(a, b)                   # optimizer state came back too
        assert t["step_loss"][0] == pytest.approx(t["step_loss"][1], rel=1e-6)


def test_checkpoint_loads_unsharded_without_a_process_group(trained):
    out, _, tensors = trained
    merged = os.path.join(out, "merged")
    files = sorted(os.listdir(merged))
    assert ".metadata" in files and "__0_0.distcp" in files and "__1_0.distcp" in files
    assert read_train_state(merged)["epochs_done"] == 2 and TRAIN_STATE_FILE in files
    model = load_unsharded(merged, tiny_params(), tiny_spec())
    # the serving form (plain tables, the ids themselves): what the sharded model computed
    arrays = toy_arrays(128, tiny_spec(), seed=99)
    with torch.no_grad():
        logits = model(torch.as_tensor(arrays["dense"]), torch.as_tensor(arrays["sparse"]))
    torch.testing.assert_close(logits, tensors[0]["logits"], rtol=1e-5, atol=1e-5)


def test_run_worker_resumes_at_the_next_epoch_with_uneven_shards(tmp_path):
    run_on_gloo_group(dist_workers.run_worker_then_resume, str(tmp_path))
    res = [json.load(open(tmp_path / f"resume_r{r}.json")) for r in range(2)]
    for r in res:
        assert r["first"]["start"] == 0 and r["first"]["done"] == 1
        assert r["second"]["start"] == 1 and r["second"]["done"] == 2
        assert [h["epoch"] for h in r["second"]["history"]] == [2]   # epoch 1 was not redone
        # rank 0 had 10 batches, rank 1 only 7: both stopped after 7 steps, no hang
        assert [h["steps"] for h in r["first"]["history"] + r["second"]["history"]] == [7, 7]
        assert r["second"]["step"] == 14                              # global step carried over
    h1, h2 = res[0]["first"]["history"][0], res[0]["second"]["history"][0]
    assert h1["samples"] == 2 * 7 * 64 and np.isfinite(h1["loss"]) and np.isfinite(h2["loss"])
    assert h2["loss"] < h1["loss"]
    # the lr decay is a function of the global step: each run ends its schedule at the floor
    assert h1["lr_multiplier"] == pytest.approx(0.1) and h2["lr_multiplier"] == pytest.approx(0.1)
    kinds = [p["kind"] for p in res[0]["progress"]]
    assert kinds.count("epoch") == 2 and "sharding_plan" in kinds
    starts = [p for p in res[0]["progress"] if p["kind"] == "started"]
    assert [(s["epochs_done"], s["resumed"]) for s in starts] == [(0, False), (1, True)]
    assert "progress" in kinds
    assert res[1]["progress"] == []                                   # only rank 0 reports
    assert read_train_state(str(tmp_path / "ckpt_epoch2"))["epochs_done"] == 2


def test_embedding_optimizer_settings_reach_fbgemm_and_ranks_share_norm_stats(tmp_path):
    run_on_gloo_group(dist_workers.embedding_optimizer_settings, str(tmp_path))
    res = [json.load(open(tmp_path / f"opt_r{r}.json")) for r in range(2)]
    for r in res:
        assert r["before"] and all(lr == pytest.approx(0.2) and eps == pytest.approx(0.03)
                                   for lr, eps in r["before"])
        assert all(lr == pytest.approx(0.05) for lr in r["after"])       # 0.2 * 0.25
        assert all(lr == pytest.approx(0.05 * 0.25) for lr in r["dense_lrs"])
    # ranks trained on different rows, yet hold the same (all-reduced) running statistics
    assert res[0]["norm"] and res[0]["norm"] == res[1]["norm"]
    assert res[0]["norm"]["dense_norm.num_batches_tracked"] == 3


@pytest.mark.parametrize("patience", [2, 0])
def test_training_stops_when_validation_stops_improving_and_keeps_the_best_epoch(tmp_path, patience):
    run_on_gloo_group(dist_workers.early_stopping, str(tmp_path), patience)
    res = [json.load(open(tmp_path / f"early_r{r}_p{patience}.json")) for r in range(2)]
    r0 = res[0]
    losses = [m["valid_logloss"] for m in r0["reports"]]
    assert all(m["selection_loss"] == pytest.approx(m["valid_logloss"] - m["valid_auc"]) for m in r0["reports"])
    assert all(0 < m["valid_s"] < 60 for m in r0["reports"])       # the validation pass's own seconds
    losses = [m["selection_loss"] for m in r0["reports"]]
    assert r0["best"] == 1 + int(np.argmin(losses))                 # the best epoch is recorded
    assert [m["is_best"] for m in r0["reports"]].count(True) >= 1
    assert r0["reports"][-1]["state"]["best_epoch"] == r0["best"]   # and checkpointed
    if patience:
        # noise labels: validation gets worse after a few epochs and training stops there
        assert r0["stopped"] and r0["done"] == r0["best"] + patience < 30
        assert r0["reports"][-1]["stopped_early"] and r0["reports"][-1]["state"]["stopped_early"]
    else:
        assert not r0["stopped"] and r0["done"] == 30                 # the whole budget
    for r in res:                                                     # both ranks agree
        assert (r["done"], r["best"]) == (r0["done"], r0["best"])
        assert r["epochs_started"] == list(range(1, r0["done"] + 1))  # callbacks, once per epoch


def test_profile_steps_records_where_each_epoch_went_and_the_threads_of_every_rank(tmp_path):
    for profile in (True, False):
        run_on_gloo_group(dist_workers.profiled_epochs, str(tmp_path), profile)
    history = json.load(open(tmp_path / "profile_True.json"))
    assert len(history) == 2
    for h in history:
        s = {k[len("profile_"):-2]: v for k, v in h.items()
             if k.startswith("profile_") and k.endswith("_s") and not k.endswith("_cpu_s")}
        assert set(s) == {"input_wait", "to_tensors", "batch_allreduce", "forward", "embedding_forward",
                          "backward", "grad_allreduce", "optimizer", "other"}
        # beside each phase's wall time, the process CPU time it took: some, and within the epoch's
        cpu = {k[len("profile_"):-len("_cpu_s")]: v for k, v in h.items() if k.endswith("_cpu_s")}
        assert set(cpu) == set(s) - {"other"} | {"epoch"}
        assert cpu["epoch"] > 0 and cpu["forward"] > 0 and cpu["backward"] > 0
        assert all(0 <= v <= cpu["epoch"] + 1e-3 for k, v in cpu.items())
        # every step ran each timed phase; the parts are inside their wholes; nothing exceeds the epoch
        assert all(s[k] > 0 for k in ("to_tensors", "batch_allreduce", "forward", "embedding_forward",
                                      "backward", "grad_allreduce", "optimizer"))
        assert s["embedding_forward"] <= s["forward"] and s["grad_allreduce"] <= s["backward"]
        top = ("input_wait", "to_tensors", "batch_allreduce", "forward", "backward", "optimizer")
        assert sum(s[k] for k in top) <= h["epoch_s"] + 1e-3
        threads = json.loads(h["profile_threads"])
        assert len(threads) == 2 and all(t["torch"] == 1 for t in threads)   # dist sets 1 thread
    # validation forwards of epoch 1 are not counted in epoch 2: both epochs ran the same steps
    assert history[0]["steps"] == history[1]["steps"] == 5
    off = json.load(open(tmp_path / "profile_False.json"))
    assert not any(k.startswith("profile_") for h in off for k in h)


def test_equal_shards_train_the_same_without_a_collective_per_step(tmp_path):
    """Ray Train's equal shards: with the step count known, the ranks take the same steps and reach
    the same losses as when they agree before every step, and spend nothing agreeing."""
    for shard_steps in (5, None):
        run_on_gloo_group(dist_workers.equal_shards, str(tmp_path), shard_steps)
    known, agreed = (json.load(open(tmp_path / f"equal_{s}.json")) for s in (5, None))
    assert [h["steps"] for h in known] == [h["steps"] for h in agreed] == [5, 5]
    assert [round(h["loss"], 6) for h in known] == [round(h["loss"], 6) for h in agreed]
    assert all(h["profile_batch_allreduce_s"] == 0.0 for h in known)
    assert all(h["profile_batch_allreduce_s"] > 0.0 for h in agreed)
