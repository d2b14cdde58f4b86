import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ads_ranking_pipelines.training.batches import make_batch, sparse_to_kjt
from ads_ranking_pipelines.training.model import DotInteraction, build_model, table_name

from .toy import tiny_params, tiny_spec, toy_arrays


def test_forward_backward_shapes_and_gradients_reach_every_part():
    params, spec = tiny_params(), tiny_spec()
    model = build_model(params, spec, "cpu")
    batch = make_batch(toy_arrays(32, spec, seed=0), spec.sparse_columns)
    logits = model(batch.dense, batch.sparse)
    assert logits.shape == (32,) and logits.dtype == torch.float32
    F.binary_cross_entropy_with_logits(logits, batch.label).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"no gradient reaches {name}"
    # only the looked-up rows of a table get gradient
    table = model.ebc.embedding_bags[table_name("s0")].weight
    used = torch.unique(torch.as_tensor(toy_arrays(32, spec, seed=0)["sparse"][:, 0]))
    rows_with_grad = torch.nonzero(table.grad.abs().sum(1)).view(-1)
    assert set(rows_with_grad.tolist()) <= set(used.tolist())


def test_architecture_follows_params():
    params, spec = tiny_params(embedding_dim=12, dense_arch=(20, 7), over_arch=(9, 5)), tiny_spec(3, 4)
    model = build_model(params, spec, "cpu")
    widths = [m.out_features for m in model.bottom if isinstance(m, torch.nn.Linear)]
    assert widths == [20, 7, 12]                    # projected to embedding_dim
    assert model.interaction.out_features == 12 + 5 * 4 // 2
    # the top MLP sees the dots, the dense vector and the 4 embeddings themselves
    assert model.top[0].in_features == model.interaction.out_features + 4 * 12
    assert model.head.out_features == 1
    # wide part: the 3 dense inputs, their 3 missing flags... (tiny_spec has none) + 4 log-counts, + embeddings
    assert model.wide.in_features == 3 + 4 + 4 * 12
    tables = {n: t.weight.shape for n, t in model.ebc.embedding_bags.items()}
    assert tables == {table_name(f"s{i}"): (spec.hash_buckets, 12) for i in range(4)}
    plain = build_model(params.model_copy(update={"concat_embeddings": False, "wide": False,
                                                  "count_features": False}), spec, "cpu")
    assert plain.top[0].in_features == plain.interaction.out_features and plain.wide is None


def test_per_feature_table_rows_and_widths_come_from_the_source():
    from ads_ranking_pipelines.config.source import SourceConfig
    from ads_ranking_pipelines.training.features import FeatureSpec

    src = SourceConfig(kind="parquet", uri="/x", label_column="y", dense_columns=("d",),
                       sparse_columns=("a", "b"), features={"a": {"hash_buckets": 10, "embedding_dim": 4}})
    spec = FeatureSpec.from_source(src, hash_buckets=64)
    assert spec.table_sizes == {"a": 10, "b": 64} and spec.num_dense == 2   # value + missing flag
    model = build_model(tiny_params(embedding_dim=8), spec, "cpu")
    assert model.ebc.embedding_bags[table_name("a")].weight.shape == (10, 4)
    assert model.ebc.embedding_bags[table_name("b")].weight.shape == (64, 8)
    assert set(model.proj) == {"a"}                                   # projected to 8 for the dots
    out = model(torch.randn(5, 2), sparse_to_kjt(torch.tensor([[9, 63]] * 5), ["a", "b"]))
    assert out.shape == (5,)


def test_rare_and_unseen_ids_share_one_row_once_counts_are_set():
    from ads_ranking_pipelines.training.model import set_id_counts

    spec = tiny_spec(1, 2)
    model = build_model(tiny_params(min_id_count=3), spec, "cpu")
    kjt = sparse_to_kjt(torch.tensor([[5, 7], [6, 7], [0, 1]]), spec.sparse_columns)
    same, _ = model.id_counts(kjt)
    assert torch.equal(same.values(), kjt.values())          # no counts yet: nothing is rare
    counts = {f: np.zeros(spec.hash_buckets, dtype=np.float32) for f in spec.sparse_columns}
    counts["s0"][5], counts["s1"][7] = 3.0, 10.0              # s0: id 6 seen twice -> rare
    counts["s0"][6] = 2.0
    assert set_id_counts(model, counts) == 2
    remapped, logcounts = model.id_counts(kjt)
    assert remapped.to_dict()["s0"].values().tolist() == [5, 0, 0]
    assert remapped.to_dict()["s1"].values().tolist() == [7, 7, 0]   # id 1 never seen
    torch.testing.assert_close(logcounts, torch.log1p(torch.tensor([[3.0, 10.0], [2.0, 10.0], [0.0, 0.0]])))
    assert model.id_counts.has_counts.item() == 1.0 and "id_counts.counts_s0" in model.state_dict()


