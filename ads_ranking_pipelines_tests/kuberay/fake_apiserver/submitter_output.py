"""What KubeRay's submitter pod prints around the driver log, text for text.

The submitter container (KubeRay v1.7.0 common/job.go ``BuildJobSubmitCommand``) runs a shell
line: a loop that echoes while the dashboard does not answer ``ray job list``, then ``if ! ray
job status --address ADDR ID >/dev/null 2>&1; then ray job submit --address ADDR --no-wait
--submission-id ID … -- ENTRYPOINT; fi; ray job logs --address ADDR --follow ID``. So a first
pod prints ``ray job submit``'s lines, then ``ray job logs``' banner and the driver log; a
retried pod finds the job (``ray job status`` succeeds, silently) and prints only the banner,
with its own timestamp, and the whole driver log again from its first line.

The Ray CLI (Ray 2.60, ``ray/dashboard/modules/job/cli.py``) writes through ``cli_logger``
(``ray/autoscaler/_private/cli_logger.py``): with stdin not a TTY (a pod) ``log_style auto``
means record style, one ``LOGGER_FORMAT`` line per message -
``%(asctime)s\\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s`` with the caller's file
and line, no indentation, blank lines (``newline``) dropped - and ``colorful`` still colours
the message (``log_color auto``), so the ANSI codes below are in the pod's log too. Line
numbers are those of Ray 2.60's cli.py.
"""

from __future__ import annotations

import time

# cf.white / cf.bold / cf.limeGreen / cf.cornflowerBlue as colorful renders them (8 colours).
_KEY, _VALUE, _GREEN, _GROUP, _RED = (("\x1b[37m", "\x1b[39m"), ("\x1b[1m", "\x1b[22m"),
                                      ("\x1b[32m", "\x1b[39m"), ("\x1b[36m", "\x1b[39m"),
                                      ("\x1b[31m", "\x1b[39m"))


def _paint(color: tuple[str, str], text: str) -> str:
    return f"{color[0]}{text}{color[1]}"


def cli_line(level: str, lineno: int, message: str, *, now: float | None = None) -> str:
    """One ``cli_logger._print`` record line of ``cli.py`` (``logging.Formatter`` asctime:
    local time, comma, milliseconds)."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now * 1000) % 1000:03d}"
    return f"{stamp}\t{level} cli.py:{lineno} -- {message}"


def server_address(address: str) -> str:
    """``_get_sdk_client``: ``cli_logger.labeled_value("Job submission server address", …)``."""
    return cli_line("INFO", 42, f"{_paint(_KEY, 'Job submission server address')}: "
                                f"{_paint(_VALUE, address)}")


def _big_message(level: str, color: tuple[str, str], first_line: int, text: str) -> list[str]:
    """``_log_big_success_msg`` / ``_log_big_error_msg``: the text between two dash rules."""
    rule = _paint(color, "-" * len(text))
    return [cli_line(level, first_line, rule), cli_line(level, first_line + 1, _paint(color, text)),
            cli_line(level, first_line + 2, rule)]


def submit_lines(address: str, job_id: str) -> list[str]:
    """``submit`` with ``--no-wait``: the server address, ``Job 'ID' submitted successfully``
    and the ``Next steps`` group."""
    lines = [server_address(address),
             *_big_message("SUCC", _GREEN, 66, f"Job '{job_id}' submitted successfully"),
             cli_line("INFO", 330, _paint(_GROUP, "Next steps"))]
    for lineno, (hint, command) in ((331, ("Query the logs of the job:", "logs")),
                                    (335, ("Query the status of the job:", "status")),
                                    (339, ("Request the job to be stopped:", "stop"))):
        lines += [cli_line("INFO", lineno, hint),  # the command in cf.bold, indented (pretty only)
                  cli_line("INFO", lineno + 2, _paint(_VALUE, f"ray job {command} {job_id}"))]
    return lines


def logs_banner(address: str) -> list[str]:
    """``logs --follow``: ``_get_sdk_client``'s line before the driver log (``_tail_logs``)."""
    return [server_address(address)]


def final_status_lines(job_id: str, status: str, message: str | None) -> list[str]:
    """``_log_job_status`` after ``_tail_logs`` has printed the whole driver log (errors and
    warnings go to stderr, which the pod's log holds too)."""
    if status == "SUCCEEDED":
        return _big_message("SUCC", _GREEN, 66, f"Job '{job_id}' succeeded")
    if status == "STOPPED":
        return [cli_line("WARN", 85, f"\x1b[33mJob '{job_id}' was stopped\x1b[39m")]
    if status == "FAILED":
        lines = _big_message("ERR", _RED, 74, f"Job '{job_id}' failed")
        if message:  # one record; the message's own newlines make raw lines after it
            lines += cli_line("INFO", 89, f"Status message: {message}").split("\n")
        return lines
    return [cli_line("INFO", 92, f"Status for job '{job_id}': {status}")]


def dashboard_wait_line(address: str) -> str:
    """The echo of ``BuildJobSubmitCommand``'s wait loop (``until ray job list --address ADDR
    >/dev/null 2>&1; do echo …; sleep 2; done``): a plain shell echo, no timestamp."""
    return f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."


def opening_lines(address: str, job_id: str, submit: bool, waits: int) -> list[str]:
    """What a pod prints before the driver log: the wait loop's echoes, ``ray job submit``'s
    lines (only when ``ray job status`` did not find the job), ``ray job logs``' banner."""
    lines = [dashboard_wait_line(address)] * waits
    if submit:
        lines += submit_lines(address, job_id)
    return lines + logs_banner(address)
