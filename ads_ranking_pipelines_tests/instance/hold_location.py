"""A code location for the run-queue test: one job whose op holds its slot for a while."""

import time

import dagster as dg


class HoldConfig(dg.Config):
    seconds: float = 6.0


@dg.op
def hold(config: HoldConfig) -> None:
    time.sleep(config.seconds)


@dg.job
def hold_job():
    hold()


defs = dg.Definitions(jobs=[hold_job])
