"""What the range training driver (``range_trainer.train_range``) uses around Ray Train.

The result of a day (``TrainResult``), the workers' resources and torch config, Ray Train's
environment for one ``fit()``, the cluster's autoscaling coordinator started early, the
progress box's take and the actor placement on the driver's node, an earlier version's weights
put once for warm start, and a day's best checkpoint read back into an unsharded CPU model
(no process group: DCP reassembles the shards into plain tensors) and written as the version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed.checkpoint as dcp

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.export import save_model_version
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.model import DLRM, build_model
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.training import warm_start
from ads_ranking_pipelines.training.plan_summary import format_plan
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training.quiet import quiet_warnings
from ads_ranking_pipelines.training.window import Window

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


def take_from(box: Any) -> Callable[[], list[dict[str, Any]]]:
    """The pump's ``take`` for ``box``."""
    import ray

    return lambda: ray.get(box.take_progress.remote(), timeout=TAKE_TIMEOUT_S)


def on_this_node() -> dict[str, Any]:
    """Actor options that place an actor on this driver's node (hard affinity)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)}


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