def test_meta_device_allocates_nothing():
    model = build_model(tiny_params(hash_buckets=10_000_000), tiny_spec(buckets=10_000_000), "meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}


@pytest.mark.parametrize("num_dense,num_sparse", [(0, 3), (2, 0), (1, 1)])
def test_dense_only_and_sparse_only_models(num_dense, num_sparse):
    spec = tiny_spec(num_dense, num_sparse)
    model = build_model(tiny_params(), spec, "cpu")
    batch = make_batch(toy_arrays(8, spec, seed=1), spec.sparse_columns)
    out = model(batch.dense, batch.sparse)
    assert out.shape == (8,) and torch.isfinite(out).all()


def test_dot_interaction_matches_explicit_pairs():
    inter = DotInteraction(num_vectors=3, has_dense=True, dim=4)
    dense, sparse = torch.randn(5, 4), torch.randn(5, 2, 4)
    out = inter(dense, sparse)
    vs = [dense, sparse[:, 0], sparse[:, 1]]
    pairs = [(vs[i] * vs[j]).sum(1) for i in range(3) for j in range(i + 1, 3)]
    expected = torch.cat([dense, torch.stack(pairs, 1)], 1)
    torch.testing.assert_close(out, expected)


def test_a_few_steps_learn_the_toy_problem_unsharded():
    params, spec = tiny_params(), tiny_spec()
    model = build_model(params, spec, "cpu")
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    data = toy_arrays(4096, spec, seed=2)
    losses = []
    for epoch in range(3):
        for lo in range(0, 4096, 256):
            b = make_batch({k: v[lo:lo + 256] for k, v in data.items()}, spec.sparse_columns)
            loss = F.binary_cross_entropy_with_logits(model(b.dense, b.sparse), b.label)
            opt.zero_grad(); loss.backward(); opt.step()
            losses.append(loss.item())
    assert np.mean(losses[-8:]) < np.mean(losses[:8]) - 0.1


def test_kjt_has_one_id_per_feature_per_row():
    keys = ["a", "b", "c"]
    ids = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    kjt = sparse_to_kjt(ids, keys)
    assert kjt.keys() == keys
    assert kjt.lengths().tolist() == [1] * 6
    assert kjt.values().tolist() == [1, 4, 2, 5, 3, 6]          # key-major
    by_key = kjt.to_dict()
    for j, k in enumerate(keys):
        assert by_key[k].values().tolist() == ids[:, j].tolist()
    assert kjt.stride() == 2


def test_kjt_rejects_wrong_width():
    with pytest.raises(ValueError, match="sparse ids"):
        sparse_to_kjt(np.zeros((4, 2), dtype=np.int64), ["a", "b", "c"])


def test_make_batch_types_and_device():
    spec = tiny_spec()
    arrays = toy_arrays(10, spec, seed=0)
    arrays["dense"] = arrays["dense"].astype(np.float64)
    b = make_batch(arrays, spec.sparse_columns, device="cpu")
    assert b.dense.dtype == torch.float32 and b.dense.shape == (10, 3)
    assert b.label.dtype == torch.float32 and b.label.shape == (10,)
    assert b.sparse.values().dtype == torch.int64 and b.size == 10
    nolabel = make_batch({"dense": arrays["dense"], "sparse": arrays["sparse"]}, spec.sparse_columns,
                         with_label=False)
    assert nolabel.label is None


def test_dense_normalization_is_part_of_the_model_state_and_can_be_turned_off():
    spec = tiny_spec()
    on = build_model(tiny_params(), spec, "cpu")
    assert {"dense_norm.running_mean", "dense_norm.running_var",
            "dense_norm.num_batches_tracked"} <= set(on.state_dict())
    off = build_model(tiny_params(dense_normalization=False), spec, "cpu")
    assert off.dense_norm is None and not any("dense_norm" in k for k in off.state_dict())
    # materialised from the meta device, the statistics start at mean 0 / variance 1
    meta = build_model(tiny_params(), spec, "meta")
    meta.to_empty(device="cpu")
    meta.dense_norm.reset_parameters()
    # (the dense inputs plus one log-count per sparse feature)
    assert meta.dense_norm.running_var.tolist() == [1.0] * (spec.num_dense + len(spec.sparse_columns))


def test_plain_tables_serve_the_same_logits_as_the_torchrec_tables():
    """The serving build (``plain_tables``: nn.Embedding rows, no torchrec) takes the training
    model's state dict as it is and gives the same logits, rare-id remapping and count features
    included."""
    from ads_ranking_pipelines.training.model import PlainTables, set_id_counts

    params, spec = tiny_params(min_id_count=3, count_features=True), tiny_spec()
    trained = build_model(params, spec)
    rng = np.random.default_rng(0)
    counts = {f: rng.integers(0, 6, size=spec.table_sizes[f]).astype(np.float32) for f in spec.sparse_columns}
    assert set_id_counts(trained, counts) == len(spec.sparse_columns)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    trained.eval()

    serving = build_model(params, spec, device="meta", plain_tables=True)
    assert isinstance(serving.ebc, PlainTables)
    assert set(serving.state_dict()) == set(trained.state_dict())
    serving.load_state_dict(trained.state_dict(), strict=True, assign=True)
    serving.eval()

    data = toy_arrays(500, spec, seed=4)
    assert (np.stack([counts[f][data["sparse"][:, j]] for j, f in enumerate(spec.sparse_columns)], 1) < 3).any()
    with torch.no_grad():
        b = make_batch(data, spec.sparse_columns)
        want = trained(b.dense, b.sparse)
        got = serving(b.dense, torch.from_numpy(data["sparse"]))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=r"int64 \[B, F\]"):
        serving(b.dense, b.sparse)
    with pytest.raises(ValueError, match=r"\[batch, 4\]"):
        serving(b.dense, torch.from_numpy(data["sparse"][:, :2]))
