"""A preview as text (``--dry-run``, the run's log) and as JSON (metadata, X-Ray, ``-o json``)."""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines.planning.estimate import Estimate
from ads_ranking_pipelines.planning.preview import Preview, span


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _money(value: float | None) -> str:
    return "unknown (no cost rate in the pool catalog)" if value is None else f"{value:.4g}"


def _estimate_lines(e: Estimate) -> list[str]:
    if not e.known:
        return [f"  estimate: unknown: {e.note}"]
    lines = [
        f"  estimate: wall {duration(e.wall_seconds())} (spread {duration(e.wall_seconds('low_seconds'))}.."
        f"{duration(e.wall_seconds('high_seconds'))}), {e.gpu_hours():.4g} GPU-hours, "
        f"{e.worker_hours():.4g} worker-hours, cost {_money(e.cost())}",
        f"  rests on {e.basis_days} past day(s) of {e.model_name} on {e.gpu_pool}: training seconds per "
        f"1M window rows median {_num(e.rate_median * 1e6)}, spread {_num(e.rate_low * 1e6)}..{_num(e.rate_high * 1e6)}"
        " (the training job's time per day; cluster start not included)"]
    lines += [f"  note: {e.note}"] if e.note else []
    lines += [f"    {d.day}: {d.rows if d.rows is not None else 'unknown'} window rows, ~{duration(d.wall_seconds)}"
              for d in e.days]
    return lines


def preview_lines(p: Preview) -> list[str]:
    e = p.estimate
    lines = [f"backfill preview: {e.model_name} on pool {e.gpu_pool}, {p.span} ({len(p.days)} day(s), "
             f"{e.num_workers} worker(s) x {e.gpus_per_worker} GPU)"]
    lines += _estimate_lines(e)
    lines.append("  capacity: " + "; ".join(p.capacity.notes))
    if len(p.split.runs) == 1:
        lines.append("  proposal: one run" + ("" if len(p.days) == 1 else
                                              f" (the pool holds {p.capacity.parallel} run(s) at once)"))
    else:
        lines.append(f"  proposal: {len(p.split.runs)} runs side by side (the pool holds {p.capacity.parallel} at "
                     f"once), wall ~{duration(p.split.wall_seconds)}: "
                     + ", ".join(span([a, b]) if a != b else a.isoformat() for a, b in p.split.runs)
                     + " (each but the first starts cold unless the day before it is on storage)")
    lines.append("  budget: " + _budget_text(p))
    return lines


def _budget_text(p: Preview) -> str:
    b = p.budget
    if not b.any:
        return "none (no budget_gpu_hours / budget_cost on the pool or the run)"
    refusal, unchecked = p.refusal(), p.unchecked()
    if refusal:
        return "OVER: " + refusal
    limits = [f"budget_gpu_hours {b.gpu_hours:g} ({b.gpu_hours_from})" if b.gpu_hours is not None else "",
              f"budget_cost {b.cost:g} ({b.cost_from})" if b.cost is not None else ""]
    return ("within " if not unchecked else unchecked + "; ") + ", ".join(x for x in limits if x)


def preview_json(p: Preview) -> dict[str, Any]:
    e, known = p.estimate, p.estimate.known
    return {
        "range": p.span, "days": len(p.days), "model_name": e.model_name, "gpu_pool": e.gpu_pool,
        "num_workers": e.num_workers, "gpus_per_worker": e.gpus_per_worker, "basis_days": e.basis_days,
        "wall_seconds": round(e.wall_seconds(), 2) if known else None,
        "wall_seconds_low": round(e.wall_seconds("low_seconds"), 2) if known else None,
        "wall_seconds_high": round(e.wall_seconds("high_seconds"), 2) if known else None,
        "gpu_hours": e.gpu_hours() if known else None, "worker_hours": e.worker_hours() if known else None,
        "cost": e.cost() if known else None, "note": e.note,
        "per_day": {d.day.isoformat(): {"rows": d.rows, "wall_seconds": round(d.wall_seconds, 2)} for d in e.days},
        "run_limit": p.capacity.run_limit, "quota_runs": p.capacity.quota_runs, "capacity": list(p.capacity.notes),
        "proposal": [[a.isoformat(), b.isoformat()] for a, b in p.split.runs],
        "proposal_wall_seconds": p.split.wall_seconds,
        "budget_gpu_hours": p.budget.gpu_hours, "budget_cost": p.budget.cost,
        "over_budget": p.refusal(), "budget_unchecked": p.unchecked(),
    }
