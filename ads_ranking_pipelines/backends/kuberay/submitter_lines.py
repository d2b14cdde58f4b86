"""The lines KubeRay's submitter pod prints around the driver log, recognised as its own.

The submitter container (KubeRay v1.7.0 common/job.go ``BuildJobSubmitCommand``) runs ``until
ray job list …; do echo "Waiting for Ray Dashboard GCS to become healthy at ADDR ..."; sleep 2;
done; if ! ray job status …; then ray job submit --no-wait …; fi; ray job logs --follow ID``.
Around the driver log (printed verbatim by ``ray job logs``) the pod's log therefore holds:

* the wait loop's echo, a plain line;
* the Ray CLI's own messages (``ray/dashboard/modules/job/cli.py`` through ``cli_logger`` in
  record style, as stdin is not a TTY): ``<asctime>\\t<LEVEL> cli.py:<line> -- <message>``,
  coloured with ANSI codes - ``submit``'s lines, the ``Job submission server address`` banner
  of every ``logs`` call, and ``_log_job_status``'s lines after the driver log, whose ``Status
  message: …`` record may span several raw lines (the message's own newlines).

Only ``cli.py`` records are the submitter's: the driver's own Ray lines have the same format
from other files (``worker.py:… -- Connecting to existing Ray cluster``) and stay driver output.
"""

from __future__ import annotations

import re

from ads_ranking_pipelines.backends.ray_job_api import strip_ansi

CLI_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\t[A-Z]+ cli\.py:\d+ -- ")
DASHBOARD_WAIT = re.compile(r"^Waiting for Ray Dashboard GCS to become healthy at \S+ \.\.\.$")
STATUS_MESSAGE = "Status message: "


def is_cli_record(line: str) -> bool:
    """A ``cli.py`` record line of the Ray CLI (after its ANSI colours are stripped)."""
    return CLI_RECORD.match(strip_ansi(line)) is not None


def is_dashboard_wait(line: str) -> bool:
    """The echo of ``BuildJobSubmitCommand``'s dashboard wait loop."""
    return DASHBOARD_WAIT.match(line.rstrip()) is not None


def opens_status_message(line: str) -> bool:
    """``_log_job_status``'s ``Status message:`` record: the raw lines after it (the rest of a
    multi-line message) are the CLI's too, up to the end of the pod's log."""
    text = strip_ansi(line)
    match = CLI_RECORD.match(text)
    return match is not None and text[match.end():].startswith(STATUS_MESSAGE)
