"""Where a Ray Data pipeline spent its time, from the executed dataset's own statistics.

Ray Data times every task of every operator and splits a map task's transform into turning
input blocks into batches (``input_prep``), the functions themselves (``function_body``) and
assembling output blocks (``output_build``). :func:`stage_seconds` sums them per operator of
an executed dataset (``get_stats_summary``; cheap: the figures already exist) into the phases
of a read -> map -> write pipeline:

``read_s``     task time of the listing and parquet-reading operators
``convert_s``  map operators' input_prep + output_build (Arrow blocks <-> the batch format)
``map_s``      map operators' function_body (the user function: for scoring, the feature
               transform and the forward pass)
``write_s``    task time of the write operator
``tasks_s``    task time of all operators together (on N CPUs, at most N x the wall time; what
               is left is scheduling, worker start and waiting)

Each key sums task time over blocks (CPU-seconds on the cluster), not wall time. An operator
that Ray fused from several (its name joins them with ``->``) counts under its first part's
phase, except that a fused map's batch conversion still counts as ``convert_s``.
"""

from __future__ import annotations

from typing import Any


def _sum(stat: Any) -> float:
    return float(getattr(stat, "sum", 0.0) or 0.0) if stat is not None else 0.0


def _operators(summary: Any) -> list[Any]:
    out, todo, seen = [], [summary], set()
    while todo:
        s = todo.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        out.extend(getattr(s, "operators_stats", None) or [])
        todo.extend(getattr(s, "parents", None) or [])
    return out


def stage_seconds(ds: Any) -> dict[str, float]:
    """Phase seconds (see the module docstring) of an executed dataset; {} if Ray cannot say."""
    try:
        ops = _operators(ds.get_stats_summary())
    except Exception:  # statistics are a developer API: never fail the job over them
        return {}
    out = dict.fromkeys(("read_s", "convert_s", "map_s", "write_s", "tasks_s"), 0.0)
    for op in ops:
        name = str(op.operator_name)
        task = _sum(op.wall_time)
        out["tasks_s"] += task
        convert = _sum(op.input_prep_time) + _sum(op.output_build_time) if "MapBatches" in name else 0.0
        out["convert_s"] += convert
        if name.startswith(("ListFiles", "Read")):
            out["read_s"] += task - convert
        elif name.startswith("Write"):
            out["write_s"] += task - convert
        else:
            out["map_s"] += task - convert
    return {k: round(v, 3) for k, v in out.items()}
