"""The train loop's pure parts: what early stopping minimizes, and how long it waits."""

import pytest

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.selection import selection_loss
from ads_ranking_pipelines.training.train_loop import LoopState, effective_patience


def test_selection_loss_follows_the_metric_and_falls_back_to_training_loss():
    m = {"loss": 0.5, "valid_logloss": 0.4, "valid_auc": 0.7}
    assert selection_loss(m, "logloss") == 0.4
    assert selection_loss(m, "auc") == -0.7
    assert selection_loss(m, "auc_logloss") == pytest.approx(0.4 - 0.7)
    assert selection_loss({"loss": 0.5, "valid_logloss": 0.4}, "auc") == 0.4    # one-class slice: no AUC
    assert selection_loss({"loss": 0.5}, "auc_logloss") == 0.5                  # no validation slice


@pytest.mark.parametrize("patience, min_steps, steps, expected", [
    (2, 32, 66, 2),      # a large window: the epoch patience
    (2, 32, 4, 8),       # 4 steps an epoch: wait 32 steps
    (3, 0, 4, 3),
    (0, 32, 4, 0),       # 0: early stopping off
])
def test_patience_is_at_least_min_steps(patience, min_steps, steps, expected):
    params = TrainingParams(early_stopping_patience=patience, early_stopping_min_steps=min_steps)
    assert effective_patience(params, steps) == expected


def test_loop_state_round_trips_through_a_checkpoint_dict():
    s = LoopState(epochs_done=3, global_step=30, best_epoch=2, best_loss=-0.3, epochs_since_best=1)
    assert LoopState.from_dict({**s.__dict__, "unrelated": 1}) == s
