"""When the KubeRay client tries an API call again: bounded backoff, ``Retry-After`` honoured."""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass


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
