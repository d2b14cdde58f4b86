"""The HTML pages: cluster table (+ its refresh fragment), cluster page, job log page, the
create form with its review step, delete confirmation, notebooks, sign-in."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ads_ranking_pipelines.config import messages as cli_render
from ads_ranking_pipelines.config.messages import quoted, request_error
from ads_ranking_pipelines.config.validation import RequestError
from ads_ranking_pipelines.xray import forms
from ads_ranking_pipelines.xray.rows import Filters, scopes
from ads_ranking_pipelines.xray.security import SESSION_COOKIE, check_csrf, login_check, session_value
from ads_ranking_pipelines.xray.web import (
    action_url,
    cluster_url,
    ref_from,
    render,
    service,
)

STATUSES = ("starting", "running", "ready", "provisioning", "suspended", "deleting", "failed", "dead")


async def index(request: Request) -> Response:
    svc = service(request)
    filters = Filters.from_query(request.query_params)
    rows, notes = await run_in_threadpool(svc.rows)
    query = urlencode(filters.query())
    return render(request, "index.html", rows=filters.apply(rows), notes=notes, filters=filters,
                  pools=svc.catalog.names(), statuses=STATUSES,
                  scopes=scopes(rows, svc.namespaces),
                  query=f"?{query}" if query else "")


async def rows_fragment(request: Request) -> Response:
    filters = Filters.from_query(request.query_params)
    rows, _ = await run_in_threadpool(service(request).rows)
    return render(request, "_rows.html", rows=filters.apply(rows), filters=filters)


async def _cluster_context(request: Request) -> dict:
    svc = service(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    jobs, pods, notes = [], [], []
    try:
        jobs = await run_in_threadpool(svc.jobs, row)
        pods = await run_in_threadpool(svc.pods, row)
    except Exception as exc:  # noqa: BLE001 - a cluster still starting has no job API yet
        notes.append(f"jobs of {row.name} unavailable: {' '.join(str(exc).split())[:300]}")
    return {"row": row, "jobs": jobs, "pods": pods, "job_notes": notes}


async def cluster_page(request: Request) -> Response:
    context = await _cluster_context(request)
    fragment = action_url(context["row"], "fragment")
    return render(request, "cluster.html", fragment_url=fragment, **context)


async def cluster_fragment(request: Request) -> Response:
    return render(request, "_cluster.html", **(await _cluster_context(request)))


async def job_page(request: Request) -> Response:
    svc = service(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    job_id = request.path_params["job_id"]
    stream = (f"/api/clusters/{request.path_params['name']}/jobs/{job_id}/logs?"
              + urlencode({"backend": row.backend, **({"namespace": row.namespace} if row.namespace else {})}))
    return render(request, "job.html", row=row, job_id=job_id, stream_url=stream)


# ---- create -------------------------------------------------------------------------------------
async def new_cluster(request: Request) -> Response:
    svc = service(request)
    values = forms.form_values({}, svc.settings.default_owner, svc.catalog)
    return _form(request, forms.FormResult(values))


def _form(request: Request, result: forms.FormResult, status_code: int = 200) -> Response:
    svc = service(request)
    return render(request, "new.html", status_code, form=result, backends=svc.backends,
                  catalog=list(svc.catalog), namespaces=svc.namespaces)


async def _parsed(request: Request) -> forms.FormResult:
    svc = service(request)
    form = await request.form()
    await check_csrf(request, form)
    values = forms.form_values(form, svc.settings.default_owner, svc.catalog)
    return forms.parse_request(values, svc.catalog, svc.backends, svc.namespaces,
                               svc.settings.settings)


async def review_cluster(request: Request) -> Response:
    result = await _parsed(request)
    if not result.ok:
        return _form(request, result, 400)
    svc = service(request)
    manifest = None
    if result.values["backend"] == "kuberay" and svc.kuberay:
        try:
            manifest = cli_render.dump(svc.kuberay.render(
                result.resolved, notebook=forms.notebook_support(result.values)), "yaml")
        except RequestError as exc:  # rules only the rendered manifest can break
            result.errors.append(request_error(exc))
            return _form(request, result, 400)
    return render(request, "review.html", req=result.request, backend=result.values["backend"],
                  manifest=manifest, values=result.values,
                  notebook=forms.notebook_support(result.values))


async def create_cluster(request: Request) -> Response:
    result = await _parsed(request)
    svc = service(request)
    if result.ok and result.values["backend"] == "local" and svc.local.name_taken(result.request.name):
        result.errors.append(f"invalid --name (name) = {quoted(result.request.name)}: a local cluster of "
                             "that name is running; valid: another name")
        result.fields.add("name")
    if not result.ok:
        return _form(request, result, 400)
    await run_in_threadpool(svc.create, result.values["backend"], result.resolved,
                            forms.notebook_support(result.values))
    target = f"/clusters/{result.request.name}?" + urlencode(
        {"backend": result.values["backend"], "notice": f"creating {result.request.name}",
         **({"namespace": result.request.namespace} if result.values["backend"] == "kuberay" else {})})
    return RedirectResponse(target, status_code=303)


# ---- delete and notebooks -----------------------------------------------------------------------
async def confirm_delete(request: Request) -> Response:
    row = await run_in_threadpool(service(request).find, ref_from(request))
    return render(request, "confirm_delete.html", row=row, error="")


async def delete_cluster(request: Request) -> Response:
    svc = service(request)
    form = await request.form()
    await check_csrf(request, form)
    row = await run_in_threadpool(svc.find, ref_from(request))
    if str(form.get("confirm", "")).strip() != row.name:
        return render(request, "confirm_delete.html", 400, row=row,
                      error=f"type {row.name} to confirm; nothing was deleted")
    await run_in_threadpool(svc.delete, row)
    return RedirectResponse("/?" + urlencode({"notice": f"deleted {row.backend} cluster {row.name}"}),
                            status_code=303)


async def notebook_start(request: Request) -> Response:
    svc = service(request)
    form = await request.form()
    await check_csrf(request, form)
    row = await run_in_threadpool(svc.find, ref_from(request))
    owner = str(form.get("owner") or svc.settings.default_owner).strip()[:63]
    started = await run_in_threadpool(svc.start_notebook, row, owner)
    if row.backend == "local":
        return RedirectResponse(cluster_url(row) + "&notice=notebook+started", status_code=303)
    # KubeRay: the token is shown on this answer only (no redirect carrying it, not cached).
    context = await _cluster_context(request)
    response = render(request, "cluster.html", fragment_url=action_url(context["row"], "fragment"),
                      started=started, **{**context, "notice": "notebook started"})
    response.headers["Cache-Control"] = "no-store"
    return response


async def notebook_stop(request: Request) -> Response:
    svc = service(request)
    await check_csrf(request, await request.form())
    row = await run_in_threadpool(svc.find, ref_from(request))
    await run_in_threadpool(svc.stop_notebook, row)
    return RedirectResponse(cluster_url(row) + "&notice=notebook+stopped", status_code=303)


# ---- sign-in ------------------------------------------------------------------------------------
async def login_page(request: Request) -> Response:
    return render(request, "login.html", next=request.query_params.get("next", "/"), error="")


async def login(request: Request) -> Response:
    form = await request.form()
    token = service(request).settings.token
    target = str(form.get("next") or "/")
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    if not login_check(token, str(form.get("token", ""))):
        return render(request, "login.html", 401, next=target, error="wrong token")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, session_value(token or ""), httponly=True,
                        samesite="strict", path="/", max_age=int(dt.timedelta(days=7).total_seconds()))
    return response


routes = [
    Route("/", index),
    Route("/fragments/clusters", rows_fragment),
    Route("/clusters/new", new_cluster),
    Route("/clusters/review", review_cluster, methods=["POST"]),
    Route("/clusters", create_cluster, methods=["POST"]),
    Route("/clusters/{name}", cluster_page),
    Route("/clusters/{name}/fragment", cluster_fragment),
    Route("/clusters/{name}/jobs/{job_id}", job_page),
    Route("/clusters/{name}/delete", confirm_delete, methods=["GET"]),
    Route("/clusters/{name}/delete", delete_cluster, methods=["POST"]),
    Route("/clusters/{name}/notebook/start", notebook_start, methods=["POST"]),
    Route("/clusters/{name}/notebook/stop", notebook_stop, methods=["POST"]),
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
]
