"""Shared CLI plumbing: exit codes and error printing."""

from __future__ import annotations

from typing import NoReturn

import typer

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_INVALID = 2


def fail(message: str, code: int = EXIT_RUNTIME) -> NoReturn:
    """Print a one-line reason to stderr and exit with ``code``."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    raise typer.Exit(code)
