"""A small DLRM-style click model built from plain parts.

    dense [B, d] --bottom MLP--> [B, D] ----------------------\\
                                                               >-- pairwise dots --> top MLP --> logit [B]
    sparse KJT --EmbeddingBagCollection (one table/column)--> [B, F, D]

* ``embedding_bags``: a torchrec ``EmbeddingBagCollection`` with one SUM-pooled table per sparse
  column (``t_<column>``, ``num_embeddings`` from ``FeatureSpec.table_sizes``). It is the only
  part that gets sharded (see ``sharding.py``); the MLPs stay data-parallel.
* Bottom MLP: ``params.dense_arch`` widths, then a projection to ``embedding_dim`` (skipped when
  the last width already equals it), ReLU after every layer.
* Interaction: dot products of every pair among the ``F + 1`` vectors (dense vector + one per
  sparse feature), concatenated with the dense vector: ``D + (F + 1) * F / 2`` inputs.
* Top MLP: ``params.over_arch`` widths with ReLU, then a 1-unit linear head (a logit).

Everything can be built on ``torch.device("meta")`` (no memory, no init) so that
``DistributedModelParallel`` allocates and initialises only the shards a rank owns. Nothing in
this module knows about sharding or process groups.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import nn
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.features import FeatureSpec

TABLE_PREFIX = "t_"


def table_name(feature: str) -> str:
    return f"{TABLE_PREFIX}{feature}"


def mlp(in_features: int, widths: Sequence[int], *, device: torch.device | None,
        final_relu: bool = True) -> nn.Sequential:
    """Linear layers of the given widths with ReLU between them (and after the last if asked)."""
    layers: list[nn.Module] = []
    last = in_features
    for i, width in enumerate(widths):
        layers.append(nn.Linear(last, width, device=device))
        if final_relu or i < len(widths) - 1:
            layers.append(nn.ReLU())
        last = width
    return nn.Sequential(*layers)


class DotInteraction(nn.Module):
    """Pairwise dot products among ``[dense, sparse_1 .. sparse_F]`` plus the dense vector.

    Inputs ``dense [B, D]`` (or ``None`` when there are no dense features) and
    ``sparse [B, F, D]`` (or ``None`` when there are no sparse features).
    """

    def __init__(self, num_vectors: int, has_dense: bool, dim: int) -> None:
        super().__init__()
        self.num_vectors = num_vectors
        self.has_dense = has_dense
        self.dim = dim
        # Index pairs are computed per device on first use rather than kept as a buffer: a
        # buffer created on the meta device would be zero-filled when materialised.
        self._pairs: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    @property
    def out_features(self) -> int:
        n = self.num_vectors
        return (self.dim if self.has_dense else 0) + n * (n - 1) // 2

    def _pair_index(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if device not in self._pairs:
            rows, cols = torch.triu_indices(self.num_vectors, self.num_vectors, offset=1, device=device)
            self._pairs[device] = (rows, cols)
        return self._pairs[device]

    def forward(self, dense: torch.Tensor | None, sparse: torch.Tensor | None) -> torch.Tensor:
        parts = []
        if dense is not None:
            parts.append(dense.unsqueeze(1))
        if sparse is not None:
            parts.append(sparse)
        vectors = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]   # [B, N, D]
        out = []
        if dense is not None:
            out.append(dense)
        if self.num_vectors > 1:
            gram = torch.bmm(vectors, vectors.transpose(1, 2))             # [B, N, N]
            rows, cols = self._pair_index(gram.device)
            out.append(gram[:, rows, cols])
        return torch.cat(out, dim=1) if len(out) > 1 else out[0]


class DLRM(nn.Module):
    """``forward(dense: float[B, d], sparse: KeyedJaggedTensor) -> logits float[B]``."""

    def __init__(self, *, num_dense: int, sparse_features: Sequence[str], table_sizes: dict[str, int],
                 embedding_dim: int, dense_arch: Sequence[int], over_arch: Sequence[int],
                 device: torch.device | None = None) -> None:
        super().__init__()
        if num_dense <= 0 and not sparse_features:
            raise ValueError("the model needs at least one dense or one sparse feature")
        missing = [f for f in sparse_features if f not in table_sizes]
        if missing:
            raise ValueError(f"no table size for sparse features {missing}")
        self.num_dense = int(num_dense)
        self.sparse_features = tuple(sparse_features)
        self.embedding_dim = int(embedding_dim)

        self.ebc: EmbeddingBagCollection | None = None
        if self.sparse_features:
            tables = [
                EmbeddingBagConfig(
                    name=table_name(f), feature_names=[f], num_embeddings=int(table_sizes[f]),
                    embedding_dim=self.embedding_dim, pooling=PoolingType.SUM,
                )
                for f in self.sparse_features
            ]
            self.ebc = EmbeddingBagCollection(tables=tables, device=device)

        self.bottom: nn.Sequential | None = None
        if self.num_dense > 0:
            widths = list(dense_arch)
            if not widths or widths[-1] != self.embedding_dim:
                widths.append(self.embedding_dim)
            self.bottom = mlp(self.num_dense, widths, device=device)

        self.interaction = DotInteraction(
            num_vectors=len(self.sparse_features) + (1 if self.num_dense > 0 else 0),
            has_dense=self.num_dense > 0, dim=self.embedding_dim)
        self.top = mlp(self.interaction.out_features, list(over_arch), device=device)
        self.head = nn.Linear(over_arch[-1] if over_arch else self.interaction.out_features, 1,
                              device=device)

    def sparse_vectors(self, sparse: KeyedJaggedTensor) -> torch.Tensor:
        """Pooled embeddings ``[B, F, D]`` in ``sparse_features`` order."""
        assert self.ebc is not None
        pooled = self.ebc(sparse)                      # KeyedTensor
        by_key = pooled.to_dict()
        return torch.stack([by_key[f] for f in self.sparse_features], dim=1)

    def forward(self, dense: torch.Tensor, sparse: KeyedJaggedTensor | None) -> torch.Tensor:
        dense_vec = self.bottom(dense) if self.bottom is not None else None
        sparse_vecs = (self.sparse_vectors(sparse)
                       if self.ebc is not None and sparse is not None else None)
        if self.ebc is not None and sparse_vecs is None:
            raise ValueError("this model has sparse features; pass a KeyedJaggedTensor")
        x = self.interaction(dense_vec, sparse_vecs)
        return self.head(self.top(x)).squeeze(-1)


def build_model(params: TrainingParams, feature_spec: FeatureSpec,
                device: torch.device | str | None = None) -> DLRM:
    """The model for ``params`` and ``feature_spec`` on ``device`` (``meta`` for sharding)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    torch.manual_seed(params.seed)
    return DLRM(
        num_dense=feature_spec.num_dense,
        sparse_features=feature_spec.sparse_columns,
        table_sizes=feature_spec.table_sizes,
        embedding_dim=params.embedding_dim,
        dense_arch=params.dense_arch,
        over_arch=params.over_arch,
        device=device,
    )


def feature_spec_from_dict(d: Mapping[str, Any]) -> FeatureSpec:
    """Inverse of ``dataclasses.asdict(FeatureSpec)`` (JSON turns the tuples into lists)."""
    return FeatureSpec(label_column=d["label_column"], dense_columns=tuple(d["dense_columns"]),
                       sparse_columns=tuple(d["sparse_columns"]), hash_buckets=int(d["hash_buckets"]))


def dense_parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if not n.startswith("ebc."))


def embedding_parameter_count(feature_spec: FeatureSpec, embedding_dim: int) -> int:
    return sum(feature_spec.table_sizes.values()) * embedding_dim
