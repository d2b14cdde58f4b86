"""The JSON API: the same data as the pages, and the same mutations (POST, CSRF or bearer).

``GET /api/clusters[?owner=&pool=&status=]``, ``GET /api/clusters/{name}``,
``GET /api/clusters/{name}/jobs``, ``GET /api/clusters/{name}/jobs/{id}/logs`` (a
``text/event-stream``: one ``data:`` event per log line, JSON-encoded, then ``event: end``),
``GET /api/pools``, ``POST /api/clusters`` (the create form's fields as JSON),
``POST /api/clusters/{name}/delete``, ``POST /api/clusters/{name}/notebook[?owner=]`` and
``POST /api/clusters/{name}/notebook/stop``. ``{name}`` routes take ``?backend=&namespace=``
when a name is not unique. ``POST /api/clusters`` refuses (400) a body that is not a JSON object
of the form's fields with string, number, boolean or null values, naming what it did not
understand; a body over ``limits.MAX_BODY_BYTES`` is refused with 413 on every route.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ads_ranking_pipelines.config.messages import quoted
from ads_ranking_pipelines.xray import forms, local_jobs
from ads_ranking_pipelines.xray.rows import Filters
from ads_ranking_pipelines.xray.security import check_csrf
from ads_ranking_pipelines.xray.service import NotFound
from ads_ranking_pipelines.xray.web import ref_from, service


async def clusters(request: Request) -> Response:
    rows, notes = await run_in_threadpool(service(request).rows)
    filtered = Filters.from_query(request.query_params).apply(rows)
    return JSONResponse({"clusters": [r.to_json() for r in filtered], "notes": notes})


async def cluster(request: Request) -> Response:
    svc = service(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    data = row.to_json()
    data["pods"] = await run_in_threadpool(svc.pods, row)
    return JSONResponse(data)


async def jobs(request: Request) -> Response:
    svc = service(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    found = await run_in_threadpool(svc.jobs, row)
    return JSONResponse({"jobs": [j.to_json() for j in found]})


def _event(data: str, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


async def job_logs(request: Request) -> Response:
    svc = service(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    job_id = request.path_params["job_id"]
    if not await run_in_threadpool(svc.has_job, row, job_id):
        raise NotFound(f"no job {quoted(job_id)} on cluster {row.name!r}")
    if row.backend == "kuberay":
        lines: AsyncIterator[str] = iterate_in_threadpool(svc.kuberay_log(row, job_id))
    else:
        cluster_obj = svc.local.find(row.name)
        if cluster_obj is None:
            raise NotFound(f"cluster {row.name!r} is gone")
        lines = local_jobs.follow_log(cluster_obj, job_id)

    async def events() -> AsyncIterator[str]:
        try:
            async for line in lines:
                yield _event(line)
        except Exception as exc:  # noqa: BLE001 - the stream is already open: say it there
            yield _event(" ".join(str(exc).split()), "failure")
            return
        final = [j.status for j in await run_in_threadpool(svc.jobs, row) if j.job_id == job_id]
        yield _event(final[0] if final else "unknown", "end")

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def pools(request: Request) -> Response:
    return JSONResponse({"pools": [p.model_dump(mode="json") for p in service(request).catalog]})


async def create(request: Request) -> Response:
    svc = service(request)
    await check_csrf(request)
    try:
        body = await request.json()
    except ValueError:  # not JSON, or not UTF-8
        return JSONResponse({"error": "invalid body = not JSON: it must be a JSON object with the "
                             f"create form's fields; valid fields: {forms.VALID_FIELDS}"}, 400)
    try:
        form = forms.json_form(body)
    except forms.BodyError as exc:
        return JSONResponse({"error": str(exc), "fields": exc.fields}, 400)
    values = forms.form_values(form, svc.settings.default_owner, svc.catalog)
    result = forms.parse_request(values, svc.catalog, svc.backends, svc.namespaces,
                                 svc.settings.settings)
    if not result.ok:
        return JSONResponse({"error": "; ".join(result.errors), "fields": sorted(result.fields)}, 400)
    if values["backend"] == "local" and svc.local.name_taken(result.request.name):
        return JSONResponse({"error": f"a local cluster named {quoted(result.request.name)} is running",
                             "fields": ["name"]}, 409)
    await run_in_threadpool(svc.create, values["backend"], result.resolved,
                            forms.notebook_support(values))
    return JSONResponse({"name": result.request.name, "backend": values["backend"],
                         "status": "creating"}, 202)


async def delete(request: Request) -> Response:
    svc = service(request)
    await check_csrf(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    deleted = await run_in_threadpool(svc.delete, row)
    return JSONResponse({"name": row.name, "backend": row.backend, "deleted": deleted})


async def notebook_start(request: Request) -> Response:
    svc = service(request)
    await check_csrf(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    owner = (request.query_params.get("owner") or svc.settings.default_owner).strip()[:63]
    started = await run_in_threadpool(svc.start_notebook, row, owner)
    # The one answer that carries a KubeRay notebook's token: never cached.
    return JSONResponse({"cluster": row.name, **started.to_json()},
                        headers={"Cache-Control": "no-store"})


async def notebook_stop(request: Request) -> Response:
    svc = service(request)
    await check_csrf(request)
    row = await run_in_threadpool(svc.find, ref_from(request))
    return JSONResponse({"cluster": row.name, "stopped": await run_in_threadpool(svc.stop_notebook, row)})


routes = [
    Route("/api/clusters", clusters, methods=["GET"]),
    Route("/api/clusters", create, methods=["POST"]),
    Route("/api/pools", pools),
    Route("/api/clusters/{name}", cluster),
    Route("/api/clusters/{name}/jobs", jobs),
    Route("/api/clusters/{name}/jobs/{job_id}/logs", job_logs),
    Route("/api/clusters/{name}/delete", delete, methods=["POST"]),
    Route("/api/clusters/{name}/notebook", notebook_start, methods=["POST"]),
    Route("/api/clusters/{name}/notebook/stop", notebook_stop, methods=["POST"]),
]
