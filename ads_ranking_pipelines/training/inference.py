"""Batch inference: score a day's impressions with Ray Data and write versioned parquet."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.data_stats import stage_seconds
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.contracts.jobs import InferenceJobSpec

if TYPE_CHECKING:
    from ads_ranking_pipelines.training.export import Predictor

SCORE_COLUMN = "score"
SUCCESS_MARKER = "_SUCCESS"


@functools.lru_cache(maxsize=4)
def _predictor(uri: str) -> Predictor:
    """One predictor per worker process and version, loaded on first use (torch is imported
    here, in the scoring workers: the job's driver only plans the dataset)."""
    from ads_ranking_pipelines.training.export import load_predictor

    return load_predictor(uri)


def row_group_sizes(parts: list[str], threads: int = 16) -> list[tuple[str, list[int]]]:
    """Rows per row group of each part file: only the footers are read, in this process, by
    up to ``threads`` at once (on object storage each footer is a request or two)."""
    import concurrent.futures

    import pyarrow.parquet as pq

    def one(uri: str) -> tuple[str, list[int]]:
        filesystem, path = fs.filesystem(uri)
        with filesystem.open_input_file(path) as f:
            meta = pq.ParquetFile(f).metadata
        return uri, [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]

    if len(parts) <= 1:
        return [one(p) for p in parts]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(threads, len(parts))) as pool:
        return list(pool.map(one, parts))


