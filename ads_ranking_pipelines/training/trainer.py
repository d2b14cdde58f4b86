"""The training driver: Ray Data window -> Ray Train (TorchRec DMP workers) -> a model version.

``train(spec, reporter)`` runs in the Ray driver (a Ray job's entrypoint, or any process that
can ``ray.init``). It

1. reads the window's parquet days (``day_uri(spec.source.uri, d)`` for ``d in spec.train_days``),
   only the feature/label columns, and transforms them to ``dense``/``sparse``/``label`` columns,
2. materializes the dataset (with 1-CPU workers filling a small cluster, streaming reads would
   never get a CPU and training would hang),
3. runs a ``TorchTrainer`` of ``train_loop.train_loop_per_worker`` (checkpoint per epoch; a
   restarted worker group or a re-launched run with the same ``run_name`` resumes from the
   latest checkpoint),
4. forwards live progress records from rank 0 (a ``ray.util.queue.Queue``) to the reporter,
5. loads the final DCP checkpoint into an unsharded CPU model here (no process group: DCP
   reassembles the shards into plain tensors) and writes it to ``spec.model_uri``.
"""

from __future__ import annotations

import dataclasses
import math
import queue as queue_mod
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed.checkpoint as dcp

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import day_uri
from ads_ranking_pipelines.training.export import save_model_version
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.training.model import DLRM, build_model
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.training import warm_start
from ads_ranking_pipelines.training.sharding import format_plan
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training.train_loop import (
    DATASET_NAME,
    quiet_warnings,
    read_train_state,
    train_loop_per_worker,
)

CHECKPOINTS_TO_KEEP = 2


@dataclass
class TrainResult:
    model_uri: str
    model_version: str
    epochs: int                      # epochs completed (including any resumed from a checkpoint)
    final_loss: float                # mean training loss of the last epoch
    samples_per_s: float             # of the last epoch, all workers together
    rows: int                        # rows in the training window
    checkpoint_path: str             # the last Ray Train checkpoint (DCP)
    sharding_plan: dict[str, Any]    # table -> {sharding_type, ranks, shards, ...}
    wall_seconds: float
    resumed_from_epoch: int = 0      # epochs already done when this run started (0: fresh)
    epoch_history: list[dict[str, Any]] = field(default_factory=list)
    checkpoint_paths: list[str] = field(default_factory=list)
    worker_restarts: int = 0         # times the worker group was restarted (and resumed) mid-run

    @property
    def sharding_plan_text(self) -> str:
        return format_plan(self.sharding_plan)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _transform_batch(batch: Any, spec: FeatureSpec) -> dict[str, Any]:
    return transform(batch, spec)


def read_window(spec: TrainJobSpec, feature_spec: FeatureSpec):
    """The training window as a Ray Dataset of ``dense``/``sparse``/``label`` (not yet materialized)."""
    import ray.data

    if not spec.train_days:
        raise ValueError("train_days is empty")
    if not spec.source.uri:
        raise ValueError("spec.source.uri must be resolved before training")
    days = [day_uri(spec.source.uri, d) for d in spec.train_days]
    missing = [u for u in days if not fs.is_dir(u)]
    if missing:
        raise FileNotFoundError(f"training window has no events for {len(missing)} day(s): {missing}")
    ds = ray.data.read_parquet(days, columns=feature_spec.read_columns, partitioning=None)
    return ds.map_batches(_transform_batch, fn_kwargs={"spec": feature_spec}, batch_format="pyarrow")


def on_driver_node(ds):
    """Re-home a materialized dataset's blocks in this (the driver's) node's object store.

    Read tasks leave blocks on whichever worker node ran them. If that node is lost, Ray would
    rebuild the blocks by re-running the read tasks — which need a CPU that the restarted
    training workers hold, so the resumed run would wait forever. Blocks owned and stored by
    the driver live exactly as long as the job does.
    """
    import ray
    import ray.data

    return ray.data.from_arrow(ray.get(ds.to_arrow_refs()))


def _resources(params: TrainingParams) -> dict[str, float]:
    res: dict[str, float] = {"CPU": params.worker_cpus}
    if params.uses_gpu:
        res["GPU"] = float(params.gpus_per_worker)
    return res


