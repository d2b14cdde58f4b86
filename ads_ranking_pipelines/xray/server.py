"""Serve X-Ray with uvicorn."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from ads_ranking_pipelines.xray.settings import XraySettings


TOKEN_IN_URL = re.compile(r"(token=)[^&\s\"']+")


class UnsafeBind(ValueError):
    pass


class RedactTokens(logging.Filter):
    """Access log lines never carry a ``?token=`` sign-in link's token."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = tuple(TOKEN_IN_URL.sub(r"\1<redacted>", a) if isinstance(a, str) else a
                                for a in record.args)
        return True


def check_bind(settings: XraySettings) -> None:
    if not settings.loopback and not settings.token:
        raise UnsafeBind(
            f"invalid --host = {settings.host!r}: a non-loopback address needs an access token; "
            "valid: 127.0.0.1 (default), or pass --token / set ADS_RANKING_XRAY_TOKEN")


def serve(settings: XraySettings, environ: Mapping[str, str]) -> None:
    import uvicorn

    from ads_ranking_pipelines.xray.app import create_app

    check_bind(settings)
    app = create_app(settings, environ)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info",
                            proxy_headers=False, server_header=False, timeout_graceful_shutdown=3)
    logging.getLogger("uvicorn.access").addFilter(RedactTokens())  # after Config set up logging
    uvicorn.Server(config).run()
