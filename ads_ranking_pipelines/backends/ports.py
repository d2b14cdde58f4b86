"""Free TCP ports chosen ahead, for a process that binds them later: a Ray head's GCS, dashboard
and Ray Client server (``ray start`` needs them on its command line), a notebook server.

A port chosen ahead is open to any other process until its own binds it. So it is drawn at
random below the kernel's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``) and
above Ray's worker ports (10002-19999 by default): there no bind to port 0 and no outgoing
connection is ever given a port. They were drawn by binding port 0, from the very range the
kernel hands every such bind and connection, and it readily hands a just-released port out
again (measured: 3 ports chosen, then 10 binds to port 0, collided in 1 of 300 rounds). A Ray
node's own processes bind their ports as 0 (``local_nodes.SELF_BOUND_PORTS``), so one of them
could take its head's Ray Client server port, and the head ended right after its start.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

# Draws before giving up (a draw fails when the port is in use or in ``avoid``).
MAX_DRAWS = 1000
# Above Ray's default worker ports (``--min-worker-port``/``--max-worker-port``: 10002-19999).
RANGE_LOW = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def draw_range() -> tuple[int, int]:
    """The ports to draw from: from RANGE_LOW up to the kernel's ephemeral range; where that
    leaves fewer than 1,000 (a tuned kernel), up to 65535 (bind-checked, as before)."""
    try:
        ephemeral_low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768           # Linux's default
    high = ephemeral_low - 1 if ephemeral_low - 1 - RANGE_LOW >= 1000 else 65535
    return RANGE_LOW, high


def free_ports(n: int, host: str = "0.0.0.0", avoid: Collection[int] = ()) -> list[int]:
    """``n`` distinct ports nobody has bound now (checked on ``host``: every address by
    default), none of them in ``avoid`` (ports handed out earlier but not bound yet).

    Drawn with the system's randomness, not ``random``'s state, which processes started alike
    (or seeded by a test) share. Every socket stays bound until the end, so one call never
    repeats a port.
    """
    low, high = draw_range()
    draw = random.SystemRandom()
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        for _ in range(MAX_DRAWS):
            if len(ports) == n:
                break
            port = draw.randint(low, high)
            if port in avoid or port in ports:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(port)
    finally:
        for s in socks:
            s.close()
    if len(ports) < n:
        raise RuntimeError(f"found only {len(ports)} of {n} free ports in {low}-{high} on {host} "
                           f"outside the {len(avoid)} to avoid")
    return ports
