"""Training helpers shared by P1 and P2: our Ray Train path, and a bare single-process loop."""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

from benchmarks._common import QuietReporter, fast, log, steady

# The partition day the window ends before (any fixed day works; data is synthetic).
DAY = dt.date(2026, 3, 10)


def window(days: int = 3) -> list[dt.date]:
    return [DAY - dt.timedelta(days=i) for i in range(days, 0, -1)]


def rows_per_day() -> int:
    return 20_000 if fast() else 100_000


def params(num_workers: int, epochs: int):
    """Default ``TrainingParams`` (hash_buckets 100k, dim 16, batch 1024/worker, 1 CPU/worker)."""
    from ads_ranking_pipelines.config.training import TrainingParams

    return TrainingParams(num_workers=num_workers, epochs=epochs, max_failures=0, cpus_per_worker=1)


def params_summary(p) -> dict[str, Any]:
    return {"num_workers": p.num_workers, "cpus_per_worker": p.cpus_per_worker, "epochs": p.epochs,
            "batch_size_per_worker": p.batch_size, "hash_buckets": p.hash_buckets,
            "embedding_dim": p.embedding_dim, "dense_arch": list(p.dense_arch),
            "over_arch": list(p.over_arch), "learning_rate": p.learning_rate}


def run_ours(tmp: str, source, days: list[dt.date], p, tag: str) -> dict[str, Any]:
    """``trainer.train`` on the already-initialised local Ray; the trainer's own epoch figures."""
    from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
    from ads_ranking_pipelines.training.trainer import train

    spec = TrainJobSpec(params=p, source=source, train_days=tuple(days), model_version=tag,
                        model_uri=os.path.join(tmp, "models", tag),
                        ray_storage_uri=os.path.join(tmp, "ray_results"), run_name=f"bench-{tag}")
    reporter = QuietReporter()
    t0 = time.perf_counter()
    result = train(spec, reporter)
    call_s = time.perf_counter() - t0
    hist = result.epoch_history
    st = steady(hist)
    ckpt = [float(e.get("checkpoint_s", 0.0)) for e in hist]
    kept = hist[1:] if len(hist) > 1 else hist
    with_ckpt = sum(float(e["samples"]) for e in kept) / max(
        1e-9, sum(float(e["epoch_s"]) + float(e.get("checkpoint_s", 0.0)) for e in kept))
    read_s = next((v.get("read_s") for k, v in reporter.records if k == "dataset"), None)
    out = {
        "samples_per_s": st["samples_per_s"],
        "per_epoch_samples_per_s": [e.get("samples_per_s") for e in hist],
        "steady_epochs": st["epochs_used"],
        "samples_per_s_incl_checkpoint": round(with_ckpt, 1),
        "checkpoint_s_per_epoch": ckpt,
        "rows": result.rows,
        "final_loss": round(result.final_loss, 5),
        "dataset_read_s": read_s,
        "train_wall_s": result.wall_seconds,
        "train_call_s": round(call_s, 2),
    }
    log(f"ours [{tag}]: {out}")
    return out


def embedding_optimizer_kwargs(p) -> dict[str, float]:
    """Row-wise Adagrad settings of the tables as our path sets them (older params: lr, eps 1e-8)."""
    lr = getattr(p, "effective_embedding_learning_rate", None) or p.learning_rate
    return {"lr": float(lr), "eps": float(getattr(p, "embedding_eps", 1e-8))}


def run_bare(source, days: list[dt.date], p, threads: int, epochs: int | None = None,
             max_seconds: float | None = None) -> dict[str, Any]:
    """One process, no Ray, no sharding, no process group: ``build_model`` unsharded on CPU.

    Same rows, already transformed by ``features.transform``, same batch size per step as one
    of our workers, same optimizers as our path: the embedding tables get TorchRec's fused
    row-wise Adagrad (``fuse_embedding_optimizer``: the same fbgemm kernels DMP uses, updated
    inside backward), the MLPs dense Adam (constant learning rates: a schedule costs nothing
    measurable). ``threads`` intra-op threads. With ``max_seconds``, no epoch after the second
    starts once that much time has passed (a contended machine can make a run 10-50x slower).
    """
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torchrec.modules.fused_embedding_modules import fuse_embedding_optimizer
    from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

    from ads_ranking_pipelines.events.layout import read_days
    from ads_ranking_pipelines.training.batches import make_batch
    from ads_ranking_pipelines.training.features import FeatureSpec, transform
    from ads_ranking_pipelines.training.model import build_model
    from ads_ranking_pipelines.training.train_loop import quiet_warnings

    quiet_warnings()
    torch.set_num_threads(threads)
    feature_spec = FeatureSpec.from_source(source, p.hash_buckets)
    t0 = time.perf_counter()
    x = transform(read_days(source, days, feature_spec.read_columns), feature_spec)
    read_s = time.perf_counter() - t0
    n = len(x["label"])

    model = build_model(p, feature_spec, device=torch.device("cpu"))
    model = fuse_embedding_optimizer(model, RowWiseAdagrad, embedding_optimizer_kwargs(p),
                                     device=torch.device("cpu"))
    dense = [prm for name, prm in model.named_parameters() if not name.startswith("ebc.")]
    dense_opt = torch.optim.Adam(dense, lr=p.learning_rate)
    keys = list(feature_spec.sparse_columns)
    model.train()

    history = []
    started = time.perf_counter()
    for epoch in range(epochs or p.epochs):
        if max_seconds is not None and epoch >= 2 and time.perf_counter() - started > max_seconds:
            log(f"bare ({threads} threads): stopping after {epoch} epochs ({max_seconds:.0f}s budget)")
            break
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), dtype=torch.float64)
        seen = steps = 0
        for lo in range(0, n, p.batch_size):
            arrays = {k: v[lo:lo + p.batch_size] for k, v in x.items()}
            batch = make_batch(arrays, keys)
            logits = model(batch.dense, batch.sparse)
            loss = F.binary_cross_entropy_with_logits(logits, batch.label)
            dense_opt.zero_grad()
            loss.backward()              # embedding rows updated here (fused row-wise Adagrad)
            dense_opt.step()             # dense Adam
            loss_sum += loss.detach().double() * batch.size
            seen += batch.size
            steps += 1
        s = time.perf_counter() - t0
        history.append({"epoch": epoch + 1, "samples": seen, "steps": steps, "epoch_s": round(s, 3),
                        "samples_per_s": round(seen / s, 1), "loss": float(loss_sum.item() / seen)})
        log(f"bare epoch {epoch + 1}: {history[-1]}")
    st = steady(history)
    assert np.isfinite(history[-1]["loss"])
    return {
        "samples_per_s": st["samples_per_s"],
        "per_epoch_samples_per_s": [e["samples_per_s"] for e in history],
        "steady_epochs": st["epochs_used"],
        "rows": n,
        "final_loss": round(history[-1]["loss"], 5),
        "read_transform_s": round(read_s, 2),
        "threads": threads,
    }
