"""Warm start: a sharded model initialised from an earlier version computes what that version computes."""

from __future__ import annotations

import pytest
import torch

from ads_ranking_pipelines.training import warm_start
from ads_ranking_pipelines.training.model import build_model

from .dist import run_on_gloo_group
from .toy import tiny_params, tiny_spec
from .warm_workers import sharded_model_matches_the_plain_one


@pytest.mark.slow
def test_sharded_workers_take_the_earlier_versions_weights(tmp_path):
    torch.manual_seed(7)
    model = build_model(tiny_params(), tiny_spec(), torch.device("cpu"))
    path = tmp_path / "weights.pt"
    torch.save(model.state_dict(), path)
    run_on_gloo_group(sharded_model_matches_the_plain_one, str(path))


def test_a_changed_architecture_is_named_not_loaded():
    state = build_model(tiny_params(), tiny_spec(), torch.device("cpu")).state_dict()
    same = build_model(tiny_params(), tiny_spec(), torch.device("meta"))
    assert warm_start.incompatibility(state, same) is None
    wider = build_model(tiny_params(embedding_dim=16), tiny_spec(), torch.device("meta"))
    why = warm_start.incompatibility(state, wider)
    assert why is not None and ("shape" in why or "differ" in why)


@pytest.mark.slow
def test_the_best_weights_kept_in_memory_start_the_next_days_sharded_model():
    from .warm_workers import kept_slices_warm_start_a_new_sharded_model

    run_on_gloo_group(kept_slices_warm_start_a_new_sharded_model)


def test_kept_weights_of_a_differently_shaped_model_are_refused_naming_the_entry():
    kept = warm_start.LocalWeights(torch.nn.Linear(3, 2))
    with pytest.raises(ValueError, match=r"weight slice .* was not kept"):
        kept.apply(torch.nn.Linear(4, 2))
