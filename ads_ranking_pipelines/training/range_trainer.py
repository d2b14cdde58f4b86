"""The range training driver: a range's days on ONE Ray Train worker group, the window sliding.

``train_range(spec, reporter_for)`` runs in the Ray driver (the range training job). It starts
one ``TorchTrainer.fit()`` of ``ray_train_days.train_days_per_worker`` in a thread and, from
this thread,

1. reads each day's window with a :class:`SlidingWindow` (after the first day: the new day
   only) into per-rank Ray Datasets, as ``window.window_of`` makes them, and hands them to the
   workers through a :class:`DayFeed` actor one day ahead of the day the workers train,
2. forwards the workers' progress records (put in the same ``DayFeed``, which is the run's
   progress box too: one actor, not two) to the day's reporter (``reporter_for(i)``),
3. on each ``day_end`` record from rank 0, writes that day's model version complete (the best
   epoch's checkpoint of the day's run folder, ``trainer.write_version``) and
   yields ``(i, TrainResult)`` while the workers train the next day.

A failure on day k raises after the days before k were yielded (their versions complete).
"""

from __future__ import annotations

import dataclasses
import queue as queue_mod
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.contracts.ranges import TrainRangeSpec
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training import day_checkpoints as ckpts
from ads_ranking_pipelines.training import trainer as single
from ads_ranking_pipelines.training.checkpoint import read_train_state
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.progress_pump import ProgressPump
from ads_ranking_pipelines.training.day_feed import DayFeed
from ads_ranking_pipelines.training.ray_train_days import train_days_per_worker
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.training.sliding_window import SlidingWindow
from ads_ranking_pipelines.training.window import Window

DAY_END_POLL_S = 0.5
FIT_END_GRACE_S = 5.0


class DayRouter:
    """The pump's reporter: a record goes to its day's reporter (``day_index``), logs to day 1's."""

    def __init__(self, reporter_for: Callable[[int], Reporter]) -> None:
        self.reporter_for = reporter_for

    def log(self, message: str) -> None:
        self.reporter_for(0).log(message)

    def metrics(self, kind: str, values: dict[str, Any]) -> None:
        values = dict(values)
        self.reporter_for(int(values.pop("day_index", 0))).metrics(kind, values)


class FitThread(threading.Thread):
    """``trainer.fit()`` in a thread; ``error`` is what it raised."""

    def __init__(self, trainer: Any) -> None:
        super().__init__(name="train-fit", daemon=True)
        self.trainer, self.error = trainer, None

    def run(self) -> None:
        try:
            with single.ray_train_env():
                self.trainer.fit()
        except BaseException as e:       # noqa: BLE001 - re-raised by the driver thread
            self.error = e


def _post(feed: Any, i: int, day: TrainJobSpec, sliding: SlidingWindow, reporter: Reporter) -> Window:
    """Read day ``i``'s window (its new days only) and hand it to the workers."""
    t0 = time.perf_counter()
    window = sliding.advance(day)
    params = day.params
    reporter.metrics("dataset", {"rows": window.rows, "train_rows": window.train_rows,
                                 "valid_rows": window.rows - window.train_rows, "days": len(day.train_days),
                                 "days_read": len(sliding.reads[-1]), "read_s": round(time.perf_counter() - t0, 2)})
    feed.put.remote(i, {"train": window.train, "valid": window.valid, "id_counts": window.id_counts,
                        "steps_per_epoch": single.steps_per_epoch(window, params)})
    return window


def _trainer(spec: TrainRangeSpec, config: dict[str, Any], storage: str):
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    params = spec.params
    return TorchTrainer(
        train_days_per_worker, train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=params.num_workers, use_gpu=params.uses_gpu,
                                     resources_per_worker=single.resources(params)),
        torch_config=single.torch_config(params.uses_gpu),
        # the workers write the days' checkpoints (day_checkpoints); Ray Train keeps none
        run_config=RunConfig(name=f"{spec.days[0].run_name}-days{len(spec.days)}", storage_path=storage,
                             failure_config=FailureConfig(max_failures=params.max_failures)))


def _wait_day_end(pump: ProgressPump, fit: FitThread, i: int, done: set[int]) -> None:
    """Until rank 0 reported day ``i``'s end; the fit's error if it ended without (records still
    on their way through the progress box get ``FIT_END_GRACE_S``)."""
    ended_at = None
    while i not in done:
        try:
            done.add(pump.day_ends.get(timeout=DAY_END_POLL_S))
            continue
        except queue_mod.Empty:
            pass
        if fit.is_alive():
            continue
        ended_at = ended_at or time.monotonic()
        if time.monotonic() - ended_at > FIT_END_GRACE_S:
            raise fit.error or RuntimeError(f"the worker group ended before day {i + 1} of the range was trained")


