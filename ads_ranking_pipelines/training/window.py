"""The training window as Ray Datasets this driver owns: read, transformed, held out, shuffled.

The job driver reads the window's days and transforms them itself, then hands the rows to Ray
as blocks it puts in its own node's object store: one Ray Dataset per training worker (rank),
each the same number of rows, which that worker iterates every epoch.

* **Why in the driver.** On a fresh cluster, as every daily run has, Ray Data's read,
  transform and shuffle start new worker processes for each operator's first tasks; one
  process reading and transforming the same rows was an order of magnitude faster
  (``benchmarks/DESIGN_MEASUREMENTS.md``, training window).
* **Why the driver's node.** Blocks left on a worker node are lost with it, and Ray rebuilds
  them by re-running their tasks, which need a CPU the restarted training workers hold: the
  resumed run waited forever (``test_window_blocks.py``). Blocks the driver puts live on its
  node as long as the job does. (Before, read tasks materialized the window on the worker
  nodes and it was then copied to the driver's node; the driver held it all either way.)
* **Why one dataset per rank.** Ray Train's default, one dataset it splits with
  ``streaming_split(equal=True)`` every epoch, runs a split coordinator actor per dataset and
  ``_split_single_block`` tasks (new worker processes) to cut blocks for equal shards, each
  epoch again (about a tenth of a daily run's CPU time: ``benchmarks/DESIGN_MEASUREMENTS.md``).
  Splitting once here gives the same rows per rank (the equal
  split's ``rows // workers``, the remainder dropped as it did) and a rank reads its own
  blocks with no actor or task in between.

Rows stay in time order (days in order, rows in file order) until the validation slice, the
last ``validation_fraction`` of them, is cut; the training rows are then permuted once with the
run's seed (a batch of one hour's rows would teach the model, and the batch statistics of its
dense normalization, that hour only) and dealt out in contiguous equal parts, rank 0 first;
epochs reshuffle locally (``shuffle_buffer``). The validation slice is dealt out the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training.features import FeatureSpec

# Rows per block handed to Ray: small enough that the first batches arrive early, large
# enough that a block's overhead does not count.
BLOCK_ROWS = 65_536


@dataclass
class Window:
    train: list[Any]                 # one Ray Dataset per rank, equal rows, shuffled
    valid: list[Any] | None          # one per rank of the time-last slice, or None
    rows: int
    train_rows: int                  # rows of the training slice (before the equal split)
    id_counts: dict[str, np.ndarray] | None = None   # per sparse column, of the training rows


Arrays = dict[str, np.ndarray]


def hold_out(arrays: Arrays, fraction: float) -> tuple[Arrays, Arrays | None]:
    """(train, validation): validation is the last ``fraction`` of the rows (None if empty)."""
    rows = len(arrays["label"])
    n_valid = int(round(rows * fraction))
    if fraction <= 0 or n_valid < 1 or rows - n_valid < 1:
        return arrays, None
    cut = rows - n_valid
    return {k: v[:cut] for k, v in arrays.items()}, {k: v[cut:] for k, v in arrays.items()}


def shuffled(arrays: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    order = np.random.default_rng(seed).permutation(len(arrays["label"]))
    return {k: v[order] for k, v in arrays.items()}


def rank_parts(arrays: Arrays, ranks: int) -> list[Arrays]:
    """``arrays`` dealt out in ``ranks`` contiguous parts of ``rows // ranks`` rows each (the
    last ``rows % ranks`` rows are left out, as an equal split leaves them out)."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    each = len(arrays["label"]) // ranks
    return [{k: v[r * each:(r + 1) * each] for k, v in arrays.items()} for r in range(ranks)]


def id_counts(sparse: np.ndarray, feature_spec: FeatureSpec) -> dict[str, np.ndarray]:
    """How often each table row's id occurs in ``sparse`` (transformed rows), per sparse column."""
    sizes = feature_spec.table_sizes
    return {f: np.bincount(sparse[:, j], minlength=sizes[f]).astype(np.float32)
            for j, f in enumerate(feature_spec.sparse_columns)}


def to_dataset(arrays: dict[str, np.ndarray]):
    """A Ray Dataset of ``arrays`` in blocks of :data:`BLOCK_ROWS` rows, put by this process."""
    import ray.data
    from ray.data.block import BlockAccessor

    rows = len(arrays["label"])
    blocks = [BlockAccessor.batch_to_block({k: np.ascontiguousarray(v[i:i + BLOCK_ROWS]) for k, v in arrays.items()})
              for i in range(0, rows or 1, BLOCK_ROWS)]      # no rows: one empty block
    # from_blocks reads each block's metadata here; from_arrow asks a remote task for it, whose
    # new worker process (on a worker node: the head has no CPU) the driver waited for
    return ray.data.from_blocks(blocks)


def window_of(arrays: Arrays, spec: TrainJobSpec, feature_spec: FeatureSpec, with_id_counts: bool = False) -> Window:
    """The window of ``arrays`` (the window's rows in time order): hold out, shuffle, deal out."""
    rows = len(arrays["label"])
    train, valid = hold_out(arrays, spec.params.validation_fraction)
    del arrays
    train = shuffled(train, spec.params.seed)
    counts = id_counts(train["sparse"], feature_spec) if with_id_counts else None
    ranks = spec.params.num_workers
    return Window([to_dataset(part) for part in rank_parts(train, ranks)],
                  [to_dataset(part) for part in rank_parts(valid, ranks)] if valid is not None else None,
                  rows, len(train["label"]), counts)
