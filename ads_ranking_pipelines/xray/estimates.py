"""Estimate vs actual of every trained day: the backfill previews' history (``storage/train_history.py``)
of each model under the storage root, as a page (``/estimates``) and JSON (``/api/estimates[?model=]``)."""

from __future__ import annotations

import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.train_history import read_history
from ads_ranking_pipelines.xray.web import render, service

MAX_ROWS = 500   # newest first
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _row(model: str, rec: dict[str, Any]) -> dict[str, Any]:
    est = (rec.get("estimate") or {}).get("wall_seconds")
    actual = rec.get("wall_seconds")
    error = round((actual - est) / est * 100, 1) if est and isinstance(actual, (int, float)) else None
    return {"model": model, "day": rec.get("day"), "model_version": rec.get("model_version"),
            "gpu_pool": rec.get("gpu_pool"), "num_workers": rec.get("num_workers"), "rows": rec.get("rows"),
            "estimated_wall_seconds": est, "wall_seconds": actual, "error_pct": error,
            "gpu_hours": rec.get("gpu_hours"), "worker_hours": rec.get("worker_hours")}


def estimate_rows(home: str, model: str = "") -> list[dict[str, Any]]:
    """Every recorded day of ``model`` (all models when empty), newest day first."""
    layout = StorageLayout(home)
    root = fs.join(layout.root, "models")
    models = [model] if model else (sorted(fs.list_dir(root)) if fs.exists(root) else [])
    rows = [_row(m, rec) for m in models for rec in read_history(layout, m)]
    return sorted(rows, key=lambda r: (str(r["day"]), str(r["model_version"])), reverse=True)[:MAX_ROWS]


def _model(request: Request) -> str:
    """The ``model`` filter: a model name (a folder name under ``models/``), else all models."""
    model = (request.query_params.get("model") or "").strip()
    return model if _MODEL_NAME.match(model) and model not in (".", "..") else ""


async def page(request: Request) -> Response:
    rows = await run_in_threadpool(estimate_rows, service(request).settings.settings.home, _model(request))
    return render(request, "estimates.html", rows=rows, model=_model(request))


async def api(request: Request) -> Response:
    rows = await run_in_threadpool(estimate_rows, service(request).settings.settings.home, _model(request))
    return JSONResponse({"days": rows})


routes = [Route("/estimates", page), Route("/api/estimates", api)]