class _ProgressPump:
    """Drains the workers' progress queue into the reporter from a background thread."""

    def __init__(self, q: Any, reporter: Reporter) -> None:
        self.q = q
        self.reporter = reporter
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.epochs: list[dict[str, Any]] = []
        self.starts: list[dict[str, Any]] = []
        self.plan: str | None = None
        self.thread = threading.Thread(target=self._run, name="train-progress", daemon=True)

    def __enter__(self) -> "_ProgressPump":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self._drain_all()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                record = self.q.get(block=True, timeout=0.5)
            except queue_mod.Empty:
                continue
            except Exception:            # the queue actor died: nothing more will come
                if self.stop.wait(0.5):
                    return
                continue
            self._handle(record)

    def _drain_all(self) -> None:
        try:
            while not self.q.empty():
                self._handle(self.q.get_nowait())
        except Exception:
            pass

    def _handle(self, record: dict[str, Any]) -> None:
        record = dict(record)
        kind = str(record.pop("kind", "progress"))
        with self.lock:
            try:
                if kind == "sharding_plan":
                    self.plan = record.get("plan")
                    return
                if kind == "epoch":
                    self.epochs.append(record)
                if kind == "started":
                    self.starts.append(record)
                    if record.get("resumed"):
                        self.reporter.log(f"workers resumed from a checkpoint with "
                                          f"{record.get('epochs_done')} epoch(s) done")
                values = {k: v for k, v in record.items() if isinstance(v, (int, float, str, bool))}
                self.reporter.metrics(kind, values)
            except Exception as e:       # a broken reporter must not kill the driver
                print(f"progress reporter failed: {e!r}", flush=True)


def load_unsharded(checkpoint_dir: str, params: TrainingParams, feature_spec: FeatureSpec) -> DLRM:
    """The model of a DCP checkpoint, reassembled into plain CPU tensors in this process."""
    quiet_warnings()
    model = build_model(params, feature_spec, device=torch.device("cpu"))
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=checkpoint_dir, no_dist=True)
    model.load_state_dict(state["model"])
    return model.eval()


def _checkpoint_dirs(run_dir: str) -> list[str]:
    """The run's checkpoint folders (Ray Train names them ``checkpoint_<timestamp>``), oldest first."""
    return [fs.join(run_dir, n) for n in fs.list_dir(run_dir)
            if n.startswith("checkpoint_") and fs.is_dir(fs.join(run_dir, n))]


def _warm_start_ref(spec: TrainJobSpec, params: TrainingParams, feature_spec: FeatureSpec,
                    reporter: Reporter) -> Any:
    """The earlier version's weights in the object store, or None (no warm start, or it does not fit)."""
    if not spec.init_model_uri:
        return None
    import ray

    state = warm_start.read_weights(spec.init_model_uri)
    why = warm_start.incompatibility(state, build_model(params, feature_spec, device=torch.device("meta")))
    if why:
        reporter.log(f"warm start from {spec.init_model_uri} skipped, training from scratch: {why}")
        return None
    reporter.log(f"warm start from {spec.init_model_uri}")
    return ray.put(state)


