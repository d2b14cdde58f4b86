"""Model versions on storage, and a CPU predictor that loads them.

A version is a folder (any ``storage/fs.py`` URI) holding

* ``weights.pt``    ``torch.save`` of the plain (unsharded) ``state_dict``
* ``model.json``    training params, feature spec and table sizes: enough to rebuild the model
* ``manifest.json`` written LAST: format, file sizes + sha256, and whatever the caller adds.

A folder without ``manifest.json`` is not a version (an interrupted write leaves no version).
Re-saving over an existing version first removes its manifest, so readers never see a manifest
next to half-written files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import io
import json
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.training.model import build_model, feature_spec_from_dict

FORMAT = "ads_ranking_dlrm/v1"
WEIGHTS_FILE = "weights.pt"
MODEL_FILE = "model.json"
MANIFEST_FILE = "manifest.json"


class NotAModelVersion(FileNotFoundError):
    """The folder has no ``manifest.json`` (never finished, or not a version at all)."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_model_version(uri: str) -> bool:
    return fs.exists(fs.join(uri, MANIFEST_FILE))


def plain_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """CPU, contiguous, detached copies of a model's parameters and buffers."""
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in model.state_dict().items()}


def model_description(params: TrainingParams, feature_spec: FeatureSpec) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "architecture": "dlrm_dot_wide",
        "params": params.model_dump(mode="json"),
        "feature_spec": dataclasses.asdict(feature_spec),
        "table_sizes": feature_spec.table_sizes,
    }


def save_model_version(uri: str, model: nn.Module, params: TrainingParams, feature_spec: FeatureSpec,
                       extra_manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write a model version to ``uri``; returns the manifest written."""
    uri = fs.normalize(uri)
    manifest_uri = fs.join(uri, MANIFEST_FILE)
    if fs.exists(manifest_uri):
        fs.filesystem(manifest_uri)[0].delete_file(fs.filesystem(manifest_uri)[1])

    buf = io.BytesIO()
    torch.save(plain_state_dict(model), buf)
    weights = buf.getvalue()
    description = json_bytes(model_description(params, feature_spec))

    fs.write_bytes(fs.join(uri, WEIGHTS_FILE), weights)
    fs.write_bytes(fs.join(uri, MODEL_FILE), description)
    manifest = {
        **dict(extra_manifest or {}),
        "format": FORMAT,
        "model_name": params.model_name,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "files": {
            WEIGHTS_FILE: {"bytes": len(weights), "sha256": _sha256(weights)},
            MODEL_FILE: {"bytes": len(description), "sha256": _sha256(description)},
        },
    }
    fs.write_json(manifest_uri, manifest)
    return manifest


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, sort_keys=True, default=str).encode()


def read_manifest(uri: str) -> dict[str, Any]:
    manifest_uri = fs.join(fs.normalize(uri), MANIFEST_FILE)
    if not fs.exists(manifest_uri):
        raise NotAModelVersion(f"{uri} is not a model version (no {MANIFEST_FILE})")
    return fs.read_json(manifest_uri)


class Predictor:
    """Click probabilities from a saved version, on CPU.

    ``predict(dense float[n, d], sparse int64[n, k]) -> float32[n]``, where the inputs are what
    ``features.transform`` produces. ``score_rows(batch)`` applies the transform itself. The
    object pickles (Ray Data ``map_batches`` can ship it, or build it per actor from a URI).
    """

    def __init__(self, model: nn.Module, params: TrainingParams, feature_spec: FeatureSpec,
                 manifest: Mapping[str, Any] | None = None, batch_size: int = 65536) -> None:
        self.model = model.to("cpu").eval()
        self.params = params
        self.feature_spec = feature_spec
        self.manifest = dict(manifest or {})
        self.batch_size = int(batch_size)

    @torch.no_grad()
    def predict(self, dense: np.ndarray, sparse: np.ndarray) -> np.ndarray:
        dense = np.asarray(dense, dtype=np.float32)
        sparse = np.asarray(sparse, dtype=np.int64)
        n = len(dense) if self.feature_spec.num_dense else len(sparse)
        if dense.ndim == 1:
            dense = dense.reshape(n, -1)
        if sparse.ndim == 1:
            sparse = sparse.reshape(n, -1)
        if dense.shape[1] != self.feature_spec.num_dense:
            raise ValueError(f"expected {self.feature_spec.num_dense} dense columns, got {dense.shape[1]}")
        k = len(self.feature_spec.sparse_columns)
        if sparse.shape[1] != k:
            raise ValueError(f"expected {k} sparse columns, got {sparse.shape[1]}")
        sizes = np.array(list(self.feature_spec.table_sizes.values()), dtype=np.int64)
        if k and n and (sparse.min() < 0 or (sparse.max(axis=0) >= sizes).any()):
            raise ValueError(f"sparse ids must lie in [0, table size) per column; sizes {sizes.tolist()}")
        out = np.empty(n, dtype=np.float32)
        for lo in range(0, n, self.batch_size):
            hi = min(n, lo + self.batch_size)
            d = torch.from_numpy(np.ascontiguousarray(dense[lo:hi]))
            s = torch.from_numpy(np.ascontiguousarray(sparse[lo:hi])) if k else None
            out[lo:hi] = torch.sigmoid(self.model(d, s)).numpy()
        return out

    def score_rows(self, batch: Any) -> np.ndarray:
        """Raw event rows (dict of arrays, DataFrame or Table) -> click probabilities."""
        x = transform(batch, self.feature_spec, with_label=False)
        return self.predict(x["dense"], x["sparse"])

    __call__ = predict


def load_predictor(uri: str, batch_size: int = 65536, verify: bool = True) -> Predictor:
    """Load a saved version (refuses folders without a manifest; checks sha256 if ``verify``)."""
    uri = fs.normalize(uri)
    manifest = read_manifest(uri)
    weights = fs.read_bytes(fs.join(uri, WEIGHTS_FILE))
    description_bytes = fs.read_bytes(fs.join(uri, MODEL_FILE))
    if verify:
        for name, data in ((WEIGHTS_FILE, weights), (MODEL_FILE, description_bytes)):
            want = manifest.get("files", {}).get(name, {}).get("sha256")
            if want and want != _sha256(data):
                raise ValueError(f"{fs.join(uri, name)} does not match its manifest checksum")
    description = json.loads(description_bytes)
    if description.get("format") != FORMAT:
        raise ValueError(f"unsupported model format {description.get('format')!r} (want {FORMAT})")
    params = TrainingParams.model_validate(description["params"])
    if "dense_normalization" not in description["params"]:
        # saved before the field existed: those models have no normalization layer
        params = params.model_copy(update={"dense_normalization": False})
    # saved before the fields existed: plain DLRM (no embeddings in the top MLP, no wide part)
    old_fields = {"concat_embeddings": False, "wide": False, "min_id_count": 1, "count_features": False}
    params = params.model_copy(update={k: v for k, v in old_fields.items() if k not in description["params"]})
    feature_spec = feature_spec_from_dict(description["feature_spec"])
    # Built on meta and then given the loaded tensors: no throwaway random init of the tables.
    # Plain tables (the same state dict): scoring on CPU needs no torchrec.
    model = build_model(params, feature_spec, device=torch.device("meta"), plain_tables=True)
    state = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True, assign=True)
    return Predictor(model, params, feature_spec, manifest=manifest, batch_size=batch_size)
