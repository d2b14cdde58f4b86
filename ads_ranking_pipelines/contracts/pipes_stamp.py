"""The stamp that makes each Dagster Pipes message of a job driver unique: written by the
driver (``ray_jobs/pipes_writer.py``), read by the orchestrator (``defs/pipes_once.py``).

A job's Pipes messages reach Dagster as lines of its driver log, and a log can be read twice
(KubeRay's retried submitter pod prints the whole driver log again; a pod that died mid-line).
Two messages with the same text can both be real (the same metric twice), so duplicates are
told apart by the stamp, not by text: ``STAMP_FIELD`` holds ``[writer id, counter]`` - a
random id per Pipes session of the driver, and the message's number within it. Dagster's
message handler reads only ``method`` and ``params``, so the extra field reaches it unseen.

The run driver's writers are named after the step they serve *and* the driver's attempt
(:func:`step_writer_id`): a driver started again (KubeRay resubmits a RayJob that Kueue
readmitted) numbers a step's messages from 1 again, and those are new messages, not a replay.
"""

from __future__ import annotations

from typing import Any

STAMP_FIELD = "ads_ranking_stamp"
ATTEMPT_SEP = "@"


def step_writer_id(step_id: str, attempt: str) -> str:
    """The writer id of step ``step_id``'s messages from one attempt of the run driver."""
    return f"{step_id}{ATTEMPT_SEP}{attempt}"


def writer_step(writer_id: str) -> str:
    """The step a run-driver writer id belongs to (the id itself for other writers)."""
    return writer_id.split(ATTEMPT_SEP, 1)[0]


def stamp_of(message: Any) -> tuple[str, int] | None:
    """The message's ``(writer id, counter)``, or None when it carries no valid stamp."""
    stamp = message.get(STAMP_FIELD) if isinstance(message, dict) else None
    if isinstance(stamp, list) and len(stamp) == 2 and isinstance(stamp[0], str) \
            and isinstance(stamp[1], int) and not isinstance(stamp[1], bool):
        return stamp[0], stamp[1]
    return None
