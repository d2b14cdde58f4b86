"""Training helpers shared by P1, P2 and S1: our Ray Train path, and a bare single-process loop.

Both sides time the phases of their steps the same way (``training.step_profile``: our path
with ``TrainingParams.profile_steps``, the bare loop with a ``StepProfile`` around the same
phases; a few clock reads per step on each side) and say how many threads they really used
(measured inside each Ray Train worker, and in the bare loop's process).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

from benchmarks._common import QuietReporter, fast, log, steady, thread_counts

# The partition day the window ends before (any fixed day works; data is synthetic).
DAY = dt.date(2026, 3, 10)


def window(days: int = 3) -> list[dt.date]:
    return [DAY - dt.timedelta(days=i) for i in range(days, 0, -1)]


def rows_per_day() -> int:
    return 20_000 if fast() else 100_000


def params(num_workers: int, epochs: int, profile: bool = True):
    """Default ``TrainingParams`` (hash_buckets 100k, dim 16, batch 1024/worker, 1 CPU/worker)."""
    from ads_ranking_pipelines.config.training import TrainingParams

    return TrainingParams(num_workers=num_workers, epochs=epochs, max_failures=0, cpus_per_worker=1,
                          profile_steps=profile)


PHASES = ("input_wait", "to_tensors", "batch_allreduce", "forward", "embedding_forward", "backward",
          "grad_allreduce", "optimizer", "other")


def phase_table(history: list[dict[str, Any]], samples_key: str = "samples") -> dict[str, Any]:
    """Per-phase figures of the epochs after the first: mean seconds per epoch and microseconds
    per training sample (the epoch's time, on the rank that measured it, over all samples)."""
    kept = history[1:] if len(history) > 1 else history
    samples = sum(float(e[samples_key]) for e in kept)
    out: dict[str, Any] = {}
    for ph in PHASES:
        vals = [e.get(f"profile_{ph}_s") for e in kept]
        if any(v is None for v in vals) or not kept:
            continue
        total = sum(float(v) for v in vals)
        out[ph] = {"s_per_epoch": round(total / len(kept), 4), "us_per_sample": round(1e6 * total / samples, 3),
                   **_cpu_share([e.get(f"profile_{ph}_cpu_s") for e in kept], total)}
    epoch_s = sum(float(e["epoch_s"]) for e in kept)
    out["epoch"] = {"s_per_epoch": round(epoch_s / max(1, len(kept)), 4),
                    "us_per_sample": round(1e6 * epoch_s / samples, 3) if samples else None,
                    **_cpu_share([e.get("profile_epoch_cpu_s") for e in kept], epoch_s)}
    return out


def _cpu_share(cpu_values: list[Any], wall_total: float) -> dict[str, Any]:
    """The process CPU time of a phase per epoch and its share of the phase's wall time (below
    1: the rank waited, for its peer in a collective or for a core), where the run measured it."""
    if not cpu_values or any(v is None for v in cpu_values):
        return {}
    cpu = sum(float(v) for v in cpu_values)
    return {"cpu_s_per_epoch": round(cpu / len(cpu_values), 4),
            "cpu_share": round(cpu / wall_total, 3) if wall_total > 0 else None}


def params_summary(p) -> dict[str, Any]:
    return {"num_workers": p.num_workers, "cpus_per_worker": p.cpus_per_worker, "epochs": p.epochs,
            "batch_size_per_worker": p.batch_size, "hash_buckets": p.hash_buckets,
            "embedding_dim": p.embedding_dim, "dense_arch": list(p.dense_arch),
            "over_arch": list(p.over_arch), "learning_rate": p.learning_rate}


def run_ours(tmp: str, source, days: list[dt.date], p, tag: str) -> dict[str, Any]:
    """``range_trainer.train_range`` over one day (the pipeline's training path) on the
    already-initialised local Ray; the trainer's own epoch figures, the phase table
    (``profile_steps``) and the threads each worker measured."""
    from ads_ranking_pipelines.contracts.ranges import TrainDay, TrainRangeSpec
    from ads_ranking_pipelines.training.range_trainer import train_range

    spec = TrainRangeSpec(params=p, source=source, ray_storage_uri=os.path.join(tmp, "ray_results"), days=(
        TrainDay(day=days[-1] + dt.timedelta(days=1), train_days=tuple(days), model_version=tag,
                 model_uri=os.path.join(tmp, "models", tag), run_name=f"bench-{tag}"),))
    reporter = QuietReporter()
    t0 = time.perf_counter()
    ((_, result),) = list(train_range(spec, lambda i: reporter))
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
        "epochs_run": len(hist),
        "phases": phase_table(hist) if p.profile_steps else None,
        "threads_per_rank": _threads(hist),
    }
    log(f"ours [{tag}]: {out}")
    return out


def _threads(history: list[dict[str, Any]]) -> Any:
    import json

    for e in reversed(history):
        if e.get("profile_threads"):
            return json.loads(e["profile_threads"])
    return None


