"""DenseNormalization: batch statistics in training, their running average in eval mode, and
the same running statistics on every rank with one sync per epoch."""

import numpy as np
import pytest
import torch

from ads_ranking_pipelines.training.dense_norm import DenseNormalization


def test_dense_normalization_standardizes_and_keeps_the_average_batch_statistics():
    norm = DenseNormalization(2)
    rng = np.random.default_rng(0)
    batches = [torch.as_tensor(rng.normal([5.0, -1.0], [3.0, 0.1], size=(256, 2)), dtype=torch.float32)
               for _ in range(4)]
    for b in batches:
        out = norm(b)                                   # training mode: the batch's own statistics
        torch.testing.assert_close(out.mean(0), torch.zeros(2), atol=1e-4, rtol=0)
        torch.testing.assert_close(out.std(0), torch.ones(2), atol=1e-2, rtol=0)
    # running statistics: the plain average over batches (every batch weighs the same)
    torch.testing.assert_close(norm.running_mean, torch.stack([b.mean(0) for b in batches]).mean(0))
    torch.testing.assert_close(norm.running_var, torch.stack([b.var(0) for b in batches]).mean(0),
                               rtol=1e-4, atol=1e-8)
    assert int(norm.num_batches_tracked) == 4
    # a one-row training batch uses (and does not change) the running statistics
    one = torch.tensor([[5.0, -1.0]])
    before = norm.running_mean.clone()
    assert torch.isfinite(norm(one)).all()
    torch.testing.assert_close(norm.running_mean, before)
    norm.eval()
    expected = (batches[0] - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps)
    torch.testing.assert_close(norm(batches[0]), expected)


def _rank_batches(rank: int) -> list[torch.Tensor]:
    """Rank 0: three steps, rank 1: two (a shorter shard), of different sizes and scales."""
    rng = np.random.default_rng(10 + rank)
    sizes = (64, 48, 40) if rank == 0 else (32, 80)
    return [torch.as_tensor(rng.normal([2.0 + rank, -1.0], [1.0 + rank, 0.5], size=(n, 2)), dtype=torch.float32)
            for n in sizes]


def _dense_norm_without_per_step_collective(rank: int, world: int, out_dir: str) -> None:
    import pathlib
    import time

    done = pathlib.Path(out_dir, "rank0_forwards_done")
    norm = DenseNormalization(2)
    if rank == 1:    # rank 0's forwards must not wait for this rank (no collective in forward)
        deadline = time.monotonic() + 30
        while not done.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("rank 0's training forwards waited for rank 1")
            time.sleep(0.05)
    for b in _rank_batches(rank):
        out = norm(b)
        torch.testing.assert_close(out.mean(0), torch.zeros(2), atol=1e-4, rtol=0)
    if rank == 0:
        done.touch()
    assert int(norm.num_batches_tracked) == 0          # nothing folded before the sync
    norm.sync_running_stats()
    torch.save({"mean": norm.running_mean, "var": norm.running_var, "k": int(norm.num_batches_tracked)},
               f"{out_dir}/rank{rank}.pt")


@pytest.mark.slow
def test_dense_normalization_syncs_the_ranks_statistics_once_not_every_step(tmp_path):
    """Under torch.distributed the training forward runs no collective (rank 0 finishes its
    forwards before rank 1 starts); ``sync_running_stats`` then gives every rank the running
    statistics of the global batches, step by step: what a per-step all-reduce gave."""
    from .dist import run_on_gloo_group

    run_on_gloo_group(_dense_norm_without_per_step_collective, str(tmp_path))
    a, b = _rank_batches(0), _rank_batches(1)
    steps = [torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]]), a[2]]
    expected_mean = torch.stack([s.double().mean(0) for s in steps]).mean(0).float()
    expected_var = torch.stack([s.double().var(0) for s in steps]).mean(0).float()
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got["k"] == 3
        torch.testing.assert_close(got["mean"], expected_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got["var"], expected_var, rtol=1e-5, atol=1e-6)
