"""The training driver: the window -> Ray Train (TorchRec DMP workers) -> a model version.

``train(spec, reporter)`` runs in the Ray driver (a Ray job's entrypoint, or any process that
can ``ray.init``). It

1. reads the window's parquet days (only the feature/label columns), transforms them to
   ``dense``/``sparse``/``label``, holds out the time-last part for validation, shuffles the
   rest and puts both in this node's object store as one Ray Dataset per worker (``window.py``:
   why in the driver, why per worker; the datasets are already materialized, so the 1-CPU
   workers filling a small cluster never wait for a read task that cannot get a CPU),
2. runs a ``TorchTrainer`` of ``ray_train_worker.train_loop_per_worker`` (checkpoint per epoch; a
   restarted worker group or a re-launched run with the same ``run_name`` resumes from the
   latest checkpoint),
3. forwards live progress records from rank 0 (a ``progress_box.ProgressBox`` actor) to the reporter,
4. loads the final DCP checkpoint into an unsharded CPU model here (no process group: DCP
   reassembles the shards into plain tensors) and writes it to ``spec.model_uri``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed.checkpoint as dcp

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.export import save_model_version
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.model import DLRM, build_model
from ads_ranking_pipelines.training.progress_box import ProgressBox
from ads_ranking_pipelines.training.progress_pump import ProgressPump
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.training import warm_start
from ads_ranking_pipelines.training.plan_summary import format_plan
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training.ray_train_worker import (DATASET_NAME, VALID_DATASET_NAME, shard_name,
                                                              train_loop_per_worker)
from ads_ranking_pipelines.training.checkpoint import read_train_state
from ads_ranking_pipelines.training.selection import SELECTION_METRIC
from ads_ranking_pipelines.training.quiet import quiet_warnings
from ads_ranking_pipelines.training.window import Window, load_window

CHECKPOINTS_TO_KEEP = 2
# Ray Train's controller checks its worker group every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S (2 s by
# default), so the end of training, and every step of the group's start, is noticed up to that
# late. A quarter second costs a few tiny actor calls a second; a missed check is only an error
# after RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S (10 min). Ray Train passes the variable from the
# driver's environment to its controller at ``fit()``; a value set by the user wins.
RAY_TRAIN_ENV_DEFAULTS = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.25"}


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
    best_epoch: int = 0              # the epoch whose checkpoint became the model version
    stopped_early: bool = False      # validation stopped improving before the epoch budget
    valid_logloss: float | None = None
    valid_auc: float | None = None
    train_rows: int = 0
    checkpoint_paths: list[str] = field(default_factory=list)
    worker_restarts: int = 0         # times the worker group was restarted (and resumed) mid-run

    @property
    def sharding_plan_text(self) -> str:
        return format_plan(self.sharding_plan)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def resources(params: TrainingParams) -> dict[str, float]:
    res: dict[str, float] = {"CPU": params.worker_cpus}
    if params.uses_gpu:
        res["GPU"] = float(params.gpus_per_worker)
    return res


@contextlib.contextmanager
def ray_train_env(environ: Any = None) -> Any:
    """``RAY_TRAIN_ENV_DEFAULTS`` set in ``environ`` (``os.environ``) where unset, for one ``fit()``."""
    env = os.environ if environ is None else environ
    added = {k: v for k, v in RAY_TRAIN_ENV_DEFAULTS.items() if k not in env}
    env.update(added)
    try:
        yield
    finally:
        for k in added:
            env.pop(k, None)


def load_unsharded(checkpoint_dir: str, params: TrainingParams, feature_spec: FeatureSpec) -> DLRM:
    """The model of a DCP checkpoint, reassembled into plain CPU tensors in this process, in its
    serving form (plain tables: the same state dict, sparse ids in): the job driver exports
    versions without TorchRec, whose import cost it ~2.5 CPU-s at every job's first export.
    Built on ``meta`` and given uninitialized CPU storage: the checkpoint fills every entry
    (``load_state_dict`` below is strict), so a random init of the tables would be thrown away."""
    quiet_warnings()
    model = build_model(params, feature_spec, device=torch.device("meta"), plain_tables=True)
    model.to_empty(device=torch.device("cpu"))
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=checkpoint_dir, no_dist=True)
    model.load_state_dict(state["model"])
    return model.eval()


def _checkpoint_dirs(run_dir: str) -> list[str]:
    """The run's checkpoint folders (Ray Train names them ``checkpoint_<timestamp>``), oldest first."""
    return [fs.join(run_dir, n) for n in fs.list_dir(run_dir)
            if n.startswith("checkpoint_") and fs.is_dir(fs.join(run_dir, n))]


