"""A sharding plan as data: ``sharding.ShardedModel.plan_summary`` (table -> sharding type,
ranks, kernel, shards), and the ways it is shown.

Apart from ``sharding`` so that a job driver, which only prints the plan rank 0 reports, does
not import TorchRec (~2 CPU-s per process here; see ``test_imports.py``).
"""

from __future__ import annotations

from typing import Any


def format_plan(summary: dict[str, dict[str, Any]]) -> str:
    """One line per table: ``t_user_id: table_wise on ranks [1] (fused)``."""
    if not summary:
        return "(no sharded tables)"
    width = max(len(t) for t in summary)
    lines = []
    for table, info in summary.items():
        shard_txt = ""
        if len(info["shards"]) > 1:
            shard_txt = " shards " + ", ".join(
                f"r{s['rank']}:{s['sizes'][0]}x{s['sizes'][1]}@{s['offsets'][0]},{s['offsets'][1]}"
                for s in info["shards"])
        lines.append(f"{table:<{width}}  {info['sharding_type']:<12} ranks {info['ranks']} "
                     f"kernel {info['compute_kernel']}{shard_txt}")
    return "\n".join(lines)


def tables_per_rank(summary: dict[str, dict[str, Any]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for table, info in summary.items():
        for r in info["ranks"]:
            out.setdefault(int(r), []).append(table)
    return dict(sorted(out.items()))
