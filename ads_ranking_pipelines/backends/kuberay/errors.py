"""The typed errors of the KubeRay client: the API server's ``Status`` reason and message verbatim."""

from __future__ import annotations

import json
from typing import Any


class KubeError(RuntimeError):
    """An API call that failed for good. ``status`` is the HTTP status (0: no answer),
    ``reason`` and ``message`` come verbatim from the API server's ``Status`` object."""

    def __init__(self, action: str, status: int, reason: str = "", message: str = "",
                 attempts: int = 1) -> None:
        self.action = action
        self.status = status
        self.reason = reason
        self.message = message
        self.attempts = attempts
        where = f"HTTP {status}" if status else "no answer"
        text = f"{action} failed ({where}"
        text += f", {reason})" if reason else ")"
        if message:
            text += f": {message}"
        if attempts > 1:
            text += f" [after {attempts} attempts]"
        super().__init__(text)


class NotFound(KubeError):
    """404: the object does not exist (any more)."""


class Conflict(KubeError):
    """409 on create: an object of that name exists and is not the one this call made."""


def status_fields(body: Any) -> tuple[str, str]:
    """``reason`` and ``message`` of a Kubernetes ``Status`` body (bytes or str)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return "", ""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return "", str(body).strip()[:500]
    if not isinstance(data, dict):
        return "", ""
    return str(data.get("reason") or ""), str(data.get("message") or "")
