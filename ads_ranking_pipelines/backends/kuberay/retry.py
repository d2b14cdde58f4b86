"""When the KubeRay client tries an API call again: bounded backoff, ``Retry-After`` honoured,
and the loop that does it, turning the API server's answers into our typed errors."""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ads_ranking_pipelines.backends.kuberay.errors import Conflict, KubeError, NotFound, status_fields

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff for 429, 5xx and failed connections.

    Attempt *n* (1-based) that fails waits ``initial_delay_s * multiplier**(n-1)`` (at most
    ``max_delay_s``, plus up to ``jitter`` of it at random) or, when the server sent
    ``Retry-After``, that long (at most ``max_retry_after_s``). After ``max_attempts``
    attempts the last error is raised.
    """

    max_attempts: int = 6
    initial_delay_s: float = 0.5
    multiplier: float = 2.0
    max_delay_s: float = 10.0
    max_retry_after_s: float = 60.0
    jitter: float = 0.1

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        if retry_after_s is not None:
            return max(0.0, min(retry_after_s, self.max_retry_after_s))
        base = min(self.initial_delay_s * self.multiplier ** (attempt - 1), self.max_delay_s)
        return base * (1 + self.jitter * random.random())


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retryable_status(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


def call_with_retries(action: str, fn: Callable[[], Any], policy: RetryPolicy,
                      sleep: Callable[[float], None] = time.sleep) -> Any:
    """Run ``fn`` (one call of the ``kubernetes`` client); 429, 5xx and failed connections are
    tried again under ``policy``. A 404 raises :class:`NotFound`, a 409 :class:`Conflict`, any
    other failure :class:`KubeError`, each with the server's reason and message verbatim."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    attempt = 0
    while True:
        attempt += 1
        retry_after: float | None = None
        try:
            return fn()
        except ApiException as exc:
            status = int(exc.status or 0)
            reason, message = status_fields(exc.body)
            reason = reason or str(exc.reason or "")
            if status == 404:
                raise NotFound(action, status, reason, message, attempt) from None
            if not (status == 0 or retryable_status(status)) or attempt >= policy.max_attempts:
                cls = Conflict if status == 409 else KubeError
                raise cls(action, status, reason, message, attempt) from None
            if status in (429, 503):
                retry_after = parse_retry_after((exc.headers or {}).get("Retry-After"))
            log.warning("%s: HTTP %s %s; retrying (attempt %d of %d)", action, status, reason,
                        attempt, policy.max_attempts)
        except urllib3.exceptions.HTTPError as exc:
            if attempt >= policy.max_attempts:
                raise KubeError(action, 0, type(exc).__name__, str(exc), attempt) from None
            log.warning("%s: %s; retrying (attempt %d of %d)", action, type(exc).__name__,
                        attempt, policy.max_attempts)
        sleep(policy.delay(attempt, retry_after))
