"""A DLRM-style click model with a wide (linear) part, built from plain parts.

    dense [B, d] --norm--> --bottom MLP--> [B, D] ---------------\
                                                                   >-- [dots, dense vec, embeddings] --> top MLP --> + --> logit [B]
    sparse KJT --EmbeddingBagCollection (one table/column)--> e_f --/                                              /
    [normalized dense, e_1 .. e_F] ------------------------- wide linear layer -----------------------------------/

* ``embedding_bags``: a torchrec ``EmbeddingBagCollection`` with one SUM-pooled table per sparse
  column (``t_<column>``; rows and width per column from ``FeatureSpec``). It is the only part
  that gets sharded (see ``sharding.py``); the MLPs stay data-parallel.
* Dense normalization (``params.dense_normalization``): the dense inputs are standardized per
  column, with batch statistics in training and their running average (buffers, saved with the
  model) in eval mode.
* Bottom MLP: ``params.dense_arch`` widths, then a projection to ``embedding_dim`` (skipped when
  the last width already equals it), ReLU after every layer.
* Interaction: dot products of every pair among the ``F + 1`` vectors (dense vector + one per
  sparse feature; a column whose width differs from ``embedding_dim`` is projected to it first),
  concatenated with the dense vector and, with ``params.concat_embeddings``, with the embeddings
  themselves (the top MLP then sees each id's vector, not only its dot products: first-order
  effects of an id no longer have to pass through a dot product).
* Top MLP: ``params.over_arch`` widths with ReLU, then a 1-unit linear head (a logit).
* Wide part (``params.wide``): a linear layer over the normalized dense inputs and the
  embeddings, added to the logit — logistic regression on the same features, as in Wide & Deep:
  the additive per-id effects that dominate click models are learned directly.

For serving (``build_model(..., plain_tables=True)``, what ``export.load_predictor`` builds),
the tables are plain ``nn.Embedding`` rows under the same parameter names and the sparse input
is the ids themselves, int64 ``[B, F]``: a saved version loads into either build, and scoring
needs no torchrec (~2 s of import in every fresh Ray worker and job driver here).

Everything can be built on ``torch.device("meta")`` (no memory, no init) so that
``DistributedModelParallel`` allocates and initialises only the shards a rank owns. Nothing in
this module knows about sharding or process groups.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

import numpy as np
import torch
from torch import nn

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.dense_norm import DenseNormalization
from ads_ranking_pipelines.training.features import FeatureSpec

if TYPE_CHECKING:
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

# The sparse input: a KeyedJaggedTensor (training, sharded tables) or, for models built with
# plain tables (serving), the ids themselves, int64 [B, F] (column j = sparse feature j).
Sparse = Union["KeyedJaggedTensor", torch.Tensor]

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


class IdCounts(nn.Module):
    """How often each id (table row) occurred in the training window, per sparse feature.

    Buffers ``counts_<feature>`` (float [table rows]; saved with the model, filled by the trainer
    from the window, never learned) serve two things the CTR literature does for rare ids:

    * ``min_count``: ids seen fewer times share one row (row 0) of their table, so an id seen
      once cannot memorize its label, and an id never seen (e.g. new on the evaluation day)
      gets that learned "rare id" row instead of an untrained one;
    * ``count_features``: ``log1p(count)`` of each row's id becomes a dense input (how popular
      a user, ad or device is says much about its clicks).

    Expects one id per row and feature (what ``batches.sparse_to_kjt`` makes).
    """

    def __init__(self, features: Sequence[str], table_sizes: dict[str, int], min_count: int,
                 count_features: bool, device: torch.device | None = None) -> None:
        super().__init__()
        self.features = tuple(features)
        self.min_count = int(min_count)
        self.count_features = bool(count_features)
        for f in self.features:
            self.register_buffer(f"counts_{f}", torch.zeros(int(table_sizes[f]), device=device))
        # 1 once counts were set (set_id_counts): without counts no id is treated as rare
        self.register_buffer("has_counts", torch.zeros((), device=device))

    def reset_parameters(self) -> None:
        """Also what DMP calls after materialising a meta-device model: no counts yet."""
        with torch.no_grad():
            for f in self.features:
                getattr(self, f"counts_{f}").zero_()
            self.has_counts.zero_()

    def forward(self, sparse: Sparse) -> tuple[Sparse, torch.Tensor | None]:
        """The ids with rare ones sent to row 0, and log1p(count) per feature (or None)."""
        plain = isinstance(sparse, torch.Tensor)
        by_key = None if plain else sparse.to_dict()
        values, feats = [], []
        floor = self.min_count * self.has_counts          # 0 (nothing is rare) until counts are set
        for j, f in enumerate(self.features):
            ids = sparse[:, j] if plain else by_key[f].values()
            counts = getattr(self, f"counts_{f}")[ids]
            values.append(torch.where(counts < floor, torch.zeros_like(ids), ids)
                          if self.min_count > 1 else ids)
            feats.append(torch.log1p(counts))
        count_dense = torch.stack(feats, dim=1) if self.count_features and feats else None
        if plain:
            return torch.stack(values, dim=1), count_dense
        from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

        remapped = KeyedJaggedTensor(keys=list(self.features), values=torch.cat(values),
                                     lengths=sparse.lengths())
        return remapped, count_dense


def _embedding(rows: int, dim: int, device: torch.device | None) -> nn.Embedding:
    """An ``nn.Embedding``; on ``meta`` (a version about to be loaded) without its initializer:
    ``normal_`` on a meta tensor imports ``torch._dynamo`` (~1.4 CPU-s in every scoring worker
    and job driver here, measured), and the loaded weights replace it anyway."""
    if device is not None and torch.device(device).type == "meta":
        return nn.Embedding.from_pretrained(torch.empty(rows, dim, device=device), freeze=False)
    return nn.Embedding(rows, dim, device=device)


class PlainTables(nn.Module):
    """The embedding tables as plain ``nn.Embedding`` rows, for serving on one CPU process: the
    same parameter names as the ``EmbeddingBagCollection`` (``embedding_bags.t_<feature>.weight``),
    so a saved version loads into either, and no torchrec import (~2 s per fresh process here).
    With one id per row and feature, a SUM-pooled bag is that id's row."""

    def __init__(self, features: Sequence[str], table_sizes: dict[str, int], dims: dict[str, int],
                 device: torch.device | None) -> None:
        super().__init__()
        self.features = tuple(features)
        self.embedding_bags = nn.ModuleDict({
            table_name(f): _embedding(int(table_sizes[f]), dims[f], device) for f in self.features})

    def forward(self, ids: torch.Tensor) -> list[torch.Tensor]:
        return [self.embedding_bags[table_name(f)](ids[:, j]) for j, f in enumerate(self.features)]


