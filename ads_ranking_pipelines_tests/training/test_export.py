import json
import os

import numpy as np
import pytest
import torch

from ads_ranking_pipelines.training import export
from ads_ranking_pipelines.training.batches import make_batch
from ads_ranking_pipelines.training.export import (
    MANIFEST_FILE, NotAModelVersion, is_model_version, load_predictor, read_manifest,
    save_model_version,
)
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.training.model import build_model
from ads_ranking_pipelines.config.source import SourceConfig

from .toy import raw_events, tiny_params, tiny_spec, toy_arrays


def _trained(params, spec):
    model = build_model(params, spec, "cpu")
    with torch.no_grad():          # move weights off their init so a bad load would show
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def test_round_trip_gives_the_same_predictions(tmp_path):
    params, spec = tiny_params(), tiny_spec()
    model = _trained(params, spec)
    uri = str(tmp_path / "models" / "v1")
    manifest = save_model_version(uri, model, params, spec, extra_manifest={"rows": 123})
    assert sorted(os.listdir(uri)) == ["manifest.json", "model.json", "weights.pt"]
    assert manifest["rows"] == 123 and read_manifest(uri)["files"]["weights.pt"]["sha256"]

    data = toy_arrays(1000, spec, seed=5)
    with torch.no_grad():
        b = make_batch(data, spec.sparse_columns)
        expected = torch.sigmoid(model(b.dense, b.sparse)).numpy()
    predictor = load_predictor(uri, batch_size=128)         # several internal batches
    got = predictor.predict(data["dense"], data["sparse"])
    assert got.dtype == np.float32 and got.shape == (1000,)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert ((got > 0) & (got < 1)).all()
    assert predictor.params == params and predictor.feature_spec == spec


def test_score_rows_applies_the_feature_transform(tmp_path):
    params = tiny_params(hash_buckets=1000)
    spec = FeatureSpec.from_source(SourceConfig(), 1000)
    model = _trained(params, spec)
    save_model_version(str(tmp_path / "v"), model, params, spec)
    pred = load_predictor(str(tmp_path / "v"))
    rows = raw_events(300, seed=1)
    x = transform(rows, spec, with_label=False)
    np.testing.assert_allclose(pred.score_rows(rows), pred.predict(x["dense"], x["sparse"]))


def test_folder_without_manifest_is_not_a_version(tmp_path, monkeypatch):
    params, spec = tiny_params(), tiny_spec()
    uri = str(tmp_path / "half")

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(export.fs, "write_json", boom)      # the manifest write fails
    with pytest.raises(OSError):
        save_model_version(uri, _trained(params, spec), params, spec)
    assert os.path.exists(os.path.join(uri, "weights.pt"))
    assert not is_model_version(uri)
    with pytest.raises(NotAModelVersion):
        load_predictor(uri)


def test_resave_unpublishes_before_writing(tmp_path, monkeypatch):
    params, spec = tiny_params(), tiny_spec()
    uri = str(tmp_path / "v")
    save_model_version(uri, _trained(params, spec), params, spec)
    seen = []
    real = export.fs.write_bytes

    def spy(u, data):
        seen.append((os.path.basename(u), os.path.exists(os.path.join(uri, MANIFEST_FILE))))
        return real(u, data)
    monkeypatch.setattr(export.fs, "write_bytes", spy)
    save_model_version(uri, _trained(params, spec), params, spec)
    # weights and model.json were written while no manifest existed; the manifest came last
    assert [s for s in seen if s[0] != MANIFEST_FILE] == [("weights.pt", False), ("model.json", False)]
    assert seen[-1][0] == MANIFEST_FILE
    assert is_model_version(uri)


def test_tampered_weights_are_refused(tmp_path):
    params, spec = tiny_params(), tiny_spec()
    uri = str(tmp_path / "v")
    save_model_version(uri, _trained(params, spec), params, spec)
    with open(os.path.join(uri, "weights.pt"), "ab") as f:
        f.write(b"junk")
    with pytest.raises(ValueError, match="checksum"):
        load_predictor(uri)


def test_predict_validates_inputs(tmp_path):
    params, spec = tiny_params(), tiny_spec()
    save_model_version(str(tmp_path / "v"), _trained(params, spec), params, spec)
    pred = load_predictor(str(tmp_path / "v"))
    d = toy_arrays(4, spec, seed=0)
    with pytest.raises(ValueError, match="dense"):
        pred.predict(d["dense"][:, :2], d["sparse"])
    with pytest.raises(ValueError, match="sparse ids"):
        pred.predict(d["dense"], d["sparse"] + spec.hash_buckets)
    assert pred.predict(d["dense"][:0], d["sparse"][:0]).shape == (0,)


def test_model_json_describes_the_model(tmp_path):
    params, spec = tiny_params(), tiny_spec()
    save_model_version(str(tmp_path / "v"), _trained(params, spec), params, spec)
    desc = json.loads((tmp_path / "v" / "model.json").read_text())
    assert desc["table_sizes"] == {f"s{i}": spec.hash_buckets for i in range(4)}
    assert desc["params"]["embedding_dim"] == params.embedding_dim
    assert desc["feature_spec"]["sparse_columns"] == list(spec.sparse_columns)


def test_versions_saved_before_dense_normalization_existed_still_load(tmp_path):
    params, spec = tiny_params(dense_normalization=False), tiny_spec()
    model = _trained(params, spec)
    uri = str(tmp_path / "old")
    save_model_version(uri, model, params, spec)
    # what an older release wrote: no dense_normalization in the params, no such layer
    desc_path = os.path.join(uri, "model.json")
    desc = json.load(open(desc_path))
    del desc["params"]["dense_normalization"]
    json.dump(desc, open(desc_path, "w"))
    pred = load_predictor(uri, verify=False)
    assert pred.model.dense_norm is None
    data = toy_arrays(200, spec, seed=7)
    with torch.no_grad():
        b = make_batch(data, spec.sparse_columns)
        expected = torch.sigmoid(model(b.dense, b.sparse)).numpy()
    np.testing.assert_allclose(pred.predict(data["dense"], data["sparse"]), expected, rtol=1e-5, atol=1e-6)