def train(spec: TrainJobSpec, reporter: Reporter, *,
          worker_config: dict[str, Any] | None = None) -> TrainResult:
    """Train ``spec`` and write its model version; see the module docstring.

    ``worker_config`` adds keys to the workers' config (``shuffle_buffer``, ``progress_every_s``,
    and for tests ``crash_once``; see ``train_loop``).
    """
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.util.queue import Queue

    t0 = time.perf_counter()
    params = spec.params
    feature_spec = FeatureSpec.from_source(spec.source, params.hash_buckets)
    if not ray.is_initialized():
        ray.init()

    reporter.log(f"reading {len(spec.train_days)} day(s) of events from {spec.source.uri}")
    ds = on_driver_node(read_window(spec, feature_spec).materialize())
    rows = ds.count()
    if rows == 0:
        raise ValueError(f"the training window {[d.isoformat() for d in spec.train_days]} has no rows")
    reporter.metrics("dataset", {"rows": rows, "days": len(spec.train_days),
                                 "read_s": round(time.perf_counter() - t0, 2)})

    # The queue lives on the driver's node: a lost worker node must not take the progress
    # records (and the restart count derived from them) with it.
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    progress_q = Queue(maxsize=10_000, actor_options={
        "num_cpus": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False),
    })
    warm_ref = _warm_start_ref(spec, params, feature_spec, reporter)
    config = {
        "warm_start": warm_ref,
        "params": params.model_dump(mode="json"),
        "feature_spec": dataclasses.asdict(feature_spec),
        "progress_queue": progress_q,
        "progress_every_s": 5.0,
        # Ray Train splits the dataset evenly over the workers (streaming_split, equal=True)
        "steps_per_epoch": max(1, math.ceil((rows // params.num_workers) / params.batch_size)),
        **(worker_config or {}),
    }
    storage = fs.normalize(spec.ray_storage_uri)
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=params.num_workers, use_gpu=params.uses_gpu,
                                     resources_per_worker=_resources(params)),
        torch_config=TorchConfig(backend="nccl" if params.uses_gpu else "gloo"),
        run_config=RunConfig(
            name=spec.run_name,
            storage_path=storage,
            failure_config=FailureConfig(max_failures=params.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=CHECKPOINTS_TO_KEEP),
        ),
        datasets={DATASET_NAME: ds},
    )
    reporter.log(f"training {params.num_workers} worker(s) x {params.epochs} epoch(s) on {rows} rows "
                 f"({'GPU' if params.uses_gpu else 'CPU'}), run {spec.run_name} under {storage}")
    try:
        with _ProgressPump(progress_q, reporter) as pump:
            result = trainer.fit()
    finally:
        try:
            progress_q.shutdown()
        except Exception:
            pass
    if result.checkpoint is None:
        raise RuntimeError(f"training run {spec.run_name} finished without a checkpoint")

    checkpoint = result.checkpoint
    with checkpoint.as_directory() as ckpt_dir:
        state = read_train_state(ckpt_dir)
        model = load_unsharded(ckpt_dir, params, feature_spec)
    epochs_done = int(state["epochs_done"])
    if epochs_done != params.epochs:
        raise RuntimeError(f"last checkpoint has {epochs_done} epoch(s), expected {params.epochs}")
    last = state.get("metrics", {})
    history = pump.epochs or [last]
    # epochs already done when the first worker group started (a re-launched run), and how
    # often the group was restarted (a lost worker) and resumed from a checkpoint
    resumed_from = int(pump.starts[0]["epochs_done"]) if pump.starts else 0
    restarts = max(0, len(pump.starts) - 1)
    if restarts:
        reporter.log(f"the worker group was restarted {restarts} time(s) and resumed from checkpoints")
    plan = state.get("sharding_plan") or {}
    reporter.log("sharding plan:\n" + format_plan(plan))

    run_dir = fs.join(storage, spec.run_name)
    result_obj = TrainResult(
        model_uri=spec.model_uri,
        model_version=spec.model_version,
        epochs=epochs_done,
        final_loss=float(state["loss"]),
        samples_per_s=float(last.get("samples_per_s", 0.0)),
        rows=rows,
        checkpoint_path=str(checkpoint.path),
        sharding_plan=plan,
        wall_seconds=0.0,
        resumed_from_epoch=resumed_from,
        epoch_history=history,
        checkpoint_paths=_checkpoint_dirs(run_dir),
        worker_restarts=restarts,
    )
    save_model_version(spec.model_uri, model, params, feature_spec, extra_manifest={
        "model_version": spec.model_version,
        "code_version": spec.code_version,
        "warm_started_from": spec.init_model_uri if warm_ref is not None else None,
        "cluster": spec.cluster,
        "run_name": spec.run_name,
        "train_days": [d.isoformat() for d in spec.train_days],
        "source_uri": spec.source.uri,
        "rows": rows,
        "epochs": epochs_done,
        "final_loss": result_obj.final_loss,
        "samples_per_s": result_obj.samples_per_s,
        "checkpoint_path": result_obj.checkpoint_path,
        "sharding_plan": plan,
        "world_size": state.get("world_size"),
    })
    result_obj.wall_seconds = round(time.perf_counter() - t0, 2)
    reporter.log(f"model version {spec.model_version} written to {spec.model_uri} "
                 f"(loss {result_obj.final_loss:.5f}, {result_obj.samples_per_s:.0f} samples/s, "
                 f"{result_obj.wall_seconds:.1f}s)")
    return result_obj
