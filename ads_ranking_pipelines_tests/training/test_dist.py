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


def _fail_on_rank_one(rank: int, world: int) -> None:
    if rank == 1:
        raise ValueError("rank one says no")
    dist.barrier()              # rank 0 would wait here for good: the group is stopped instead


def _draw(rank: int, world: int, out: str) -> None:
    with open(f"{out}-rank{rank}.txt", "w") as f:
        f.write(repr(torch.rand(3).tolist()))


@pytest.mark.slow
def test_a_failing_rank_is_reported_and_the_next_call_starts_on_fresh_processes(tmp_path):
    """The rank processes are kept between calls: a rank's error comes back with its traceback,
    the stuck group is replaced, and every call's torch generator starts where the process's did."""
    gloo.run_on_gloo_group(_draw, str(tmp_path / "a"), timeout_s=120)
    with pytest.raises(RuntimeError, match=r"(?s)rank 1 failed:.*ValueError: rank one says no"):
        gloo.run_on_gloo_group(_fail_on_rank_one, timeout_s=120)
    gloo.run_on_gloo_group(_draw, str(tmp_path / "b"), timeout_s=120)
    gloo.run_on_gloo_group(_draw, str(tmp_path / "c"), timeout_s=120)
    draws = {(call, r): (tmp_path / f"{call}-rank{r}.txt").read_text() for call in "abc" for r in (0, 1)}
    assert draws["b", 0] == draws["c", 0] and draws["b", 1] == draws["c", 1], draws   # kept processes
    assert draws["a", 0] != draws["b", 0], draws                                       # new processes


def _rank_one_fails_while_rank_zero_sleeps(rank: int, world: int) -> None:
    import time as _time

    if rank == 1:
        raise ValueError("rank one says no")
    _time.sleep(60)             # a rank that does not notice its peer's failure


@pytest.mark.slow
def test_a_failed_rank_is_reported_without_waiting_for_a_peer_that_never_answers():
    """One rank's error ends the call after a short grace, not at the call's timeout (a spawned
    group failed at once in the same case)."""
    import time

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="rank 1 failed"):
        gloo.run_on_gloo_group(_rank_one_fails_while_rank_zero_sleeps, timeout_s=120)
    assert time.monotonic() - t0 < 60
