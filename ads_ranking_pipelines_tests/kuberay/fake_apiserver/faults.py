"""Fault injection: answer chosen requests with an HTTP error instead of (or after) their
effect."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.routes import status_body


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int | None = 1  # None: forever
    headers: dict[str, str] = field(default_factory=dict)
    after_effect: bool = False  # apply the request, then answer with the fault
    reason: str = ""
    message: str = ""
    hits: int = 0


class FaultInjection:
    """Part of :class:`FakeKubeApiServer`, which holds ``faults`` and ``lock``."""

    lock: threading.RLock
    faults: list[Fault]

    def inject(self, method: str, path: str, status: int, *, times: int | None = 1,
               headers: dict[str, str] | None = None, after_effect: bool = False,
               reason: str = "", message: str = "") -> Fault:
        """Answer the next ``times`` (None: all) ``method`` requests whose path matches the
        regex ``path`` with ``status``. With ``after_effect`` the request is applied first."""
        fault = Fault(method.upper(), re.compile(path), status, times, dict(headers or {}),
                      after_effect, reason, message)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def _take_fault(self, method: str, path: str) -> Fault | None:
        """The first fault that matches the request, counted as used (call with the lock)."""
        for f in self.faults:
            if f.method == method and f.path.search(path) and (f.times is None or f.times > 0):
                if f.times is not None:
                    f.times -= 1
                f.hits += 1
                return f
        return None

    @staticmethod
    def _fault_answer(fault: Fault) -> tuple[int, Any, dict[str, str]]:
        reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                   504: "Timeout", 409: "AlreadyExists", 403: "Forbidden"}
        reason = fault.reason or reasons.get(fault.status, "InternalError")
        message = fault.message or f"injected fault: HTTP {fault.status}"
        return fault.status, status_body(fault.status, reason, message), dict(fault.headers)
