"""Numpy batches (from ``features.transform``) -> torch tensors + a torchrec KeyedJaggedTensor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor


@dataclass
class Batch:
    dense: torch.Tensor                 # float32 [B, d]
    sparse: KeyedJaggedTensor | None    # one id per feature per row; None without sparse features
    label: torch.Tensor | None          # float32 [B]

    @property
    def size(self) -> int:
        return int(self.dense.shape[0])

    def to(self, device: torch.device, non_blocking: bool = False) -> "Batch":
        return Batch(
            dense=self.dense.to(device, non_blocking=non_blocking),
            sparse=self.sparse.to(device, non_blocking=non_blocking) if self.sparse is not None else None,
            label=self.label.to(device, non_blocking=non_blocking) if self.label is not None else None,
        )


def sparse_to_kjt(sparse: np.ndarray | torch.Tensor, keys: Sequence[str],
                  device: torch.device | str | None = None) -> KeyedJaggedTensor:
    """``int64 [B, k]`` ids (column j = feature ``keys[j]``) -> a KJT with one id per row and key.

    KJT values are key-major: all of key 0's rows, then key 1's, ...; every length is 1.
    """
    ids = torch.as_tensor(sparse)
    if ids.dim() != 2 or ids.shape[1] != len(keys):
        raise ValueError(f"sparse ids must be [batch, {len(keys)}], got {tuple(ids.shape)}")
    ids = ids.to(torch.int64)
    batch = ids.shape[0]
    values = ids.t().contiguous().view(-1)
    lengths = torch.ones(batch * len(keys), dtype=torch.int32)
    kjt = KeyedJaggedTensor(keys=list(keys), values=values, lengths=lengths)
    return kjt.to(torch.device(device)) if device is not None else kjt


def make_batch(arrays: Mapping[str, np.ndarray], sparse_keys: Sequence[str],
               device: torch.device | str | None = None, with_label: bool = True) -> Batch:
    """``{"dense", "sparse"[, "label"]}`` numpy arrays -> a :class:`Batch` on ``device``."""
    dense = torch.as_tensor(np.ascontiguousarray(arrays["dense"], dtype=np.float32))
    if dense.dim() == 1:                   # a single dense column may arrive flattened
        dense = dense.unsqueeze(1)
    sparse = None
    if sparse_keys:
        sparse = sparse_to_kjt(np.ascontiguousarray(arrays["sparse"], dtype=np.int64), sparse_keys)
    label = None
    if with_label:
        label = torch.as_tensor(np.ascontiguousarray(arrays["label"], dtype=np.float32)).view(-1)
    out = Batch(dense=dense, sparse=sparse, label=label)
    return out.to(torch.device(device)) if device is not None else out
