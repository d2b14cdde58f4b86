"""Run a function on a 2-process gloo group (torch.multiprocessing spawn), with a timeout."""

from __future__ import annotations

import datetime as dt
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, world: int, port: int, fn, args) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=dt.timedelta(seconds=90))
    try:
        fn(rank, world, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_on_gloo_group(fn, *args, world: int = 2, timeout_s: float = 240.0) -> None:
    """``fn(rank, world, *args)`` on every rank; raises if any rank fails or time runs out."""
    ctx = mp.start_processes(_entry, args=(world, free_port(), fn, args), nprocs=world,
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