def check_finished(last_state: dict[str, Any], params: TrainingParams) -> None:
    done = int(last_state["epochs_done"])
    if done != params.epochs and not last_state.get("stopped_early"):
        raise RuntimeError(f"last checkpoint has {done} epoch(s), expected {params.epochs} "
                           "or an early stop")


def warm_start_ref(spec: TrainJobSpec, params: TrainingParams, feature_spec: FeatureSpec,
                   reporter: Reporter) -> Any:
    """The earlier version's weights in the object store, or None (no warm start, or it does not fit)."""
    state = warm_start.weights_for(spec.init_model_uri, params, feature_spec, reporter.log)
    if state is None:
        return None
    import ray

    return ray.put(state)


def best_checkpoint(result: Any, best_epoch: int):
    """The kept checkpoint of epoch ``best_epoch`` (the best validation loss of the run)."""
    for ckpt, metrics in getattr(result, "best_checkpoints", None) or []:
        if int(metrics.get("epoch", -1)) == best_epoch:
            return ckpt
    if result.checkpoint is not None:
        with result.checkpoint.as_directory() as d:
            if int(read_train_state(d)["epochs_done"]) == best_epoch:
                return result.checkpoint
    raise RuntimeError(f"the checkpoint of the best epoch ({best_epoch}) was not kept")


def prepare_window(spec: TrainJobSpec, feature_spec: FeatureSpec, reporter: Reporter) -> Window:
    """The window, read and shuffled in this driver (``window.load_window``), with its figures reported."""
    import ray.data

    t0 = time.perf_counter()
    params = spec.params
    # Each rank reads its own dataset's blocks in the order they were put (every block is on
    # this node), so a seed gives each rank the same rows, in the same order, on any cluster.
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    reporter.log(f"reading {len(spec.train_days)} day(s) of events from {spec.source.uri}")
    window = load_window(spec, feature_spec, with_id_counts=params.min_id_count > 1 or params.count_features)
    reporter.metrics("dataset", {"rows": window.rows, "train_rows": window.train_rows,
                                 "valid_rows": window.rows - window.train_rows, "days": len(spec.train_days),
                                 "read_s": round(time.perf_counter() - t0, 2)})
    return window


def start_train_coordinator() -> None:
    """Start the cluster's ``AutoscalingCoordinator`` actor now, while this driver reads the window.

    Ray Train's controller registers every run's resources with that detached actor before it
    starts the worker group (``TrainAutoscalingCoordinatorClient.send_resource_request``, Ray
    2.60), creating it when the cluster has none, and waits for the answer at most 5 s
    (``AUTOSCALING_REQUESTS_GET_TIMEOUT_S``). On a fresh cluster, as every daily run's is, the
    actor's new worker process was not up in time: each training job waited the whole 5 s and
    logged "Failed to send resource request". Made here with the same (internal) Ray function
    the controller calls, it starts in parallel with the window read; if that function moves in
    a later Ray, nothing is started and the controller makes the actor as before.
    """
    try:
        from ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator import (
            get_or_create_autoscaling_coordinator,
        )
    except ImportError:
        return
    get_or_create_autoscaling_coordinator()


TAKE_TIMEOUT_S = 30.0       # a box that does not answer a take this long is taken as dead


def progress_box() -> Any:
    """A progress box actor on the driver's node (see ``progress_box``)."""
    import ray

    return ray.remote(ProgressBox).options(num_cpus=0, **on_this_node()).remote()


def take_from(box: Any) -> Callable[[], list[dict[str, Any]]]:
    """The pump's ``take`` for ``box``."""
    import ray

    return lambda: ray.get(box.take_progress.remote(), timeout=TAKE_TIMEOUT_S)


