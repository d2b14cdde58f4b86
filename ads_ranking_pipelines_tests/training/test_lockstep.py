"""Ranks stop together: a known step count needs no collective, and a shard that breaks it fails at once."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from ads_ranking_pipelines.training.lockstep import counted
from ads_ranking_pipelines.training.step_profile import StepProfile

from .toy import tiny_spec, toy_arrays


def _worker():
    spec = tiny_spec()
    return types.SimpleNamespace(rank=1, sparse_keys=list(spec.sparse_columns), device=torch.device("cpu"),
                                 profile=StepProfile(False)), spec


def _batches(n: int, spec, size: int = 16):
    data = toy_arrays(n * size, spec, seed=1)
    return [{k: v[i * size:(i + 1) * size] for k, v in data.items()} for i in range(n)]


def test_exactly_the_known_number_of_batches():
    w, spec = _worker()
    got = list(counted(w, iter(_batches(3, spec)), 3))
    assert [b.size for b in got] == [16, 16, 16]
    assert np.allclose(got[0].label.numpy(), _batches(3, spec)[0]["label"])


@pytest.mark.parametrize("have, want, words", [
    (2, 3, "rank 1: its shard ended after 2 batches, but every shard should have 3"),
    (4, 3, "rank 1: its shard has more than the 3 batches every shard should have"),
])
def test_a_shard_of_another_length_fails_naming_both_counts(have, want, words):
    w, spec = _worker()
    with pytest.raises(RuntimeError, match=words):
        list(counted(w, iter(_batches(have, spec)), want))


def test_an_empty_batch_counts_as_the_end():
    w, spec = _worker()
    batches = _batches(1, spec) + [{k: v[:0] for k, v in _batches(1, spec)[0].items()}]
    with pytest.raises(RuntimeError, match="ended after 1 batches"):
        list(counted(w, iter(batches), 2))
