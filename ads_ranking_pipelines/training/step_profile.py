"""Where a training step's time goes: per-phase seconds, on when ``TrainingParams.profile_steps``.

Each rank adds ``time.perf_counter`` differences around the phases the loop already has; an
epoch's figures (rank 0's, like ``epoch_s``) go into its metrics as ``profile_<phase>_s``, so
they reach the epoch records, the Dagster observations and the job's result
(``TrainResult.epoch_history``). Off, every phase is a shared no-op context (no clock reads,
no hooks).

Phases (summed over the epoch's steps):

``input_wait``       waiting for the next batch from the input iterator (Ray Data shard)
``to_tensors``       numpy batch -> tensors / KeyedJaggedTensor (``batches.make_batch``)
``batch_allreduce``  the per-step "every rank still has a batch" all-reduce (includes waiting
                     for the slower rank)
``forward``          the model's forward and the loss
``embedding_forward``  part of ``forward``: the sharded embedding collection, from its input
                     all-to-all to the end of its output all-to-all (a forward pre-hook, and a
                     callback on the awaitable it returns)
``backward``         ``loss.backward()``: dense and embedding backward, the embedding gradient
                     all-to-all, the fused row-wise Adagrad update, DDP's gradient averaging
``grad_allreduce``   part of ``backward``: DDP's averaging of the dense gradients over the ranks,
                     from launch to completion per bucket (``training.grad_sync``'s comm hook:
                     gathered and summed on a small gloo group, all-reduced otherwise)
``optimizer``        learning-rate update, ``zero_grad`` and the dense Adam step

``profile_other_s`` is the epoch time left over (progress records, loss bookkeeping, the
epoch-end all-reduce).

Beside each phase's wall time, ``profile_<phase>_cpu_s`` is the CPU time the whole worker
process (every thread: torch, gloo, Ray's) used during it (``time.process_time``), and
``profile_epoch_cpu_s`` the process's CPU time over the epoch: where a phase's CPU time falls
short of its wall time, the rank was waiting (for its peer in a collective, a transfer, or the
OS giving it a core), not computing. ``profile_threads`` is each rank's torch intra-op / inter-op thread
counts and the OpenMP/BLAS pools threadpoolctl sees, as measured inside the worker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

PHASES = ("input_wait", "to_tensors", "batch_allreduce", "forward", "embedding_forward", "backward",
          "grad_allreduce", "optimizer")
_OFF = contextlib.nullcontext()


class StepProfile:
    """Cumulative seconds per phase (see the module docstring); ``enabled=False`` costs nothing."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = bool(enabled)
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.cpu = dict.fromkeys(PHASES, 0.0)
        self._embedding_start = (0.0, 0.0)
        self._epoch_cpu_start = time.process_time()

    def phase(self, name: str) -> contextlib.AbstractContextManager[Any]:
        return self._timed(name) if self.enabled else _OFF

    @contextlib.contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0, time.process_time() - c0)

    def add(self, name: str, seconds: float, cpu_seconds: float = 0.0) -> None:
        self.seconds[name] += seconds
        self.cpu[name] += cpu_seconds

    def take(self, epoch_s: float) -> dict[str, Any]:
        """This epoch's figures as metrics (``profile_<phase>_s``), then start from zero."""
        if not self.enabled:
            return {}
        out = {f"profile_{k}_s": round(v, 4) for k, v in self.seconds.items()}
        top = ("input_wait", "to_tensors", "batch_allreduce", "forward", "backward", "optimizer")
        out["profile_other_s"] = round(max(0.0, epoch_s - sum(self.seconds[k] for k in top)), 4)
        out.update({f"profile_{k}_cpu_s": round(v, 4) for k, v in self.cpu.items()})
        now = time.process_time()
        out["profile_epoch_cpu_s"] = round(now - self._epoch_cpu_start, 4)
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.cpu = dict.fromkeys(PHASES, 0.0)
        self._epoch_cpu_start = now
        return out

    # ---- hooks into the sharded model -------------------------------------------------------

    def attach(self, model: nn.Module) -> None:
        """Time the (sharded) embedding collection of ``model`` (DDP's gradient averaging is
        timed by wrapping its hook: :meth:`timed_hook`)."""
        if not self.enabled:
            return
        for module in model.modules():    # the outermost one: DMP's sharded collection, or a plain one
            if "EmbeddingBagCollection" in type(module).__name__:
                module.register_forward_pre_hook(self._embedding_pre)
                module.register_forward_hook(self._embedding_post)
                break

    def _embedding_pre(self, module: nn.Module, args: Any) -> None:
        self._embedding_start = (time.perf_counter(), time.process_time())

    def _embedding_post(self, module: nn.Module, args: Any, output: Any) -> Any:
        start, cpu_start = self._embedding_start

        def done(result: Any) -> Any:
            self.add("embedding_forward", time.perf_counter() - start, time.process_time() - cpu_start)
            return result

        callbacks = getattr(output, "callbacks", None)
        if isinstance(callbacks, list):      # a torchrec Awaitable: its wait() ends the all-to-all
            callbacks.append(done)
        else:
            done(None)
        return None

    def timed_hook(self, hook: Any) -> Any:
        """DDP comm ``hook`` (``training.grad_sync``), timed from launch to done as ``grad_allreduce``."""

        def timed(process_group, bucket):  # no annotations: DDP checks them
            t0, c0 = time.perf_counter(), time.process_time()

            def done(fut):
                self.add("grad_allreduce", time.perf_counter() - t0, time.process_time() - c0)
                return fut.value()

            return hook(process_group, bucket).then(done)

        return timed


def thread_counts() -> dict[str, Any]:
    """Threads this process really uses: torch's intra-/inter-op pools and threadpoolctl's view."""
    out: dict[str, Any] = {"torch": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads()}
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            key = f"{pool.get('internal_api')}:{pool.get('prefix')}"
            out[key] = max(int(pool.get("num_threads") or 0), int(out.get(key) or 0))
    except Exception:  # threadpoolctl missing or a library it cannot inspect: torch's figures stay
        pass
    return out