def on_this_node() -> dict[str, Any]:
    """Actor options that place an actor on this driver's node (hard affinity)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)}


def _worker_config(params: TrainingParams, feature_spec: FeatureSpec, window: Window, box: Any,
                  extra: dict[str, Any] | None, warm_ref: Any = None) -> dict[str, Any]:
    """The config every worker's ``train_loop_per_worker`` receives (see ``ray_train_worker``)."""
    return {
        "params": params.model_dump(mode="json"),
        "feature_spec": dataclasses.asdict(feature_spec),
        "progress_box": box,
        "progress_every_s": 5.0,
        "steps_per_epoch": steps_per_epoch(window, params),
        "equal_shards": True,
        "has_validation": window.valid is not None,
        "shuffle_buffer": 4 * params.batch_size,
        "id_counts": window.id_counts,
        "warm_start": warm_ref,
        **(extra or {}),
    }


def steps_per_epoch(window: Window, params: TrainingParams) -> int:
    """Batches per rank and epoch: the window is dealt out evenly over the workers
    (window.rank_parts), so every rank has this many and needs no per-step agreement (lockstep)."""
    return max(1, math.ceil((window.train_rows // params.num_workers) / params.batch_size))


# A CPU (gloo) rank that waits this long in one collective has lost a peer (seen: after a worker
# node was killed, the restarted group hung in its first steps for the whole 30 min default):
# the attempt fails and Ray Train restarts the group. NCCL keeps Ray's default.
GLOO_COLLECTIVE_TIMEOUT_S = 300


def torch_config(uses_gpu: bool):
    from ray.train.torch import TorchConfig

    if uses_gpu:
        return TorchConfig(backend="nccl")
    return TorchConfig(backend="gloo", timeout_s=GLOO_COLLECTIVE_TIMEOUT_S)


def _trainer(spec: TrainJobSpec, config: dict[str, Any], window: Window, storage: str):
    from ray.train import CheckpointConfig, DataConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    params = spec.params
    datasets = {shard_name(DATASET_NAME, r): ds for r, ds in enumerate(window.train)}
    datasets.update({shard_name(VALID_DATASET_NAME, r): ds for r, ds in enumerate(window.valid or ())})
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=params.num_workers, use_gpu=params.uses_gpu,
                                     resources_per_worker=resources(params)),
        torch_config=torch_config(params.uses_gpu),
        run_config=RunConfig(
            name=spec.run_name,
            storage_path=storage,
            failure_config=FailureConfig(max_failures=params.max_failures),
            # the best epochs by validation loss, plus (always, for resuming) the latest
            checkpoint_config=CheckpointConfig(num_to_keep=CHECKPOINTS_TO_KEEP,
                                               checkpoint_score_attribute=SELECTION_METRIC,
                                               checkpoint_score_order="min"),
        ),
        datasets=datasets,
        # every dataset is one rank's part already (window.rank_parts): none is split again
        dataset_config=DataConfig(datasets_to_split=[]),
    )


def train(spec: TrainJobSpec, reporter: Reporter, *,
          worker_config: dict[str, Any] | None = None) -> TrainResult:
    """Train ``spec`` and write its model version; see the module docstring.

    ``worker_config`` adds keys to the workers' config (``shuffle_buffer``, ``progress_every_s``,
    ``callbacks``; see ``train_loop``).
    """
    import ray

    t0 = time.perf_counter()
    params = spec.params
    feature_spec = FeatureSpec.from_source(spec.source, params.hash_buckets)
    if not ray.is_initialized():
        ray.init()
    start_train_coordinator()
    window = prepare_window(spec, feature_spec, reporter)
    box = progress_box()
    storage = fs.normalize(spec.ray_storage_uri)
    warm_ref = warm_start_ref(spec, params, feature_spec, reporter)
    trainer = _trainer(spec, _worker_config(params, feature_spec, window, box, worker_config,
                                            warm_ref), window, storage)
    reporter.log(f"training {params.num_workers} worker(s), at most {params.epochs} epoch(s), on "
                 f"{window.train_rows} rows, validating on the last {window.rows - window.train_rows} "
                 f"({'GPU' if params.uses_gpu else 'CPU'}), run {spec.run_name} under {storage}")
    try:
        with ProgressPump(take_from(box), reporter) as pump, ray_train_env():
            result = trainer.fit()
    finally:
        try:
            ray.kill(box)
        except Exception:
            pass
    if result.checkpoint is None:
        raise RuntimeError(f"training run {spec.run_name} finished without a checkpoint")
    out = export_best(spec, feature_spec, result, pump, window, storage, reporter,
                      warm_started=warm_ref is not None)
    out.wall_seconds = round(time.perf_counter() - t0, 2)
    reporter.log(f"model version {spec.model_version} written to {spec.model_uri} "
                 f"(loss {out.final_loss:.5f}, {out.samples_per_s:.0f} samples/s, {out.wall_seconds:.1f}s)")
    return out


def export_best(spec: TrainJobSpec, feature_spec: FeatureSpec, result: Any, pump: ProgressPump,
                window: Window, storage: str, reporter: Reporter, warm_started: bool = False) -> TrainResult:
    """Write the best epoch's checkpoint as the model version; describe the run."""
    params = spec.params
    with result.checkpoint.as_directory() as ckpt_dir:
        last_state = read_train_state(ckpt_dir)
    check_finished(last_state, params)
    checkpoint = best_checkpoint(result, int(last_state.get("best_epoch") or last_state["epochs_done"]))
    with checkpoint.as_directory() as ckpt_dir:
        state = read_train_state(ckpt_dir)
        model = load_unsharded(ckpt_dir, params, feature_spec)
    return write_version(spec, feature_spec, model, last_state, state, str(checkpoint.path),
                         _checkpoint_dirs(fs.join(storage, spec.run_name)), pump.starts, pump.epochs, window,
                         reporter, warm_started)


def write_version(spec: TrainJobSpec, feature_spec: FeatureSpec, model: DLRM, last_state: dict[str, Any],
                  state: dict[str, Any], checkpoint_path: str, checkpoint_paths: list[str],
                  starts: list[dict[str, Any]], epochs: list[dict[str, Any]], window: Window, reporter: Reporter,
                  warm_started: bool) -> TrainResult:
    """Write ``model`` (the best epoch's, whose train state is ``state``) as the version; describe
    the run (``last_state``: its last checkpoint's; ``starts``/``epochs``: the progress records)."""
    params = spec.params
    best = state.get("metrics", {})
    # epochs already done when the first worker group started (a re-launched run), and how
    # often the group was restarted (a lost worker) and resumed from a checkpoint
    restarts = max(0, len(starts) - 1)
    if restarts:
        reporter.log(f"the worker group was restarted {restarts} time(s) and resumed from checkpoints")
    reporter.log(f"trained {last_state['epochs_done']} epoch(s)"
                 + (" (stopped early: validation stopped improving)" if last_state.get("stopped_early") else "")
                 + f"; keeping epoch {state['epochs_done']} (validation logloss "
                 f"{best.get('valid_logloss', float('nan')):.5f}, auc {best.get('valid_auc', float('nan')):.4f})")
    plan = state.get("sharding_plan") or {}
    reporter.log("sharding plan:\n" + format_plan(plan))
    out = TrainResult(
        model_uri=spec.model_uri, model_version=spec.model_version, epochs=int(last_state["epochs_done"]),
        final_loss=float(last_state["loss"]),
        samples_per_s=float(last_state.get("metrics", {}).get("samples_per_s", 0.0)),
        rows=window.rows, checkpoint_path=checkpoint_path, sharding_plan=plan, wall_seconds=0.0,
        resumed_from_epoch=int(starts[0]["epochs_done"]) if starts else 0,
        epoch_history=epochs or [last_state.get("metrics", {})],
        checkpoint_paths=checkpoint_paths, worker_restarts=restarts,
        best_epoch=int(state["epochs_done"]), stopped_early=bool(last_state.get("stopped_early")),
        valid_logloss=best.get("valid_logloss"), valid_auc=best.get("valid_auc"), train_rows=window.train_rows,
    )
    save_model_version(spec.model_uri, model, params, feature_spec, extra_manifest={
        "model_version": spec.model_version, "code_version": spec.code_version, "run_name": spec.run_name,
        "train_days": [d.isoformat() for d in spec.train_days], "source_uri": spec.source.uri,
        "rows": window.rows, "train_rows": window.train_rows, "epochs": out.epochs, "best_epoch": out.best_epoch,
        "valid_logloss": out.valid_logloss, "valid_auc": out.valid_auc, "final_loss": out.final_loss,
        "samples_per_s": out.samples_per_s, "checkpoint_path": out.checkpoint_path, "sharding_plan": plan,
        "warm_started_from": spec.init_model_uri if warm_started else None,
        "cluster": spec.cluster,
        "world_size": state.get("world_size"),
    })
    return out
