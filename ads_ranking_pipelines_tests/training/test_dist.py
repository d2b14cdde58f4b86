"""The gloo-group helper the rank tests share: its ranks meet without a TCP port chosen up front."""

import socket

import pytest
import torch
import torch.distributed as dist

from . import dist as gloo


def _all_reduce_rank(rank: int, world: int, out_dir: str) -> None:
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    with open(f"{out_dir}/rank{rank}.txt", "w") as f:
        f.write(str(float(t)))


@pytest.mark.slow
def test_the_group_meets_while_another_process_holds_the_port_it_would_have_picked(tmp_path, monkeypatch):
    """CI failed once with EADDRINUSE: the helper picked a free port, another test process took it
    before rank 0 listened. Here the port a picker would return is held by a listener; the ranks
    still meet (through a file) and all-reduce."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        monkeypatch.setattr(gloo, "free_port", lambda: held.getsockname()[1], raising=False)
        gloo.run_on_gloo_group(_all_reduce_rank, str(tmp_path), timeout_s=120)
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)] == ["3.0", "3.0"]
