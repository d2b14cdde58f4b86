"""Run a function on a gloo group of spawned processes (torch.multiprocessing), with a timeout.

The ranks meet through a file in a fresh temporary directory (``file://`` init), not a TCP port:
a port picked as free here can be taken by another test process before rank 0 listens on it
(EADDRINUSE under pytest-xdist, seen in CI).
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank: int, world: int, rendezvous: str, fn, args) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world,
                            timeout=dt.timedelta(seconds=90))
    try:
        fn(rank, world, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_on_gloo_group(fn, *args, world: int = 2, timeout_s: float = 240.0) -> None:
    """``fn(rank, world, *args)`` on every rank; raises if any rank fails or time runs out."""
    with tempfile.TemporaryDirectory(prefix="gloo-") as d:
        rendezvous = (Path(d) / "store").as_uri()
        ctx = mp.start_processes(_entry, args=(world, rendezvous, fn, args), nprocs=world,
                                 join=False, start_method="spawn")
        deadline = time.monotonic() + timeout_s
        try:
            while not ctx.join(timeout=1.0):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"gloo group did not finish within {timeout_s}s")
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                    p.join(5)
