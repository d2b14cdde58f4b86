"""How training code reports progress without knowing who listens (Pipes, a terminal, a test)."""

from __future__ import annotations

import json
import sys
from typing import Protocol

Scalar = float | int | str | bool


class Reporter(Protocol):
    def log(self, message: str) -> None: ...

    def metrics(self, kind: str, values: dict[str, Scalar]) -> None:
        """A structured metrics record, e.g. kind="epoch", values={"epoch": 1, "loss": 0.43}."""


class PrintReporter:
    """Prints to stdout; the default outside Dagster."""

    def log(self, message: str) -> None:
        print(message, flush=True)

    def metrics(self, kind: str, values: dict[str, Scalar]) -> None:
        print(f"[metrics:{kind}] {json.dumps(values, sort_keys=True)}", file=sys.stdout, flush=True)
