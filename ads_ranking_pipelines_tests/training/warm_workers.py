"""Rank functions of test_warm_start.py (importable by name for spawn)."""

from __future__ import annotations

import torch

from ads_ranking_pipelines.training import warm_start
from ads_ranking_pipelines.training.batches import make_batch
from ads_ranking_pipelines.training.model import build_model
from ads_ranking_pipelines.training.sharding import shard_model
from ads_ranking_pipelines.training.quiet import quiet_warnings

from .toy import tiny_params, tiny_spec, toy_arrays


def sharded_model_matches_the_plain_one(rank: int, world: int, weights_path: str) -> None:
    quiet_warnings()
    params, spec = tiny_params(), tiny_spec()
    state = torch.load(weights_path, weights_only=True)
    source = build_model(params, spec, torch.device("cpu"))
    source.load_state_dict(state)
    torch.manual_seed(100 + rank)                       # a different random init on every rank
    sm = shard_model(build_model(params, spec, "meta"), device=torch.device("cpu"),
                     learning_rate=params.learning_rate, batch_size=params.batch_size)
    b = make_batch(toy_arrays(128, spec, seed=5), spec.sparse_columns)
    sm.model.eval()
    source.eval()
    with torch.no_grad():
        before = sm.model(b.dense, b.sparse)
        expected = source(b.dense, b.sparse)
        assert not torch.allclose(before, expected, atol=1e-4), "the fresh model already matched"
        assert warm_start.apply(sm.model, state) == len(sm.model.state_dict())
        after = sm.model(b.dense, b.sparse)
    assert torch.allclose(after, expected, atol=1e-5), (after - expected).abs().max()


def kept_slices_warm_start_a_new_sharded_model(rank: int, world: int) -> None:
    """A range's next day: a new sharded model on the same ranks takes the kept slices in memory."""
    quiet_warnings()
    params, spec = tiny_params(), tiny_spec()

    def sharded(seed: int):
        torch.manual_seed(seed + rank)
        return shard_model(build_model(params, spec, "meta"), device=torch.device("cpu"),
                           learning_rate=params.learning_rate, batch_size=params.batch_size).model.eval()

    day1 = sharded(1)
    kept = warm_start.LocalWeights(day1)
    b = make_batch(toy_arrays(128, spec, seed=5), spec.sparse_columns)
    day2 = sharded(2)                                   # (sharding needs autograd on)
    other = warm_start.LocalWeights(day1)               # day 2 starts elsewhere: shifted weights
    for slices in other.slices.values():
        for t in slices.values():
            t.add_(0.3) if t.is_floating_point() else None
    other.apply(day2)
    with torch.no_grad():
        expected = day1(b.dense, b.sparse)
        assert not torch.allclose(day2(b.dense, b.sparse), expected, atol=1e-4), "the fresh model already matched"
        assert kept.apply(day2) == len(day2.state_dict())
        assert torch.allclose(day2(b.dense, b.sparse), expected, atol=1e-6)