def export_day(day: TrainJobSpec, feature_spec: FeatureSpec, pump: ProgressPump, i: int, window: Window,
               storage: str, reporter: Reporter, warm_started: bool) -> single.TrainResult:
    """Write day ``i``'s best checkpoint (of its run folder) as its version; describe the day."""
    run_dir = fs.join(storage, day.run_name)
    last = ckpts.latest(run_dir)
    if last is None:
        raise RuntimeError(f"day {day.train_days[-1]}: no checkpoint under {run_dir}")
    single.check_finished(last[1], day.params)
    best_dir = ckpts.epoch_dir(run_dir, int(last[1].get("best_epoch") or last[1]["epochs_done"]))
    with tempfile.TemporaryDirectory(prefix="dlrm-export-") as local:
        ckpts.download(best_dir, local)
        state, model = read_train_state(local), single.load_unsharded(local, day.params, feature_spec)
    mine = [r for r in pump.starts if r.get("day_index") == i]
    epochs = [r for r in pump.epochs if r.get("day_index") == i]
    return single.write_version(day, feature_spec, model, last[1], state, best_dir, ckpts.complete(run_dir),
                                mine, epochs, window, reporter, warm_started)


def _config(spec: TrainRangeSpec, feature_spec: FeatureSpec, storage: str, feed: Any,
            warm_ref: Any, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {"params": spec.params.model_dump(mode="json"), "feature_spec": dataclasses.asdict(feature_spec),
            "progress_box": feed, "progress_every_s": 5.0, "shuffle_buffer": 4 * spec.params.batch_size,
            "days": [{"run_dir": fs.join(storage, d.run_name), "model_uri": d.model_uri} for d in spec.days],
            "feed": feed, "warm_start": warm_ref, "warm_start_days": spec.warm_start, **(extra or {})}


def sliding_window(params: TrainingParams, feature_spec: FeatureSpec) -> SlidingWindow:
    """The range's windows, read in this driver: every block on this node, so a lost worker node
    loses none (``window.py``). Each rank reads its dataset's blocks in the order they were put,
    so a seed gives each rank the same rows in the same order on any cluster."""
    import ray.data

    ray.data.DataContext.get_current().execution_options.preserve_order = True
    return SlidingWindow(feature_spec, with_id_counts=params.min_id_count > 1 or params.count_features)


def train_range(spec: TrainRangeSpec, reporter_for: Callable[[int], Reporter], *,
                worker_config: dict[str, Any] | None = None) -> Iterator[tuple[int, single.TrainResult]]:
    """Train the range's days on one worker group; yields each day's result as its version is
    written (see the module docstring). ``worker_config`` adds keys to the workers' config."""
    import ray

    params, n = spec.params, len(spec.days)
    days = [spec.day_spec(i) for i in range(n)]
    feature_spec = FeatureSpec.from_source(spec.source, params.hash_buckets)
    if not ray.is_initialized():
        ray.init()
    single.start_train_coordinator()
    storage = fs.normalize(spec.ray_storage_uri)
    sliding = sliding_window(params, feature_spec)
    feed = ray.remote(DayFeed).options(num_cpus=0, **single.on_this_node()).remote()
    t0 = time.perf_counter()
    windows = {0: _post(feed, 0, days[0], sliding, reporter_for(0))}
    warm_ref = single.warm_start_ref(days[0], params, feature_spec, reporter_for(0))
    fit = FitThread(_trainer(spec, _config(spec, feature_spec, storage, feed, warm_ref, worker_config),
                             storage))
    reporter_for(0).log(f"training {params.num_workers} worker(s), at most {params.epochs} epoch(s) a day, "
                        f"{n} day(s) on one worker group ({'GPU' if params.uses_gpu else 'CPU'}), "
                        f"checkpoints under {storage}")
    done: set[int] = set()
    try:
        with ProgressPump(single.take_from(feed), DayRouter(reporter_for)) as pump:
            fit.start()
            for i in range(n):
                if i + 1 < n:        # the next day's window is read while this day trains
                    windows[i + 1] = _post(feed, i + 1, days[i + 1], sliding, reporter_for(i + 1))
                _wait_day_end(pump, fit, i, done)
                out = export_day(days[i], feature_spec, pump, i, windows.pop(i), storage, reporter_for(i),
                                 warm_started=(warm_ref is not None) if i == 0 else spec.warm_start)
                feed.drop.remote(i)
                out.wall_seconds, t0 = round(time.perf_counter() - t0, 2), time.perf_counter()
                reporter_for(i).log(f"model version {days[i].model_version} written to {days[i].model_uri} "
                                    f"(loss {out.final_loss:.5f}, {out.samples_per_s:.0f} samples/s, "
                                    f"{out.wall_seconds:.1f}s; worker-group starts so far: {pump.group_starts})")
                yield i, out
            fit.join()
            if fit.error is not None:
                raise fit.error
    finally:
        try:
            ray.kill(feed)
        except Exception:
            pass
