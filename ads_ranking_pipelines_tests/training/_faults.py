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
