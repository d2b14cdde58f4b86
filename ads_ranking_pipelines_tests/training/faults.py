"""Faults injected into the training loop through its callbacks (``train_loop`` ``callbacks``)."""

from __future__ import annotations

import os


class CrashOnce:
    """Rank ``rank`` kills its own process (like a lost worker node) when epoch ``epoch`` starts,
    once: the ``marker`` file records that it happened."""

    def __init__(self, rank: int, epoch: int, marker: str) -> None:
        self.rank, self.epoch, self.marker = rank, epoch, marker

    def on_epoch_start(self, rank: int, epoch: int) -> None:
        if rank == self.rank and epoch == self.epoch and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(f"rank {rank} exited at the start of epoch {epoch}\n")
            print(f"[test] CrashOnce: rank {rank} exits at the start of epoch {epoch}", flush=True)
            os._exit(1)


class CrashOnceAtNthEpoch:
    """Rank ``rank`` kills its own process when its worker process starts its ``nth`` epoch
    (counting over a range's days: with 2 epochs a day, the 3rd is day 2's first), once."""

    def __init__(self, rank: int, nth: int, marker: str) -> None:
        self.rank, self.nth, self.marker, self.seen = rank, nth, marker, 0

    def on_epoch_start(self, rank: int, epoch: int) -> None:
        if rank != self.rank:
            return
        self.seen += 1
        if self.seen == self.nth and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(f"rank {rank} exited at the start of its epoch start {self.nth}\n")
            print(f"[test] CrashOnceAtNthEpoch: rank {rank} exits at epoch start {self.nth}", flush=True)
            os._exit(1)