class DLRM(nn.Module):
    """``forward(dense: float[B, d], sparse: KeyedJaggedTensor) -> logits float[B]``."""

    def __init__(self, *, num_dense: int, sparse_features: Sequence[str], table_sizes: dict[str, int],
                 embedding_dim: int, dense_arch: Sequence[int], over_arch: Sequence[int],
                 dense_normalization: bool = False, embedding_dims: dict[str, int] | None = None,
                 concat_embeddings: bool = False, wide: bool = False, min_id_count: int = 1,
                 count_features: bool = False, plain_tables: bool = False,
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
        self.dims = {f: int((embedding_dims or {}).get(f, embedding_dim)) for f in self.sparse_features}
        self.concat_embeddings = bool(concat_embeddings)
        self.ebc = self._tables(table_sizes, device, plain_tables)
        self.id_counts = (IdCounts(self.sparse_features, table_sizes, min_id_count, count_features, device)
                          if self.sparse_features and (min_id_count > 1 or count_features) else None)
        if self.id_counts is not None and self.id_counts.count_features:
            num_dense = self.num_dense = int(num_dense) + len(self.sparse_features)
        self.proj = nn.ModuleDict({f: nn.Linear(d, self.embedding_dim, bias=False, device=device)
                                   for f, d in self.dims.items() if d != self.embedding_dim})
        self.dense_norm: DenseNormalization | None = None
        self.bottom: nn.Sequential | None = None
        if self.num_dense > 0:
            if dense_normalization:
                self.dense_norm = DenseNormalization(self.num_dense, device=device)
            widths = list(dense_arch)
            if not widths or widths[-1] != self.embedding_dim:
                widths.append(self.embedding_dim)
            self.bottom = mlp(self.num_dense, widths, device=device)
        self.interaction = DotInteraction(
            num_vectors=len(self.sparse_features) + (1 if self.num_dense > 0 else 0),
            has_dense=self.num_dense > 0, dim=self.embedding_dim)
        concat = sum(self.dims.values()) if self.concat_embeddings else 0
        top_in = self.interaction.out_features + concat
        self.top = mlp(top_in, list(over_arch), device=device)
        self.head = nn.Linear(over_arch[-1] if over_arch else top_in, 1, device=device)
        self.wide = (nn.Linear(self.num_dense + sum(self.dims.values()), 1, bias=False, device=device)
                     if wide else None)

    def _tables(self, table_sizes: dict[str, int], device: torch.device | None,
                plain: bool) -> nn.Module | None:
        if not self.sparse_features:
            return None
        if plain:
            return PlainTables(self.sparse_features, table_sizes, self.dims, device)
        from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
        from torchrec.modules.embedding_modules import EmbeddingBagCollection

        tables = [
            EmbeddingBagConfig(name=table_name(f), feature_names=[f], num_embeddings=int(table_sizes[f]),
                               embedding_dim=self.dims[f], pooling=PoolingType.SUM)
            for f in self.sparse_features
        ]
        return EmbeddingBagCollection(tables=tables, device=device)

    def sparse_embeddings(self, sparse: Sparse) -> list[torch.Tensor]:
        """Pooled embeddings, one ``[B, d_f]`` per sparse feature in ``sparse_features`` order."""
        assert self.ebc is not None
        if isinstance(self.ebc, PlainTables):
            if not isinstance(sparse, torch.Tensor):
                raise TypeError("a model with plain tables takes the sparse ids as an int64 [B, F] tensor")
            return self.ebc(sparse)
        by_key = self.ebc(sparse).to_dict()
        return [by_key[f] for f in self.sparse_features]

    def forward(self, dense: torch.Tensor, sparse: Sparse | None) -> torch.Tensor:
        if isinstance(sparse, torch.Tensor) and (sparse.dim() != 2 or sparse.shape[1] != len(self.sparse_features)):
            raise ValueError(f"sparse ids must be [batch, {len(self.sparse_features)}], got {tuple(sparse.shape)}")
        if self.id_counts is not None and sparse is not None:
            sparse, count_dense = self.id_counts(sparse)
            if count_dense is not None:
                dense = torch.cat([dense, count_dense.to(dense.dtype)], dim=1)
        if self.dense_norm is not None:
            dense = self.dense_norm(dense)
        dense_vec = self.bottom(dense) if self.bottom is not None else None
        if self.ebc is not None and sparse is None:
            raise ValueError("this model has sparse features; pass them (a KeyedJaggedTensor or, "
                             "with plain tables, int64 ids [B, F])")
        embs = self.sparse_embeddings(sparse) if self.ebc is not None else []
        vecs = [self.proj[f](e) if f in self.proj else e for f, e in zip(self.sparse_features, embs)]
        x = self.interaction(dense_vec, torch.stack(vecs, dim=1) if vecs else None)
        if self.concat_embeddings and embs:
            x = torch.cat([x, *embs], dim=1)
        logit = self.head(self.top(x)).squeeze(-1)
        if self.wide is not None:
            parts = ([dense] if self.num_dense > 0 else []) + embs
            logit = logit + self.wide(torch.cat(parts, dim=1)).squeeze(-1)
        return logit


def build_model(params: TrainingParams, feature_spec: FeatureSpec,
                device: torch.device | str | None = None, *, plain_tables: bool = False) -> DLRM:
    """The model for ``params`` and ``feature_spec`` on ``device`` (``meta`` for sharding);
    ``plain_tables``: for serving (:class:`PlainTables`, the same state dict)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    torch.manual_seed(params.seed)
    return DLRM(
        num_dense=feature_spec.num_dense,
        sparse_features=feature_spec.sparse_columns,
        table_sizes=feature_spec.table_sizes,
        embedding_dim=params.embedding_dim,
        embedding_dims=feature_spec.embedding_dims(params.embedding_dim),
        dense_arch=params.dense_arch,
        over_arch=params.over_arch,
        dense_normalization=params.dense_normalization,
        concat_embeddings=params.concat_embeddings,
        wide=params.wide,
        min_id_count=params.min_id_count,
        count_features=params.count_features,
        plain_tables=plain_tables,
        device=device,
    )


def feature_spec_from_dict(d: Mapping[str, Any]) -> FeatureSpec:
    """Inverse of ``dataclasses.asdict(FeatureSpec)`` (JSON turns the tuples into lists)."""
    return FeatureSpec(label_column=d["label_column"], dense_columns=tuple(d["dense_columns"]),
                       sparse_columns=tuple(d["sparse_columns"]), hash_buckets=int(d["hash_buckets"]),
                       table_overrides=tuple((str(c), int(v)) for c, v in d.get("table_overrides", ())),
                       dim_overrides=tuple((str(c), int(v)) for c, v in d.get("dim_overrides", ())),
                       missing_indicators=bool(d.get("missing_indicators", False)))


def set_id_counts(model: nn.Module, counts: Mapping[str, Any]) -> int:
    """Copy each feature's id counts into the ``counts_<feature>`` buffers of ``model`` (any
    wrapper: found by name); returns how many buffers were set."""
    done = 0
    with torch.no_grad():
        for name, buf in model.named_buffers():
            leaf = name.rsplit(".", 1)[-1]
            if ".id_counts." in f".{name}" and leaf.startswith("counts_") and leaf[7:] in counts:
                src = torch.as_tensor(np.asarray(counts[leaf[7:]]), dtype=buf.dtype)
                if src.shape != buf.shape:
                    raise ValueError(f"id counts of {leaf[7:]!r} have shape {tuple(src.shape)}, "
                                     f"table has {tuple(buf.shape)}")
                buf.copy_(src.to(buf.device))
                done += 1
        for name, buf in model.named_buffers():
            if name.endswith("id_counts.has_counts") and done:
                buf.fill_(1.0)
    return done


def dense_parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if not n.startswith("ebc."))


def embedding_parameter_count(feature_spec: FeatureSpec, embedding_dim: int) -> int:
    dims = feature_spec.embedding_dims(embedding_dim)
    return sum(n * dims[f] for f, n in feature_spec.table_sizes.items())