def row_group_chunks(sizes: list[tuple[str, list[int]]], rows_per_chunk: int) -> list[dict[str, Any]]:
    """The part files cut into pieces, in file order: the units read, scored and written in
    parallel. Small row groups are taken together until a piece has ``rows_per_chunk`` rows
    (a file's last piece: what is left); a row group larger than that is cut into about equal
    slices of at most ``rows_per_chunk`` rows (pyarrow writes a file of up to 1Mi rows as one
    row group: a whole day was one piece, scored by one task on one core). A piece reads its
    ``row_groups`` and keeps ``rows`` rows from ``offset``."""
    chunks: list[dict[str, Any]] = []

    def piece(uri: str, groups: list[int], rows: int, offset: int = 0) -> None:
        if rows:                             # an empty file still has one row group, of 0 rows
            chunks.append({"uri": uri, "row_groups": groups, "offset": offset, "rows": rows})

    for uri, groups in sizes:
        picked, rows = [], 0
        for i, n in enumerate(groups):
            if n > rows_per_chunk:
                piece(uri, picked, rows)
                picked, rows = [], 0
                cuts = -(-n // rows_per_chunk)
                bounds = [n * k // cuts for k in range(cuts + 1)]
                for lo, hi in zip(bounds, bounds[1:]):
                    piece(uri, [i], hi - lo, lo)
                continue
            picked.append(i)
            rows += n
            if rows >= rows_per_chunk:
                piece(uri, picked, rows)
                picked, rows = [], 0
        piece(uri, picked, rows)
    return chunks


def chunk_rows(total_rows: int, concurrency: int) -> int:
    """Rows per chunk: about 4 chunks per concurrent task (the cores stay busy to the end), at
    least one 8192-row batch and at most 256k rows (a task's memory)."""
    return max(8192, min(262_144, -(-total_rows // (4 * max(1, concurrency)))))


def score_table(table: Any, model_uri: str, model_version: str, keep: tuple[str, ...]) -> Any:
    """Impressions (an Arrow table) -> their ``keep`` columns, the click probability and the
    version that scored them."""
    import pyarrow as pa

    scores = _predictor(model_uri).score_rows(table)
    return pa.table({**{c: table.column(c) for c in keep},
                     SCORE_COLUMN: pa.array(scores.astype(np.float32)),
                     "model_version": pa.array([model_version] * table.num_rows, pa.string())})


def part_uri(out_uri: str, part: int) -> str:
    return fs.join(out_uri, f"part-{part:05d}.parquet")


def score_chunks(batch: dict[str, np.ndarray], columns: list[str], model_uri: str, model_version: str,
                 keep: tuple[str, ...], out_uri: str) -> dict[str, np.ndarray]:
    """A Ray Data map over :func:`row_group_chunks` items: each task reads its row groups
    (only ``columns``), scores them and writes them itself, one parquet file per chunk
    (:func:`part_uri` of its ``part``); it returns the rows each file holds. (Ray Data's
    ``write_parquet`` after the map was an operator of its own: its tasks waited for a CPU the
    scoring tasks held and started a worker process of their own.)"""
    import pyarrow.parquet as pq

    written = []
    for uri, groups, offset, rows, part in zip(batch["uri"], batch["row_groups"], batch["offset"], batch["rows"],
                                               batch["part"]):
        filesystem, path = fs.filesystem(str(uri))
        with filesystem.open_input_file(path) as f:
            table = pq.ParquetFile(f).read_row_groups([int(g) for g in groups], columns=columns)
        table = table.slice(int(offset), int(rows))
        scored = score_table(table, model_uri, model_version, keep)
        out_fs, out_path = fs.filesystem(part_uri(out_uri, int(part)))
        pq.write_table(scored, out_path, filesystem=out_fs)
        written.append(scored.num_rows)
    return {"rows": np.asarray(written, dtype=np.int64)}


def written_rows(out_uri: str) -> int:
    """Rows of the parquet files under ``out_uri``, from their footers, read here (Ray Data's
    ``read_parquet(...).count()`` starts a listing task and footer-reading actors, new processes,
    on the cluster: seconds of a daily run's scoring step for a number the footers hold)."""
    parts = [fs.join(out_uri, n) for n in fs.list_dir(out_uri) if n.endswith(".parquet")]
    return sum(sum(groups) for _, groups in row_group_sizes(parts))


def model_columns(model_uri: str) -> list[str]:
    """The columns the version at ``model_uri`` scores from (its ``model.json`` feature spec): what
    a scoring task reads, whatever else the source declares (the pre-flight checked the day has them)."""
    features = fs.read_json(fs.join(model_uri, "model.json"))["feature_spec"]
    return [*features["dense_columns"], *features["sparse_columns"]]


def score_day(spec: InferenceJobSpec, reporter: Reporter, *, max_concurrency: int | None = None) -> dict[str, Any]:
    """Score the day's impressions: pieces of the part files (:func:`row_group_chunks`), each
    read, scored and written by one Ray Data task, ``max_concurrency`` at a time (default: the
    spec's ``concurrency``, the worker CPUs the cluster was asked for, else the CPUs Ray sees
    now; it was 2 whatever the cluster's size). (Ray Data's
    ``read_parquet`` makes one read task per file, fused with the scoring: a day in one file
    was scored on one core; it also starts a footer-reading actor, a new process, per call.)
    The stage figures count the writes under ``map_s``: the scoring tasks write."""
    import ray

    from ads_ranking_pipelines.events.layout import part_uris
    from ads_ranking_pipelines.events.window_checks import validate_schema

    if not ray.is_initialized():
        ray.init()
    if max_concurrency is None:
        max_concurrency = spec.concurrency or max(1, int(ray.cluster_resources().get("CPU", 1)))
    validate_schema(spec.source, spec.day)
    parts = [fs.normalize(p) for p in part_uris(spec.source.uri, spec.day, spec.source.completeness)]
    id_cols = tuple(c for c in spec.id_columns)
    read_cols = list(dict.fromkeys([*id_cols, *model_columns(spec.model_uri)]))
    out_uri = fs.normalize(spec.output_uri)
    # Nothing half-written: clear an earlier attempt, write, then the marker last.
    fs.delete_dir(out_uri)

    t0 = time.perf_counter()
    sizes = row_group_sizes(parts)
    chunks = [{**c, "part": i} for i, c in
              enumerate(row_group_chunks(sizes, chunk_rows(sum(sum(g) for _, g in sizes), max_concurrency)))]
    stages: dict[str, float] = {}
    if chunks:                      # a day of 0 rows: nothing to score, the marker says so
        fs.makedirs(out_uri)
        scored = ray.data.from_items(chunks, override_num_blocks=len(chunks)).map_batches(
            score_chunks, batch_format="numpy", batch_size=1, num_cpus=1,
            compute=ray.data.TaskPoolStrategy(size=max_concurrency),
            fn_kwargs={"columns": read_cols, "model_uri": spec.model_uri, "model_version": spec.model_version,
                       "keep": id_cols, "out_uri": out_uri})
        # Ray Data keeps part of the CPUs for each operator's outputs by default: the second
        # scoring task started only after the first had done several pieces (2 CPUs)
        scored.context.op_resource_reservation_enabled = False
        scored = scored.materialize()
        stages = stage_seconds(scored)
    seconds = time.perf_counter() - t0
    rows = written_rows(out_uri) if chunks else 0
    expected = sum(c["rows"] for c in chunks)
    if rows != expected:
        raise RuntimeError(f"scored {rows} rows of {spec.day}, the day has {expected}")
    stats = {"rows": rows, "seconds": round(seconds, 3), "rows_per_s": round(rows / max(seconds, 1e-9), 1),
             "scores_uri": out_uri, "model_version": spec.model_version, "day": spec.day.isoformat(),
             "tasks": len(chunks),
             # task seconds per phase: map (read + transform + score), convert, write
             **{f"stage_{k}": v for k, v in stages.items()}}
    fs.write_json(fs.join(out_uri, SUCCESS_MARKER), stats)
    reporter.log(f"scored {rows} impressions of {spec.day} in {seconds:.1f}s "
                 f"({stats['rows_per_s']:.0f} rows/s, {len(chunks)} tasks, {max_concurrency} at a time) -> {out_uri}")
    reporter.metrics("inference", {k: v for k, v in stats.items() if isinstance(v, (int, float))})
    return stats
