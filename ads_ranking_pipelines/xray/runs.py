"""How far each run is: the runs' progress records on the storage root (``storage/run_progress.py``),
as a page (``/runs``) and JSON (``/api/runs``): per run its current step, percent done, ETA,
days done of the range, and links to the Dagster run and to its Ray job."""

from __future__ import annotations

import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ads_ranking_pipelines.planning.progress import duration
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.run_progress import read_progress
from ads_ranking_pipelines.xray.web import render, service

STEPS = ("trained_model", "model_evaluation", "batch_scores")


def _url(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith(("http://", "https://")) else None


def _row(rec: dict[str, Any], now: float) -> dict[str, Any]:
    step = rec.get("current_step")
    p = (rec.get("steps") or {}).get(step) or {}
    links = rec.get("links") or {}
    eta = p.get("eta_s")
    return {"run_id": rec.get("run_id"), "model": rec.get("model"), "state": rec.get("state"), "step": step,
            "percent": p.get("percent"), "eta_s": eta, "eta": duration(eta) if isinstance(eta, (int, float)) else "",
            "days_done": p.get("days_done"), "days_total": p.get("days_total"), "day": p.get("day"),
            "epoch": p.get("epoch"), "epochs": p.get("epochs"),
            "steps": {s: (rec.get("steps") or {}).get(s, {}).get("percent") for s in STEPS},
            "updated_s_ago": round(max(0.0, now - float(rec.get("updated_at") or now)), 1),
            "ray_dashboard": _url(links.get("ray_dashboard")), "ray_job_logs": _url(links.get("ray_job_logs")),
            "ray_job_id": links.get("ray_job_id"), "logs_after_teardown": links.get("ray_logs_after_teardown")}


def run_rows(home: str) -> list[dict[str, Any]]:
    now = time.time()
    return [_row(rec, now) for rec in read_progress(StorageLayout(home))]


async def page(request: Request) -> Response:
    svc = service(request)
    rows = await run_in_threadpool(run_rows, svc.settings.settings.home)
    for row in rows:
        row["dagster_url"] = svc.links.run_url(row["run_id"]) if svc.links and row.get("run_id") else None
    return render(request, "runs.html", rows=rows)


async def api(request: Request) -> Response:
    rows = await run_in_threadpool(run_rows, service(request).settings.settings.home)
    return JSONResponse({"runs": rows})


routes = [Route("/runs", page), Route("/api/runs", api)]
