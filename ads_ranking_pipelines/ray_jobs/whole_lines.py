"""A job driver's stdout and stderr written a whole line at a time, whichever thread writes.

Everything a job driver reports reaches Dagster as lines of its log: Pipes messages (one JSON
object per line) and plain text. Several threads write there at once: the main thread, the
training progress pump, and Ray's own thread that prints the workers' output. ``print`` and
Dagster Pipes' stream writer both write a line as two calls (the text, then ``"\n"``), and
the driver runs unbuffered (Ray's job supervisor sets ``PYTHONUNBUFFERED=1``), so another
thread's line can land between them: ``(RayTrainWorker pid=1) epoch 2/2{"__dagster_pipes…}``
is then one line and the message is not a line of its own (how often:
``benchmarks/DESIGN_MEASUREMENTS.md``, whole lines).

:class:`WholeLineStream` keeps each thread's unfinished line to itself and writes finished
lines in one call under a lock shared by stdout and stderr (they go to the same log file). The
lock is re-entrant: a write from inside a write (a warning, a signal handler) must not hang.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO


class WholeLineStream:
    """Wraps a text stream; each thread's writes reach it as whole lines, one call per write."""

    def __init__(self, inner: TextIO, lock: threading.RLock | None = None) -> None:
        self.inner = inner
        self._lock = lock or threading.RLock()
        self._pending: dict[int, str] = {}      # thread id -> its unfinished line

    def write(self, text: str) -> int:
        me = threading.get_ident()
        with self._lock:
            buffered = self._pending.pop(me, "") + text
            cut = buffered.rfind("\n") + 1
            if cut < len(buffered):
                self._pending[me] = buffered[cut:]
            if cut:
                self.inner.write(buffered[:cut])
        return len(text)

    def writelines(self, lines: Any) -> None:
        self.write("".join(lines))

    def flush(self) -> None:
        """Writes this thread's unfinished line too (a flush means "show it now")."""
        with self._lock:
            rest = self._pending.pop(threading.get_ident(), "")
            if rest:
                self.inner.write(rest)
            self.inner.flush()

    def flush_all(self) -> None:
        """Every thread's unfinished line, each ended with a newline (the stream is going away)."""
        with self._lock:
            rest = [self._pending.pop(k) for k in list(self._pending)]
            if rest:
                self.inner.write("".join(r + "\n" for r in rest))
            self.inner.flush()

    def __getattr__(self, name: str) -> Any:     # fileno, isatty, encoding, …
        return getattr(self.inner, name)


@contextlib.contextmanager
def whole_lines() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as :class:`WholeLineStream` (one lock) inside the block."""
    lock = threading.RLock()
    out, err = WholeLineStream(sys.stdout, lock), WholeLineStream(sys.stderr, lock)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        out.flush_all()
        err.flush_all()
