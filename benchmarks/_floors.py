"""Lower bounds measured on this machine, beside the figures they bound.

``collective_floor`` (P1): the gloo collectives one step of our sharded training cannot do
without, timed alone between ``world`` processes of one torch thread each, with the step's
tensor sizes: the KJT input distribution (an all-to-all of the splits, of the lengths and of
the ids), the pooled embeddings' all-to-all forward and its gradients' backward, and DDP's
averaging of the dense gradients (gathered and summed, as ``training.grad_sync`` does on a small
gloo group). TorchRec may make more; compute is not included, so the
sum per sample is what sharding over ``world`` processes adds at the least.

``import_floor`` (P3): CPU-seconds a fresh interpreter spends importing what a scoring worker
imports before it scores a row (Ray, Ray Data, whose map task it runs, and the model export
path, which brings torch); (P4) what a job driver imports to do its work.
"""

from __future__ import annotations

import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any


def step_tensors(batch_per_rank: int, tables: int, pooled_width: int, dense_params: int,
                 world: int) -> dict[str, Any]:
    """(kind, dtype, elements) of each collective one training step makes, per rank: one id
    per table and row, ``pooled_width`` floats of pooled embeddings per row (the tables' dims)."""
    return {
        "a2a_splits": ("a2a", "int64", world),
        "a2a_lengths": ("a2a", "int64", batch_per_rank * tables),
        "a2a_ids": ("a2a", "int64", batch_per_rank * tables),
        "a2a_pooled_forward": ("a2a", "float32", batch_per_rank * pooled_width),
        "a2a_pooled_backward": ("a2a", "float32", batch_per_rank * pooled_width),
        # DDP's averaging as training.grad_sync does it on 2 gloo ranks: gathered, then summed
        "gather_dense_grads": ("allgather", "float32", dense_params),
    }


def model_shape(model: Any) -> dict[str, int]:
    """Tables, pooled width (sum of the tables' dims) and dense parameters of a built model."""
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    ebcs = [m for m in model.modules() if isinstance(m, EmbeddingBagCollection)]
    configs = [c for m in ebcs for c in m.embedding_bag_configs()]
    sparse = {id(q) for m in ebcs for q in m.parameters()}
    return {"tables": len(configs), "pooled_width": sum(c.embedding_dim for c in configs),
            "dense_params": sum(q.numel() for q in model.parameters() if id(q) not in sparse)}


def _rank(rank: int, world: int, rendezvous: str, tensors: dict[str, Any], repeats: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    ms: dict[str, float] = {}
    for name, (kind, dtype, n) in tensors.items():
        n = max(world, n - n % world)
        src = torch.ones(n, dtype=getattr(torch, dtype))
        if kind == "a2a":
            dst = torch.empty_like(src)
            op = lambda: dist.all_to_all_single(dst, src)  # noqa: E731
        else:                                               # "allgather": gathered, then summed
            gathered = torch.empty(world * n, dtype=src.dtype)
            op = lambda: dist.all_gather_into_tensor(gathered, src) or gathered.view(world, -1).sum(0)  # noqa: E731
        for _ in range(10):
            op()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(repeats):
            op()
        ms[name] = round((time.perf_counter() - t0) / repeats * 1e3, 3)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(ms, f)
    dist.destroy_process_group()


def collective_floor(batch_per_rank: int, tables: int, pooled_width: int, dense_params: int, world: int = 2,
                     repeats: int = 200) -> dict[str, Any]:
    """Milliseconds per collective of one step, and their sum per training sample (us)."""
    import torch.multiprocessing as mp

    tensors = step_tensors(batch_per_rank, tables, pooled_width, dense_params, world)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "floor.json")
        mp.spawn(_rank, args=(world, pathlib.Path(d, "store").as_uri(), tensors, repeats, out), nprocs=world)
        with open(out) as f:
            ms = json.load(f)
    step_ms = sum(ms.values())
    return {"ms_per_collective": ms, "step_ms": round(step_ms, 3),
            "us_per_sample": round(step_ms * 1e3 / (world * batch_per_rank), 3),
            "world": world, "batch_per_rank": batch_per_rank, "threads_per_process": 1,
            "sizes": {k: v[2] for k, v in tensors.items()}}


def import_floor(statement: str, repeats: int = 3) -> dict[str, Any]:
    """CPU-seconds (user + system) of a fresh interpreter running ``statement``: min and mean."""
    cpu = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", statement], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {"statement": statement, "cpu_s_min": round(min(cpu), 3), "cpu_s_mean": round(sum(cpu) / len(cpu), 3)}
