"""Output for the CLI: manifests as YAML/JSON, tables and progress with Rich.

Machine-readable output (manifests, ``-o json``, job ids) goes to stdout; progress and
human notes go to stderr, so ``ads-ranking cluster render … -o json | kubectl apply -f -``
works.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from ads_ranking_pipelines.config.messages import age, dump  # noqa: F401 - shared with X-Ray


class Output(str, enum.Enum):
    yaml = "yaml"
    json = "json"


class TableOutput(str, enum.Enum):
    table = "table"
    json = "json"


def stdout() -> Console:
    # Not a terminal (a pipe, a test): wide enough that tables are not wrapped into noise.
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


def stderr() -> Console:
    return Console(stderr=True, highlight=False)


def echo(text: str) -> None:
    """Raw text to stdout (no Rich markup processing)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> Table:
    t = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


def key_values(data: Mapping[str, Any]) -> Table:
    t = Table(show_header=False, box=None)
    t.add_column("key", style="bold")
    t.add_column("value", overflow="fold")
    for key, value in data.items():
        t.add_row(str(key), "" if value is None else str(value))
    return t
