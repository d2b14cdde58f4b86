"""Run a function on a gloo group of spawned processes (torch.multiprocessing), with a timeout.

The rank processes are started once per test process and kept for the next call (each imports
torch and TorchRec, ~4 CPU-seconds a process on the 2-core machine: paid once, not per test).
Every call is a new process group; each rank's torch generator starts where the process's did,
numpy's and ``random``'s are seeded afresh. A call that fails or times out stops the processes;
the next one starts new ones.

The ranks meet through a file in a fresh temporary directory (``file://`` init), not a TCP port:
a port picked as free here can be taken by another test process before rank 0 listens on it
(EADDRINUSE under pytest-xdist, seen in CI).
"""

from __future__ import annotations

import atexit
import datetime as dt
import queue
import random
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ERROR_GRACE_S = 5.0   # how long the other ranks may take to answer once one has failed


def _call(rank: int, world: int, rendezvous: str, fn, args) -> None:
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world,
                            timeout=dt.timedelta(seconds=90))
    try:
        fn(rank, world, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _serve(rank: int, world: int, tasks, results) -> None:
    """A rank's loop: run each task the parent sends, answer None or the traceback."""
    torch.set_num_threads(1)
    torch_seed = torch.initial_seed()
    while (task := tasks.get()) is not None:
        rendezvous, fn, args = task
        torch.manual_seed(torch_seed)          # as in a fresh process
        np.random.seed()
        random.seed()
        try:
            _call(rank, world, rendezvous, fn, args)
            results.put((rank, None))
        except BaseException:
            results.put((rank, traceback.format_exc()))


class GlooGroup:
    """``world`` rank processes that run one function at a time as a gloo group."""

    def __init__(self, world: int) -> None:
        ctx = mp.get_context("spawn")
        self.world = world
        self.tasks = [ctx.Queue() for _ in range(world)]
        self.results = ctx.Queue()
        self.procs = [ctx.Process(target=_serve, args=(r, world, self.tasks[r], self.results), daemon=True,
                                  name=f"gloo-rank-{r}") for r in range(world)]
        for p in self.procs:
            p.start()

    def run(self, fn, args: tuple, timeout_s: float) -> None:
        with tempfile.TemporaryDirectory(prefix="gloo-") as d:
            rendezvous = (Path(d) / "store").as_uri()
            for q in self.tasks:
                q.put((rendezvous, fn, args))
            errors = self._answers(time.monotonic() + timeout_s)
        if errors:
            raise RuntimeError("\n".join(f"rank {r} failed:\n{tb}" for r, tb in sorted(errors.items())))

    def _answers(self, deadline: float) -> dict[int, str]:
        errors: dict[int, str] = {}
        answered = 0
        while answered < self.world:
            try:
                rank, tb = self.results.get(timeout=1.0)
            except queue.Empty:
                if dead := [p.name for p in self.procs if not p.is_alive()]:
                    raise RuntimeError(f"gloo rank process(es) {dead} exited") from None
                if time.monotonic() > deadline:
                    if errors:
                        break
                    raise TimeoutError("gloo group did not finish in time") from None
                continue
            answered += 1
            if tb is not None:
                errors[rank] = tb
                # the others may be stuck in a collective with the failed rank: wait a little for
                # their own errors, then the caller stops the group (as a failed spawn did)
                deadline = min(deadline, time.monotonic() + ERROR_GRACE_S)
        return errors

    def close(self, *, kill: bool = False) -> None:
        for q in self.tasks:
            q.put(None)
        for p in self.procs:
            p.join(0 if kill else 5)
            if p.is_alive():
                p.kill()
                p.join(5)


_groups: dict[int, GlooGroup] = {}


def _close_all() -> None:
    while _groups:
        _groups.popitem()[1].close()


atexit.register(_close_all)


def run_on_gloo_group(fn, *args, world: int = 2, timeout_s: float = 240.0) -> None:
    """``fn(rank, world, *args)`` on every rank; raises if any rank fails or time runs out.
    ``fn`` must be importable by name (the ranks are spawned processes)."""
    group = _groups.get(world)
    if group is None:
        group = _groups[world] = GlooGroup(world)
    try:
        group.run(fn, args, timeout_s)
    except BaseException:
        del _groups[world]           # a rank may still be stuck in a collective: start afresh
        group.close(kill=True)
        raise
