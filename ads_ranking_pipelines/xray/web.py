"""What the page and API routes share: the service on ``app.state``, template rendering with
autoescaping, cluster references from URLs, and URL builders."""

from __future__ import annotations

import datetime as dt
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ads_ranking_pipelines.xray.rows import ClusterRow
from ads_ranking_pipelines.xray.service import ClusterRef, XrayService


def make_templates() -> Jinja2Templates:
    folder = str(resources.files("ads_ranking_pipelines.xray").joinpath("templates"))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.globals.update(cluster_url=cluster_url, action_url=action_url, job_url=job_url)
    return Jinja2Templates(env=env)


def service(request: Request) -> XrayService:
    return request.app.state.service


def ref_query(row: ClusterRow) -> str:
    params = {"backend": row.backend}
    if row.namespace:
        params["namespace"] = row.namespace
    return urlencode(params)


def cluster_url(row: ClusterRow) -> str:
    return f"/clusters/{quote(row.name, safe='')}?{ref_query(row)}"


def action_url(row: ClusterRow, action: str) -> str:
    return f"/clusters/{quote(row.name, safe='')}/{action}?{ref_query(row)}"


def job_url(row: ClusterRow, job_id: str) -> str:
    return f"/clusters/{quote(row.name, safe='')}/jobs/{quote(job_id, safe='')}?{ref_query(row)}"


def ref_from(request: Request) -> ClusterRef:
    q = request.query_params
    return ClusterRef(request.path_params["name"], q.get("backend") or None,
                      q.get("namespace") or None)


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    svc = service(request)
    base = {
        "csrf": request.state.csrf, "dagster_url": svc.settings.dagster_url,
        "notice": request.query_params.get("notice", ""), "notes": [],
        "now": dt.datetime.now(dt.timezone.utc), "refresh_s": svc.settings.refresh_s,
        "default_owner": svc.settings.default_owner,
    }
    base.update(context)
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(request, template, base, status_code=status_code)
