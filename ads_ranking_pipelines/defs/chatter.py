"""Library chatter in a Ray job's log: kept in the run's event log, but at DEBUG, so INFO reads like a story.

Each pattern names where the line comes from. Everything else (our lines, warnings we have not
seen, tracebacks) stays at INFO.
"""

from __future__ import annotations

import re

CHATTER = re.compile("|".join([
    r"\[TBE=[0-9a-f-]+\]",                                           # fbgemm TBE: argument dumps, feature gates, optimizer config
    r"Successfully loaded",                                          # fbgemm_gpu loading its libraries
    r"Progress bars disabled",                                       # Ray Data (we disable them on purpose)
    r"streaming_executor\.py:\d+ -- (Starting execution|Execution plan)",  # Ray Data per-dataset plan
    r"Reporting training result \d+: TrainingReport",               # Ray Train per-report repr
    r"Checkpoint successfully created at",                           # Ray Train per-checkpoint repr
    r"is_fx_tracing will return true",                              # torch.fx deprecation, once per rank
    r"RayDeprecationWarning: `ExecutionOptions\.exclude_resources`",  # Ray Data internal deprecation
    r"Actor with class name: 'PreemptionWatcher'.*constructor arguments",  # Ray Train internal actor size note
]))


def is_chatter(line: str) -> bool:
    return CHATTER.search(line) is not None
