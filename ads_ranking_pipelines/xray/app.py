"""The Starlette application: routes, static files, security and body-size middleware, error
pages."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib import resources

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.kuberay.notebooks import NotebookConflict
from ads_ranking_pipelines.xray import api, estimates, pages, runs
from ads_ranking_pipelines.xray.limits import BodyLimitMiddleware, BodyTooLarge
from ads_ranking_pipelines.xray.notebooks import NotebookError
from ads_ranking_pipelines.xray.security import CsrfError, SecurityMiddleware
from ads_ranking_pipelines.xray.service import Ambiguous, NotFound, XrayService
from ads_ranking_pipelines.xray.settings import XraySettings
from ads_ranking_pipelines.xray.web import make_templates, render

log = logging.getLogger(__name__)


def _error(request: Request, status: int, title: str, message: str) -> Response:
    message = " ".join(str(message).split())
    if request.url.path.startswith("/api/") or "text/html" not in request.headers.get("accept", ""):
        return JSONResponse({"error": message}, status)
    return render(request, "error.html", status, title=title, message=message)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(request, 404, "Not found", str(exc))


async def _ambiguous(request: Request, exc: Exception) -> Response:
    return _error(request, 409, "Which cluster?", str(exc))


async def _csrf(request: Request, exc: Exception) -> Response:
    return _error(request, 403, "Refused", str(exc))


async def _notebook_conflict(request: Request, exc: Exception) -> Response:
    return _error(request, 409, "Notebook not started", str(exc))


async def _too_large(request: Request, exc: Exception) -> Response:
    return _error(request, 413, "Request too large", str(exc))


async def _backend(request: Request, exc: Exception) -> Response:
    return _error(request, 502, "Backend error", str(exc))


async def _healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(settings: XraySettings, environ: Mapping[str, str]) -> Starlette:
    static = str(resources.files("ads_ranking_pipelines.xray").joinpath("static"))
    app = Starlette(
        routes=[*pages.routes, *api.routes, *estimates.routes, *runs.routes, Route("/healthz", _healthz),
                Mount("/static", StaticFiles(directory=static), name="static")],
        exception_handlers={NotFound: _not_found, Ambiguous: _ambiguous, CsrfError: _csrf,
                            BackendError: _backend, NotebookError: _backend,
                            NotebookConflict: _notebook_conflict, BodyTooLarge: _too_large},
    )
    app.state.service = XrayService(settings, environ)
    app.state.templates = make_templates()
    app.add_middleware(BodyLimitMiddleware)  # inside the security checks: they run first
    app.add_middleware(SecurityMiddleware, token=settings.token, loopback=settings.loopback)
    return app