def embedding_optimizer_kwargs(p) -> dict[str, float]:
    """Row-wise Adagrad settings of the tables as our path sets them (older params: lr, eps 1e-8)."""
    lr = getattr(p, "effective_embedding_learning_rate", None) or p.learning_rate
    return {"lr": float(lr), "eps": float(getattr(p, "embedding_eps", 1e-8))}


def run_bare(source, days: list[dt.date], p, threads: int, epochs: int | None = None,
             max_seconds: float | None = None, holdout: float = 0.0, keep_model: bool = False) -> dict[str, Any]:
    """One process, no Ray, no sharding, no process group: ``build_model`` unsharded on CPU.

    Same rows, already transformed by ``features.transform``, same batch size per step as one
    of our workers, same optimizers as our path: the embedding tables get TorchRec's fused
    row-wise Adagrad (``fuse_embedding_optimizer``: the same fbgemm kernels DMP uses, updated
    inside backward), the MLPs dense Adam (constant learning rates: a schedule costs nothing
    measurable). ``threads`` intra-op threads. With ``max_seconds``, no epoch after the second
    starts once that much time has passed (a contended machine can make a run 10-50x slower).
    With ``holdout`` (S1: as ``validation_fraction``), the last part of the rows is not trained
    on but scored after every epoch, as our loop validates; ``keep_model`` returns the model
    under ``"model"``.
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
    from ads_ranking_pipelines.training.step_profile import StepProfile
    from ads_ranking_pipelines.training.quiet import quiet_warnings

    quiet_warnings()
    torch.set_num_threads(threads)
    feature_spec = FeatureSpec.from_source(source, p.hash_buckets)
    t0 = time.perf_counter()
    x = transform(read_days(source, days, feature_spec.read_columns), feature_spec)
    read_s = time.perf_counter() - t0
    n_all = len(x["label"])
    n = n_all - int(round(n_all * holdout))
    valid = {k: v[n:] for k, v in x.items()} if n < n_all else None

    model = build_model(p, feature_spec, device=torch.device("cpu"))
    model = fuse_embedding_optimizer(model, RowWiseAdagrad, embedding_optimizer_kwargs(p),
                                     device=torch.device("cpu"))
    dense = [prm for name, prm in model.named_parameters() if not name.startswith("ebc.")]
    dense_opt = torch.optim.Adam(dense, lr=p.learning_rate)
    keys = list(feature_spec.sparse_columns)
    model.train()
    prof = StepProfile(True)
    prof.attach(model)
    phase = prof.phase

    history = []
    started = time.perf_counter()
    for epoch in range(epochs or p.epochs):
        if max_seconds is not None and epoch >= 2 and time.perf_counter() - started > max_seconds:
            log(f"bare ({threads} threads): stopping after {epoch} epochs ({max_seconds:.0f}s budget)")
            break
        prof.take(0.0)
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), dtype=torch.float64)
        seen = steps = 0
        for lo in range(0, n, p.batch_size):
            with phase("input_wait"):
                arrays = {k: v[lo:lo + p.batch_size] for k, v in x.items()}
            with phase("to_tensors"):
                batch = make_batch(arrays, keys)
            with phase("forward"):
                logits = model(batch.dense, batch.sparse)
                loss = F.binary_cross_entropy_with_logits(logits, batch.label)
            with phase("optimizer"):
                dense_opt.zero_grad()
            with phase("backward"):
                loss.backward()              # embedding rows updated here (fused row-wise Adagrad)
            with phase("optimizer"):
                dense_opt.step()             # dense Adam
            loss_sum += loss.detach().double() * batch.size
            seen += batch.size
            steps += 1
        s = time.perf_counter() - t0
        history.append({"epoch": epoch + 1, "samples": seen, "steps": steps, "epoch_s": round(s, 3),
                        "samples_per_s": round(seen / s, 1), "loss": float(loss_sum.item() / seen),
                        **prof.take(s)})
        if valid is not None:
            history[-1]["valid_s"] = _score_rows(model, valid, keys)
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
        "threads_measured": thread_counts(),
        "epochs_run": len(history),
        "train_s": round(sum(e["epoch_s"] for e in history), 3),
        "phases": phase_table(history),
        **({"model": model, "feature_spec": feature_spec} if keep_model else {}),
    }


def _score_rows(model, x: dict[str, Any], keys: list[str], batch: int = 8192) -> float:
    """Seconds to score ``x`` in eval mode (as our loop's validation does), back in train mode."""
    import torch

    from ads_ranking_pipelines.training.batches import make_batch

    t0 = time.perf_counter()
    model.eval()
    with torch.no_grad():
        for lo in range(0, len(x["label"]), batch):
            b = make_batch({k: v[lo:lo + batch] for k, v in x.items()}, keys)
            torch.sigmoid(model(b.dense, b.sparse))
    model.train()
    return round(time.perf_counter() - t0, 3)
